//! One provider call in a loop, for profilers: prints the wall time per
//! call and the minor page faults of the whole loop, and keeps the loop in
//! its own function so that callgrind can count only it:
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='*call_loop*' \
//!     target/release/deps/call_profile-<hash> generate 2000 1
//! ```
//!
//! Arguments: the export (`generate` or `info`, default `generate`), the
//! number of calls (default 20000), of pool slots (default as in
//! production; valgrind cannot reserve the address space of many, so give
//! it 1) and the bootstrap component (default `kubeadm_bootstrap.wasm`;
//! `python-kubeadm-bootstrap.wasm` for the Python one). Needs `make guests`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use capwasm::testing::{KUBEADM_JOIN_CONFIG, guest_path, requests};
use capwasm::wasm::{Capabilities, Limits, ProviderSource, ProviderSpec, Runtime, RuntimeSettings};

const WARMUP: u32 = 200;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let export = args.next().unwrap_or_else(|| "generate".to_owned());
    let calls: u32 = args.next().map_or(Ok(20_000), |n| n.parse())?;
    let mut settings = RuntimeSettings::default();
    if let Some(slots) = args.next() {
        settings.max_instances = slots.parse()?;
    }
    let component = args
        .next()
        .unwrap_or_else(|| "kubeadm_bootstrap.wasm".to_owned());

    // Calls are futures polled where they are awaited: here, on this thread.
    let executor = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let runtime = Runtime::new(settings, None)?;
    let loaded = executor.block_on(runtime.load(ProviderSpec {
        name: String::from("kubeadm"),
        source: ProviderSource::File(guest_path(&component)),
        sha256: None,
        limits: Limits::default(),
        capabilities: Capabilities::default(),
    }))?;
    runtime.registry().install(Arc::new(loaded));
    let request = requests::generate(KUBEADM_JOIN_CONFIG);
    let info = export == "info";
    call_loop(WARMUP, &executor, &runtime, &request, info)?;
    let faults = minor_faults()?;
    let started = Instant::now();
    call_loop(calls, &executor, &runtime, &request, info)?;
    let took = started.elapsed();
    let faults = minor_faults()? - faults;
    println!(
        "{export}: {calls} calls, {:.1} µs/call, {faults} minor page faults",
        (took / calls.max(1)).as_secs_f64() * 1e6,
    );
    Ok(())
}

async fn call(
    runtime: &Runtime,
    request: &capwasm::wasm::bootstrap::GenerateRequest,
    info: bool,
) -> Result<(), capwasm::wasm::CallError> {
    if info {
        runtime.info("kubeadm").await.map(drop)
    } else {
        runtime.generate("kubeadm", request).await.map(drop)
    }
}

/// Each call polled to completion on this thread, as a reconcile awaits it.
#[inline(never)]
fn call_loop(
    calls: u32,
    executor: &tokio::runtime::Runtime,
    runtime: &Runtime,
    request: &capwasm::wasm::bootstrap::GenerateRequest,
    info: bool,
) -> Result<(), capwasm::wasm::CallError> {
    for _ in 0..calls {
        black_box(executor.block_on(call(runtime, request, info)))?;
    }
    Ok(())
}

/// Minor page faults of this process so far (field 10 of /proc/self/stat).
fn minor_faults() -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The command name (field 2) may hold spaces; count from after it.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    Ok(after_name
        .split_whitespace()
        .nth(7)
        .unwrap_or("0")
        .parse()?)
}
