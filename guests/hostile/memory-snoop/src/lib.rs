//! Hostile test guest: `generate` looks for what earlier calls left in its
//! memory, then leaves its own owner's name there for the next call.
//!
//! Instances reuse pool slots whose pages the host keeps mapped, so every
//! byte a call dirtied must be back to its initial value before the next
//! call starts. The guest looks in two places: a static buffer (part of
//! the module's initial memory, restored from its image) and pages it
//! grows the memory by (which must read as zeros). It reports, as a shell
//! comment, how many bytes it found that are not what a fresh instance
//! holds, and what the first of them spell.
#![no_std]
// Reading memory outside any allocation is this guest's whole purpose.
#![allow(unsafe_code)]

extern crate alloc;
// The unit tests run natively, with the standard library's harness.
#[cfg(test)]
extern crate std;

use core::ptr;

use capwasm_provider_sdk::bootstrap::{BootstrapProvider, GenerateRequest};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{BootstrapData, BootstrapFormat, ProviderError};

/// Bytes of the static buffer.
const SCRATCH_BYTES: usize = 64 << 10;
/// Pages (64 KiB) grown per call: 2 MiB.
const GROWN_PAGES: usize = 32;
/// Bytes of leftover data quoted in the report.
const QUOTED_BYTES: usize = 64;

static mut SCRATCH: [u8; SCRATCH_BYTES] = [0; SCRATCH_BYTES];

struct MemorySnoop;

impl BootstrapProvider for MemorySnoop {
    fn config_schema() -> String {
        r#"{"type": "object"}"#.to_owned()
    }

    fn generate(request: GenerateRequest) -> Result<BootstrapData, ProviderError> {
        let mark = request.owner_name.as_bytes();
        if mark.is_empty() {
            return Err(ProviderError::terminal(
                "NoOwner",
                "an owner name is needed as the mark",
            ));
        }
        // SAFETY: the guest is single-threaded and nothing else refers to
        // SCRATCH; the raw pointer avoids a reference to a `static mut`.
        let scratch = unsafe { &mut *ptr::addr_of_mut!(SCRATCH) };
        let scratch_report = snoop_and_mark(scratch, mark);

        let grown = grow(GROWN_PAGES)
            .ok_or_else(|| ProviderError::terminal("GrowFailed", "memory.grow refused"))?;
        let grown_report = snoop_and_mark(grown, mark);

        let script = format!("#!/bin/sh\n# scratch: {scratch_report}\n# grown: {grown_report}\n");
        Ok(BootstrapData {
            format: BootstrapFormat::ShellScript,
            value: script.into_bytes(),
        })
    }
}

/// Counts the bytes of `region` that are not zero, quoting the first of
/// them, then fills `region` with `mark`.
fn snoop_and_mark(region: &mut [u8], mark: &[u8]) -> String {
    let leftover = region.iter().filter(|&&b| b != 0).count();
    let quoted = region
        .iter()
        .position(|&b| b != 0)
        .map(|at| {
            String::from_utf8_lossy(&region[at..(at + QUOTED_BYTES).min(region.len())]).into_owned()
        })
        .unwrap_or_default();
    for (byte, m) in region.iter_mut().zip(mark.iter().cycle()) {
        *byte = *m;
    }
    format!("leftover={leftover} quoted={quoted:?}")
}

/// Grows the memory by `pages` and returns the new pages, or `None` when
/// the host refuses.
#[cfg(target_arch = "wasm32")]
fn grow(pages: usize) -> Option<&'static mut [u8]> {
    const PAGE_BYTES: usize = 64 << 10;
    let old = core::arch::wasm32::memory_grow(0, pages);
    if old == usize::MAX {
        return None;
    }
    // SAFETY: the pages were just added to the memory and nothing else
    // (the allocator included) knows of them.
    Some(unsafe {
        core::slice::from_raw_parts_mut(
            ptr::without_provenance_mut(old * PAGE_BYTES),
            pages * PAGE_BYTES,
        )
    })
}

/// Native builds exist only for unit tests and lints.
#[cfg(not(target_arch = "wasm32"))]
fn grow(_pages: usize) -> Option<&'static mut [u8]> {
    None
}

capwasm_provider_sdk::export_bootstrap_provider!(MemorySnoop);

#[cfg(test)]
mod tests {
    use super::*;

    /// The report the host test reads says what an earlier mark left.
    #[test]
    fn a_second_look_finds_the_first_mark() {
        let mut region = vec![0u8; 100];
        assert_eq!(
            snoop_and_mark(&mut region, b"abc"),
            r#"leftover=0 quoted="""#
        );
        let second = snoop_and_mark(&mut region, b"xyz");
        assert!(
            second.starts_with("leftover=100 quoted=\"abcabc"),
            "{second}"
        );
    }
}
