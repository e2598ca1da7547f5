//! The guest's global allocator: a bump arena in front of dlmalloc.
//!
//! Every call runs in a fresh instance, so memory never needs to outlive a
//! call and a free list buys nothing: allocating is aligning a cursor and
//! freeing is a no-op, except that freeing or resizing the latest
//! allocation moves the cursor back (which covers a growing `String` or
//! `Vec`). The arena is capped at [`ARENA_BYTES`] so that a guest that
//! allocates and frees a lot dirties a bounded number of pages, each of
//! which the host resets after the call; what does not fit goes to
//! dlmalloc, which reuses freed memory.
//! The host's memory cap applies either way: the arena is part of the
//! module's initial memory.
//!
//! Native builds (unit tests) keep the system allocator.
// A global allocator is unsafe by contract; this is the SDK's only one.
#![allow(unsafe_code)]

use core::alloc::{GlobalAlloc, Layout};
use core::cell::{Cell, UnsafeCell};
use core::ptr;

/// Where what does not fit goes: dlmalloc, which reuses freed memory (the
/// system allocator in native tests).
#[cfg(target_arch = "wasm32")]
use dlmalloc::GlobalDlmalloc as Fallback;
#[cfg(not(target_arch = "wasm32"))]
use std::alloc::System as Fallback;

/// Bytes served by bumping before the standard allocator takes over.
const ARENA_BYTES: usize = 64 << 10;

/// Every allocation of a provider built with the `arena` feature (on by
/// default) goes through the arena first.
#[cfg(all(target_arch = "wasm32", feature = "arena"))]
#[global_allocator]
static ALLOCATOR: Arena = Arena::new();

/// A bump arena of [`ARENA_BYTES`] in the module's zeroed data.
struct Arena {
    bytes: UnsafeCell<[u8; ARENA_BYTES]>,
    /// Offset of the first free byte.
    next: Cell<usize>,
}

// SAFETY: wasm32-wasip2 components are single-threaded: nothing can reach
// the arena from two threads.
unsafe impl Sync for Arena {}

impl Arena {
    /// An empty arena. The array is built at compile time, for the static.
    #[allow(clippy::large_stack_arrays)]
    const fn new() -> Self {
        Self {
            bytes: UnsafeCell::new([0; ARENA_BYTES]),
            next: Cell::new(0),
        }
    }

    fn base(&self) -> *mut u8 {
        self.bytes.get().cast()
    }

    /// The offset of `ptr` in the arena, if it is in it.
    fn offset_of(&self, ptr: *mut u8) -> Option<usize> {
        let offset = ptr.addr().wrapping_sub(self.base().addr());
        (offset < ARENA_BYTES).then_some(offset)
    }

    /// Room for `layout` at the cursor, if the arena has it.
    fn bump(&self, layout: Layout) -> Option<*mut u8> {
        let base = self.base().addr();
        let aligned = (base + self.next.get()).checked_next_multiple_of(layout.align())? - base;
        let end = aligned.checked_add(layout.size())?;
        if end > ARENA_BYTES {
            return None;
        }
        self.next.set(end);
        Some(self.base().wrapping_add(aligned))
    }
}

// SAFETY: blocks handed out never overlap: each comes from beyond the
// cursor, which moves back only over the latest block when that is freed
// or resized, or from `Fallback`, which owns everything outside the arena.
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            Some(ptr) => ptr,
            // SAFETY: the caller's contract for `layout` is passed on.
            None => unsafe { Fallback.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match self.offset_of(ptr) {
            Some(offset) => {
                if offset + layout.size() == self.next.get() {
                    self.next.set(offset);
                }
            }
            // SAFETY: outside the arena, `ptr` came from `Fallback`.
            None => unsafe { Fallback.dealloc(ptr, layout) },
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Some(offset) = self.offset_of(ptr) else {
            // SAFETY: outside the arena, `ptr` came from `Fallback`.
            return unsafe { Fallback.realloc(ptr, layout, new_size) };
        };
        let latest = offset + layout.size() == self.next.get();
        if latest && offset + new_size <= ARENA_BYTES {
            self.next.set(offset + new_size);
            return ptr;
        }
        if new_size <= layout.size() {
            return ptr;
        }
        // SAFETY: `realloc`'s contract makes `new_size` with the old
        // alignment a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: as for `alloc`.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are live, at least `layout.size()` long,
            // and distinct (the old one is not the latest, or the new one
            // came from `Fallback`).
            unsafe {
                ptr::copy_nonoverlapping(ptr, new, layout.size());
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).expect("valid layout")
    }

    #[test]
    fn arena_bumps_aligned_and_takes_back_only_the_latest_block() {
        let arena = Box::new(Arena::new());
        let a = arena.bump(layout(3, 1)).expect("room");
        let b = arena.bump(layout(8, 8)).expect("room");
        assert_eq!(b as usize % 8, 0);
        assert!(b as usize >= a as usize + 3);
        let after_b = arena.next.get();
        unsafe { arena.dealloc(a, layout(3, 1)) };
        assert_eq!(arena.next.get(), after_b, "a is not the latest block");
        unsafe { arena.dealloc(b, layout(8, 8)) };
        assert!(arena.next.get() < after_b, "b was the latest block");
    }

    #[test]
    fn arena_grows_the_latest_block_in_place_and_copies_others() {
        let arena = Box::new(Arena::new());
        let a = unsafe { arena.alloc(layout(4, 1)) };
        unsafe { a.copy_from_nonoverlapping(b"abcd".as_ptr(), 4) };
        let grown = unsafe { arena.realloc(a, layout(4, 1), 64) };
        assert_eq!(grown, a);
        let _b = arena.bump(layout(1, 1)).expect("room");
        let moved = unsafe { arena.realloc(a, layout(64, 1), 128) };
        assert_ne!(moved, a);
        assert_eq!(unsafe { core::slice::from_raw_parts(moved, 4) }, b"abcd");
    }

    #[test]
    fn arena_hands_what_does_not_fit_to_the_fallback_allocator() {
        let arena = Box::new(Arena::new());
        assert!(arena.bump(layout(ARENA_BYTES + 1, 1)).is_none());
        let big = unsafe { arena.alloc(layout(ARENA_BYTES + 1, 1)) };
        assert!(!big.is_null());
        assert!(arena.offset_of(big).is_none());
        unsafe { arena.dealloc(big, layout(ARENA_BYTES + 1, 1)) };
        assert_eq!(arena.next.get(), 0);
    }
}
