//! Runtime figures, one line each:
//!
//!     guest-call: p50=<µs> p99=<µs>     fresh instance + kubeadm-bootstrap `generate`
//!     guest-call-noop: p50=<µs> p99=<µs> fresh instance + `info` (the host's share of a call)
//!     guest-compile: <ms>               compiling kubeadm-bootstrap
//!     guest-load-precompiled: <ms>      a whole load (read, digest, deserialise, check) from the cache
//!     guest-idle-memory: <KiB>          resident memory added per loaded provider
//!
//! Run with `make bench` (needs `make guests`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use capwasm::testing::{KUBEADM_JOIN_CONFIG, guest_path, requests};
use capwasm::wasm::{
    CallError, Capabilities, Limits, PrecompiledCache, ProviderSource, ProviderSpec, Runtime,
    RuntimeSettings,
};

const CALLS: usize = 20_000;
const WARMUP: usize = 2_000;
const LOADS: usize = 5;
const MEMORY_PROVIDERS: usize = 20;

fn main() -> anyhow::Result<()> {
    // Calls are futures polled where they are awaited: here, on this thread.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(figures())
}

async fn figures() -> anyhow::Result<()> {
    let source = ProviderSource::Bytes(std::fs::read(guest_path("kubeadm_bootstrap.wasm"))?);
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
    let mut compile = Vec::with_capacity(LOADS);
    for _ in 0..LOADS {
        compile.push(load(&cold, "k").await?.compile_time);
    }
    compile.sort();

    // Precompiled: fill the cache once, then whole loads from it.
    let runtime = Runtime::new(settings(Some(cache)), None)?;
    load(&runtime, "fill").await?;
    let mut precompiled = Vec::with_capacity(LOADS);
    for _ in 0..LOADS {
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
    timed(WARMUP, || runtime.generate("kubeadm", &request)).await?;
    let calls = timed(CALLS, || runtime.generate("kubeadm", &request)).await?;
    let noop = timed(CALLS, || runtime.info("kubeadm")).await?;

    // Idle memory: resident growth over many loaded providers, per provider.
    let before = resident_kib()?;
    let mut held = Vec::with_capacity(MEMORY_PROVIDERS);
    for i in 0..MEMORY_PROVIDERS {
        held.push(load(&runtime, &format!("idle-{i}")).await?);
    }
    let per_provider = resident_kib()?.saturating_sub(before) / MEMORY_PROVIDERS as u64;
    drop(held);

    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    let millis = |d: Duration| d.as_secs_f64() * 1e3;
    let percentiles = |d: &[Duration]| {
        format!(
            "p50={:.1} p99={:.1}",
            micros(percentile(d, 50)),
            micros(percentile(d, 99))
        )
    };
    println!("guest-call: {}", percentiles(&calls));
    println!("guest-call-noop: {}", percentiles(&noop));
    println!("guest-compile: {:.1}", millis(compile[LOADS / 2]));
    println!(
        "guest-load-precompiled: {:.2}",
        millis(precompiled[LOADS / 2])
    );
    println!("guest-idle-memory: {per_provider}");
    Ok(())
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
