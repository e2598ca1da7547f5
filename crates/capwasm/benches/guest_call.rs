//! Runtime figures, one line each, for the Rust kubeadm-bootstrap:
//!
//!     guest-call: p50=<µs> p99=<µs>     fresh instance + kubeadm-bootstrap `generate`
//!     guest-call-noop: p50=<µs> p99=<µs> fresh instance + `info` (the host's share of a call)
//!     guest-compile: <ms>               compiling kubeadm-bootstrap
//!     guest-load-precompiled: <ms>      a whole load (read, digest, deserialise, check) from the cache
//!     guest-idle-memory: <KiB>          resident memory added per loaded provider
//!
//! then one line per language for the same provider and call:
//!
//!     language=<name> size=<bytes> compile=<ms> load-precompiled=<ms> call: p50=<µs> p99=<µs> noop: p50=<µs> p99=<µs> idle-memory=<KiB>
//!
//! Run with `make bench` (needs `make guests`); `BENCH_LANGUAGES=python`
//! measures only the languages named.

use std::sync::Arc;
use std::time::{Duration, Instant};

use capwasm::testing::{KUBEADM_JOIN_CONFIG, guest_path, requests};
use capwasm::wasm::{
    CallError, Capabilities, Limits, PrecompiledCache, ProviderSource, ProviderSpec, Runtime,
    RuntimeSettings,
};

/// One implementation of kubeadm-bootstrap, and how many of each
/// measurement it gets (a Python call costs a hundred Rust ones).
struct Language {
    name: &'static str,
    file: &'static str,
    calls: usize,
    warmup: usize,
    loads: usize,
    idle_providers: usize,
}

const LANGUAGES: [Language; 3] = [
    Language {
        name: "rust",
        file: "kubeadm_bootstrap.wasm",
        calls: 20_000,
        warmup: 2_000,
        loads: 5,
        idle_providers: 20,
    },
    Language {
        name: "python",
        file: "python-kubeadm-bootstrap.wasm",
        calls: 500,
        warmup: 50,
        loads: 3,
        idle_providers: 5,
    },
    Language {
        name: "js",
        file: "js-kubeadm-bootstrap.wasm",
        calls: 500,
        warmup: 50,
        loads: 3,
        idle_providers: 5,
    },
];

/// What one language's figures are.
struct Figures {
    size: usize,
    compile: Duration,
    precompiled: Duration,
    calls: Vec<Duration>,
    noop: Vec<Duration>,
    idle_kib: u64,
}

fn main() -> anyhow::Result<()> {
    // Calls are futures polled where they are awaited: here, on this thread.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(figures())
}

async fn figures() -> anyhow::Result<()> {
    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    let millis = |d: Duration| d.as_secs_f64() * 1e3;
    let percentiles = |d: &[Duration]| {
        format!(
            "p50={:.1} p99={:.1}",
            micros(percentile(d, 50)),
            micros(percentile(d, 99))
        )
    };
    // `BENCH_LANGUAGES=python` (comma-separated) measures only those, for a profile.
    let only = std::env::var("BENCH_LANGUAGES").ok();
    let wanted = |name: &str| {
        only.as_deref()
            .is_none_or(|only| only.split(',').any(|n| n == name))
    };
    for language in LANGUAGES.iter().filter(|l| wanted(l.name)) {
        let f = measure(language).await?;
        if language.name == "rust" {
            println!("guest-call: {}", percentiles(&f.calls));
            println!("guest-call-noop: {}", percentiles(&f.noop));
            println!("guest-compile: {:.1}", millis(f.compile));
            println!("guest-load-precompiled: {:.2}", millis(f.precompiled));
            println!("guest-idle-memory: {}", f.idle_kib);
        }
        println!(
            "language={} size={} compile={:.1} load-precompiled={:.2} call: {} noop: {} idle-memory={}",
            language.name,
            f.size,
            millis(f.compile),
            millis(f.precompiled),
            percentiles(&f.calls),
            percentiles(&f.noop),
            f.idle_kib
        );
    }
    Ok(())
}

async fn measure(language: &Language) -> anyhow::Result<Figures> {
    let bytes = std::fs::read(guest_path(language.file))?;
    let size = bytes.len();
    let source = ProviderSource::Bytes(bytes);
    let cache_dir = tempfile::tempdir()?;
    let cache = PrecompiledCache::new(cache_dir.path());
    let settings = |cache: Option<PrecompiledCache>| RuntimeSettings {
        cache,
        ..RuntimeSettings::default()
    };
    let load = async |runtime: &Runtime, name: &str| {
        runtime
            .load(ProviderSpec {
                name: String::from(name),
                source: source.clone(),
                sha256: None,
                limits: Limits::default(),
                capabilities: Capabilities::default(),
            })
            .await
    };

    // Compile: median of a few cold loads (no cache).
    let cold = Runtime::new(settings(None), None)?;
    let mut compile = Vec::with_capacity(language.loads);
    for _ in 0..language.loads {
        compile.push(load(&cold, "k").await?.compile_time);
    }
    compile.sort();
    drop(cold);

    // Precompiled: fill the cache once, then whole loads from it.
    let runtime = Runtime::new(settings(Some(cache)), None)?;
    load(&runtime, "fill").await?;
    let mut precompiled = Vec::with_capacity(language.loads);
    for _ in 0..language.loads {
        let p = load(&runtime, "k").await?;
        assert!(p.from_cache);
        precompiled.push(p.load_time);
    }
    precompiled.sort();

    // Calls.
    runtime
        .registry()
        .install(Arc::new(load(&runtime, "kubeadm").await?));
    let request = requests::generate(KUBEADM_JOIN_CONFIG);
    timed(language.warmup, || runtime.generate("kubeadm", &request)).await?;
    let calls = timed(language.calls, || runtime.generate("kubeadm", &request)).await?;
    let noop = timed(language.calls, || runtime.info("kubeadm")).await?;

    // Idle memory: resident growth over many loaded providers, per provider.
    let before = resident_kib()?;
    let mut held = Vec::with_capacity(language.idle_providers);
    for i in 0..language.idle_providers {
        held.push(load(&runtime, &format!("idle-{i}")).await?);
    }
    let idle_kib = resident_kib()?.saturating_sub(before) / language.idle_providers as u64;
    drop(held);
    Ok(Figures {
        size,
        compile: compile[language.loads / 2],
        precompiled: precompiled[language.loads / 2],
        calls,
        noop,
        idle_kib,
    })
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn resident_kib() -> anyhow::Result<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm.split_whitespace().nth(1).unwrap_or("0").parse()?;
    Ok(pages * 4)
}

/// How long each of `n` calls of `call` took, sorted.
async fn timed<T, F: Future<Output = Result<T, CallError>>>(
    n: usize,
    mut call: impl FnMut() -> F,
) -> Result<Vec<Duration>, CallError> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        call().await?;
        times.push(started.elapsed());
    }
    times.sort();
    Ok(times)
}
