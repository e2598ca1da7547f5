//! Linear memory: each call's own cap and the budget all calls share,
//! enforced by wasmtime's resource limiter (which also bounds tables).

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::bounds;

/// The size of a wasm page, the unit linear memory grows by.
const WASM_PAGE: usize = 64 << 10;

/// Linear memory all calls together may hold, so that the operator's
/// resident memory has a bound whatever its guests do. Counted as granted
/// (an upper bound on what guests can touch), taken when a call's memory is
/// created or grows and given back when its store goes. A call's first
/// memory waits, in line and within its deadline, for the budget to have
/// room; growing past it fails as growing past the call's own cap does.
#[derive(Clone, Debug, Default)]
pub(crate) struct GuestMemory {
    /// Free wasm pages; `None`: no budget.
    pages: Option<Arc<Semaphore>>,
    total_pages: usize,
}

impl GuestMemory {
    /// A budget of `bytes` (whole pages), or none.
    pub(crate) fn new(bytes: Option<usize>) -> Self {
        bytes.map_or_else(Self::default, |bytes| {
            let total_pages = bytes / WASM_PAGE;
            Self {
                pages: Some(Arc::new(Semaphore::new(total_pages))),
                total_pages,
            }
        })
    }

    fn total_bytes(&self) -> usize {
        self.total_pages * WASM_PAGE
    }
}

/// Which memory bound a call ran into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryBound {
    /// Its own cap, in bytes.
    Instance(usize),
    /// The budget all calls share, in bytes.
    Runtime(usize),
}

impl std::fmt::Display for MemoryBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Instance(bytes) => write!(f, "its {bytes}-byte memory limit"),
            Self::Runtime(bytes) => {
                write!(f, "the {bytes}-byte memory budget all providers share")
            }
        }
    }
}

/// Refuses memory growth beyond the cap or the shared budget and remembers
/// which, so a guest that then aborts is reported as out of memory, not as
/// a bare trap.
pub(crate) struct MemoryLimiter {
    max_bytes: usize,
    budget: GuestMemory,
    /// This call's share of the budget, given back on drop.
    held: Option<OwnedSemaphorePermit>,
    pub(crate) hit: Option<MemoryBound>,
}

impl MemoryLimiter {
    pub(crate) fn new(max_bytes: usize, budget: &GuestMemory) -> Self {
        Self {
            max_bytes,
            budget: budget.clone(),
            held: None,
            hit: None,
        }
    }

    /// Whether there is a shared budget to wait for (the async limiter).
    pub(crate) fn shares_a_budget(&self) -> bool {
        self.budget.pages.is_some()
    }

    /// Takes `pages` more of the budget. A call that holds none yet waits
    /// for them; one that holds some does not (two calls each holding part
    /// and waiting for the rest would wait until their deadlines).
    async fn reserve(&mut self, pages: usize) -> bool {
        let Some(free) = &self.budget.pages else {
            return true;
        };
        let held = self
            .held
            .as_ref()
            .map_or(0, OwnedSemaphorePermit::num_permits);
        // More than the whole budget never comes.
        let Ok(wanted) = u32::try_from(pages) else {
            return false;
        };
        if held + pages > self.budget.total_pages {
            return false;
        }
        let permit = if held == 0 {
            free.clone().acquire_many_owned(wanted).await.ok()
        } else {
            free.clone().try_acquire_many_owned(wanted).ok()
        };
        let Some(permit) = permit else {
            return false;
        };
        match &mut self.held {
            Some(held) => held.merge(permit),
            None => self.held = Some(permit),
        }
        true
    }
}

/// The limiter of a runtime without a shared budget: nothing to wait for,
/// so no future per growth.
impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.hit = Some(MemoryBound::Instance(self.max_bytes));
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= bounds::MAX_TABLE_ELEMENTS)
    }
}

/// The limiter of a runtime with a shared budget: the call's own cap, then
/// the budget, which a call's first memory may wait for.
#[async_trait::async_trait]
impl wasmtime::ResourceLimiterAsync for MemoryLimiter {
    async fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if !wasmtime::ResourceLimiter::memory_growing(self, current, desired, maximum)? {
            return Ok(false);
        }
        let pages = desired.saturating_sub(current).div_ceil(WASM_PAGE);
        if pages > 0 && !self.reserve(pages).await {
            self.hit = Some(MemoryBound::Runtime(self.budget.total_bytes()));
            return Ok(false);
        }
        Ok(true)
    }

    async fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        wasmtime::ResourceLimiter::table_growing(self, current, desired, maximum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiterAsync as _;

    const PAGE: usize = WASM_PAGE;

    #[tokio::test]
    async fn the_instance_cap_allows_its_size_and_refuses_a_page_more() {
        // Without a budget (the synchronous limiter)...
        let mut limiter = MemoryLimiter::new(4 * PAGE, &GuestMemory::new(None));
        assert!(!limiter.shares_a_budget());
        let grow = |l: &mut MemoryLimiter, from, to| {
            wasmtime::ResourceLimiter::memory_growing(l, from, to, None).unwrap()
        };
        assert!(grow(&mut limiter, 0, 4 * PAGE));
        assert_eq!(limiter.hit, None);
        assert!(!grow(&mut limiter, 4 * PAGE, 5 * PAGE));
        assert_eq!(limiter.hit, Some(MemoryBound::Instance(4 * PAGE)));
        // ...and with one larger than the cap.
        let mut limiter = MemoryLimiter::new(4 * PAGE, &GuestMemory::new(Some(64 * PAGE)));
        assert!(limiter.memory_growing(0, 4 * PAGE, None).await.unwrap());
        assert!(
            !limiter
                .memory_growing(4 * PAGE, 5 * PAGE, None)
                .await
                .unwrap()
        );
        assert_eq!(limiter.hit, Some(MemoryBound::Instance(4 * PAGE)));
    }

    #[tokio::test]
    async fn the_shared_budget_is_waited_for_and_given_back_when_a_call_ends() {
        let budget = GuestMemory::new(Some(4 * PAGE));
        let mut first = MemoryLimiter::new(64 * PAGE, &budget);
        // At the budget: granted.
        assert!(first.memory_growing(0, 2 * PAGE, None).await.unwrap());
        assert!(
            first
                .memory_growing(2 * PAGE, 4 * PAGE, None)
                .await
                .unwrap()
        );
        // One page over: waits while the first call holds it all...
        let mut second = MemoryLimiter::new(64 * PAGE, &budget);
        let waiting = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            second.memory_growing(0, PAGE, None),
        )
        .await;
        assert!(waiting.is_err(), "granted while the budget was in use");
        // ...and is granted once the first call's store goes.
        drop(first);
        assert!(second.memory_growing(0, PAGE, None).await.unwrap());
        assert_eq!(second.hit, None);
    }

    #[tokio::test]
    async fn a_call_holding_memory_is_refused_more_rather_than_kept_waiting() {
        let budget = GuestMemory::new(Some(4 * PAGE));
        let mut first = MemoryLimiter::new(64 * PAGE, &budget);
        let mut second = MemoryLimiter::new(64 * PAGE, &budget);
        assert!(first.memory_growing(0, 2 * PAGE, None).await.unwrap());
        assert!(second.memory_growing(0, 2 * PAGE, None).await.unwrap());
        assert!(
            !first
                .memory_growing(2 * PAGE, 3 * PAGE, None)
                .await
                .unwrap()
        );
        assert_eq!(first.hit, Some(MemoryBound::Runtime(4 * PAGE)));
        drop(second);
        assert!(
            first
                .memory_growing(2 * PAGE, 3 * PAGE, None)
                .await
                .unwrap()
        );
    }

    #[tokio::test]
    async fn more_than_the_whole_budget_is_refused_at_once() {
        // A call holding nothing would otherwise wait for pages that can
        // never come, until its deadline.
        let budget = GuestMemory::new(Some(4 * PAGE));
        let mut limiter = MemoryLimiter::new(64 * PAGE, &budget);
        let asked = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            limiter.memory_growing(0, 5 * PAGE, None),
        )
        .await;
        assert!(!asked.expect("refused, not awaited").unwrap());
        assert_eq!(limiter.hit, Some(MemoryBound::Runtime(4 * PAGE)));
        // At the whole budget: granted.
        assert!(limiter.memory_growing(0, 4 * PAGE, None).await.unwrap());
    }
}
