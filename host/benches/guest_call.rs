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
    Capabilities, Limits, PrecompiledCache, ProviderSource, Runtime, RuntimeSettings,
};

const CALLS: usize = 20_000;
const WARMUP: usize = 2_000;
const LOADS: usize = 5;
const MEMORY_PROVIDERS: usize = 20;

fn main() -> anyhow::Result<()> {
    let source = ProviderSource::Bytes(std::fs::read(guest_path("kubeadm_bootstrap.wasm"))?);
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
    let calls = timed(|| runtime.generate("kubeadm", &request).map(drop))?;
    let noop = timed(|| runtime.info("kubeadm").map(drop))?;

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

/// Durations of [`CALLS`] runs of `call`, sorted.
fn timed(
    mut call: impl FnMut() -> Result<(), capwasm::wasm::CallError>,
) -> anyhow::Result<Vec<Duration>> {
    let mut durations = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        call()?;
        durations.push(started.elapsed());
    }
    durations.sort();
    Ok(durations)
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn resident_kib() -> anyhow::Result<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm.split_whitespace().nth(1).unwrap_or("0").parse()?;
    Ok(pages * 4)
}
