//! Runtime figures, one line each:
//!
//!     guest-call: p50=<µs> p99=<µs>     fresh instance + kubeadm-bootstrap `generate`
//!     guest-compile: <ms>               compiling kubeadm-bootstrap
//!     guest-load-precompiled: <ms>      a whole load (read, digest, deserialise, check) from the cache
//!     guest-idle-memory: <KiB>          resident memory added per loaded provider
//!
//! Run with `make bench` (needs `make guests`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capwasm::testing::requests;
use capwasm::wasm::{
    Capabilities, Limits, PrecompiledCache, ProviderSource, Runtime, RuntimeSettings,
};

const KUBEADM_JOIN_CONFIG: &str = r#"{"mode": "join", "token": "abcdef.0123456789abcdef",
  "caCertHashes": ["sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"]}"#;
const CALLS: usize = 20_000;
const WARMUP: usize = 2_000;
const LOADS: usize = 5;
const MEMORY_PROVIDERS: usize = 20;

fn main() -> anyhow::Result<()> {
    let dir = std::env::var_os("CAPWASM_GUESTS_DIR").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../guests/target/wasm32-wasip2/release"
            ))
        },
        PathBuf::from,
    );
    let source = ProviderSource::Bytes(std::fs::read(dir.join("kubeadm_bootstrap.wasm"))?);
    let cache_dir = tempfile::tempdir()?;
    let cache = PrecompiledCache::new(cache_dir.path());
    let settings = |cache: Option<PrecompiledCache>| RuntimeSettings {
        cache,
        ..RuntimeSettings::default()
    };
    let load = |runtime: &Runtime, name: &str| {
        runtime.load_blocking(
            name,
            source.clone(),
            None,
            Limits::default(),
            Capabilities::default(),
        )
    };

    // Compile: median of a few cold loads (no cache).
    let cold = Runtime::new(settings(None), None)?;
    let mut compile: Vec<Duration> = (0..LOADS)
        .map(|_| load(&cold, "k").map(|p| p.compile_time))
        .collect::<Result<_, _>>()?;
    compile.sort();

    // Precompiled: fill the cache once, then whole loads from it.
    let runtime = Runtime::new(settings(Some(cache)), None)?;
    load(&runtime, "fill")?;
    let mut precompiled: Vec<Duration> = (0..LOADS)
        .map(|_| {
            let p = load(&runtime, "k")?;
            assert!(p.from_cache);
            Ok(p.load_time)
        })
        .collect::<Result<_, capwasm::wasm::Error>>()?;
    precompiled.sort();

    // Calls.
    runtime
        .registry()
        .install(Arc::new(load(&runtime, "kubeadm")?));
    let request = requests::generate(KUBEADM_JOIN_CONFIG);
    for _ in 0..WARMUP {
        runtime.generate("kubeadm", &request)?;
    }
    let mut calls = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        runtime.generate("kubeadm", &request)?;
        calls.push(started.elapsed());
    }
    calls.sort();
    let percentile = |p: usize| calls[(calls.len() * p / 100).min(calls.len() - 1)];

    // Idle memory: resident growth over many loaded providers, per provider.
    let before = resident_kib()?;
    let mut held = Vec::with_capacity(MEMORY_PROVIDERS);
    for i in 0..MEMORY_PROVIDERS {
        held.push(load(&runtime, &format!("idle-{i}"))?);
    }
    let per_provider = resident_kib()?.saturating_sub(before) / MEMORY_PROVIDERS as u64;
    drop(held);

    let micros = |d: Duration| d.as_secs_f64() * 1e6;
    let millis = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "guest-call: p50={:.1} p99={:.1}",
        micros(percentile(50)),
        micros(percentile(99))
    );
    println!("guest-compile: {:.1}", millis(compile[LOADS / 2]));
    println!(
        "guest-load-precompiled: {:.2}",
        millis(precompiled[LOADS / 2])
    );
    println!("guest-idle-memory: {per_provider}");
    Ok(())
}

fn resident_kib() -> anyhow::Result<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm.split_whitespace().nth(1).unwrap_or("0").parse()?;
    Ok(pages * 4)
}
