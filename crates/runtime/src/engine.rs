//! The one wasmtime `Engine`: component model, pooling allocator, epoch
//! interruption — and the ticker that makes epochs advance, started in the
//! same place so that a guest can never run without yielding.

use std::sync::mpsc;

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::Error;
use super::bounds::{
    EPOCH_TICK, MAX_CORE_INSTANCES_PER_COMPONENT, MAX_MEMORIES_PER_COMPONENT,
    MAX_TABLES_PER_COMPONENT,
};

/// Linear memory a reused pool slot keeps mapped (when the kernel can tell
/// which pages a call dirtied): a Rust guest's 1 MiB stack comes first, then
/// its data and heap. Only pages a call dirtied stay resident.
const KEEP_RESIDENT_BYTES: usize = 2 << 20;
/// Tables up to this size are reset with a memset, without a system call.
const TABLE_KEEP_RESIDENT_BYTES: usize = 4096;

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
pub(crate) struct EpochTicker {
    _stop: mpsc::Sender<()>,
}

pub(crate) fn new(
    max_memory_bytes: usize,
    max_instances: u32,
) -> Result<(Engine, EpochTicker), Error> {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(max_instances)
        // A Rust component holds a few core instances (its module plus shims).
        .total_core_instances(max_instances * 8)
        .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
        .total_memories(max_instances * MAX_MEMORIES_PER_COMPONENT)
        .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
        .total_tables(max_instances * MAX_TABLES_PER_COMPONENT)
        .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
        .max_memory_size(max_memory_bytes)
        .table_keep_resident(TABLE_KEEP_RESIDENT_BYTES)
        // A call runs on a fiber stack of its own, from the pool.
        .total_stacks(max_instances);
    // Reusing a slot otherwise means madvise on release and a page fault
    // for every page the next call touches, which on a VM costs more than
    // the call itself. PAGEMAP_SCAN (Linux 6.7+) finds the pages a call
    // dirtied, so only those are copied back from the image or zeroed and
    // they stay mapped. Without it, keeping pages resident would memset the
    // whole range per call, which costs more than the faults it saves.
    if PoolingAllocationConfig::is_pagemap_scan_available() {
        pool.pagemap_scan(Enabled::Yes)
            .linear_memory_keep_resident(KEEP_RESIDENT_BYTES);
    }

    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    let engine = Engine::new(&config).map_err(Error::Engine)?;

    let (stop, stopped) = mpsc::channel::<()>();
    let ticking = engine.clone();
    std::thread::Builder::new()
        .name("capwasm-epoch".into())
        .spawn(move || {
            // The sender is never used: its drop ends the wait with Disconnected.
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(EPOCH_TICK) {
                ticking.increment_epoch();
            }
        })
        .map_err(|e| Error::Engine(wasmtime::Error::new(e)))?;
    Ok((engine, EpochTicker { _stop: stop }))
}
