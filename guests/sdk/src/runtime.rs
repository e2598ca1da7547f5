//! What the standard library would give a component and a `no_std`
//! provider must bring: wasi-libc's memory functions, `cabi_realloc` (how
//! the host allocates what it passes in) and the panic handler, which hands
//! the panic's message to the host through `log` (marked as a panic, see
//! `log.wit`) for the host to report with the trap, and aborts the call.
//!
//! The export macros define the two symbols in the provider's crate,
//! calling these functions, unless told the provider links the standard
//! library: whether a crate has `std` is known only there (a Cargo feature
//! would be unified across a workspace building both kinds).
// Exporting a symbol and declaring a link are unsafe by definition.
#![allow(unsafe_code)]

use alloc::alloc::{Layout, alloc, realloc};
use alloc::string::String;
use core::fmt::{self, Write as _};
use core::panic::PanicInfo;
use core::ptr;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::bindings::infrastructure::capwasm::provider::log::{Level, log};

// Nothing links wasi-libc otherwise, whose `memcmp`, `memcpy` and friends
// the compiler's output calls on this target. Only those come in: none of
// them imports anything. The block declares nothing.
#[link(name = "c")]
unsafe extern "C" {}

/// The canonical ABI's allocator, as the standard library defines it.
///
/// # Safety
///
/// Called by the host as the canonical ABI specifies: `old_ptr` and
/// `old_len` describe a block from an earlier call (or are 0), and `align`
/// is a power of two.
pub unsafe fn cabi_realloc(
    old_ptr: *mut u8,
    old_len: usize,
    align: usize,
    new_len: usize,
) -> *mut u8 {
    let ptr = if old_len == 0 {
        if new_len == 0 {
            return ptr::without_provenance_mut(align);
        }
        // SAFETY: the ABI's contract: non-zero size, power-of-two alignment.
        unsafe { alloc(Layout::from_size_align_unchecked(new_len, align)) }
    } else {
        // SAFETY: the ABI's contract: the block came from this function.
        unsafe {
            realloc(
                old_ptr,
                Layout::from_size_align_unchecked(old_len, align),
                new_len,
            )
        }
    };
    if ptr.is_null() {
        core::arch::wasm32::unreachable();
    }
    ptr
}

/// Bytes of a panic message kept; the host keeps no more either.
const MESSAGE_BYTES: usize = 1024;

/// Set by the first panic: a panic while reporting one (say, formatting a
/// value whose `Display` panics) aborts straight away.
static PANICKING: AtomicBool = AtomicBool::new(false);

/// The panic handler: hands the message to the host once (marked as a
/// panic, so that the host reports it with the trap), then aborts the call.
pub fn panic(info: &PanicInfo<'_>) -> ! {
    if !PANICKING.swap(true, Ordering::Relaxed) {
        // A fixed buffer: the panic may be an allocation failure.
        let mut message = Truncating::default();
        let _ = match info.location() {
            Some(at) => write!(message, "panicked at {at}: {}", info.message()),
            None => write!(message, "panicked: {}", info.message()),
        };
        // The panic marker (see log.wit): empty strings do not allocate.
        log(
            Level::Error,
            message.as_str(),
            &[(String::new(), String::new())],
        );
    }
    core::arch::wasm32::unreachable()
}

/// The first [`MESSAGE_BYTES`] of what is written to it, cut at a
/// character boundary.
struct Truncating {
    bytes: [u8; MESSAGE_BYTES],
    len: usize,
}

impl Default for Truncating {
    fn default() -> Self {
        Self {
            bytes: [0; MESSAGE_BYTES],
            len: 0,
        }
    }
}

impl Truncating {
    fn as_str(&self) -> &str {
        // Only whole characters are ever copied in.
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl fmt::Write for Truncating {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = MESSAGE_BYTES - self.len;
        let mut end = s.len().min(room);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.bytes[self.len..self.len + end].copy_from_slice(&s.as_bytes()[..end]);
        self.len += end;
        Ok(())
    }
}
