//! What one call's `Store` holds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::bootstrap_tokens::BootstrapToken;
use super::bounds::STDERR_KEPT_BYTES;
use super::host::auth::Keys;
use super::host::http::{Egress, EgressPolicy};
use super::host::stderr::Tail;
use super::limits::Limits;
use super::memory::{GuestMemory, MemoryLimiter};

pub(crate) struct CallState {
    /// Built on first use: most calls never touch WASI, and building a
    /// context (random seeding, clock handles) is a measurable part of a
    /// call that does nothing else.
    wasi: Option<WasiCtx>,
    stderr: Option<Tail>,
    table: ResourceTable,
    http: WasiHttpCtx,
    egress: EgressPolicy,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) provider: Arc<str>,
    pub(crate) log_lines_left: u32,
    pub(crate) log_lines_dropped: u32,
    /// The guest's panic message, if it sent one (see `log.wit`).
    pub(crate) panic_message: Option<String>,
    /// How long the guest computed, for its provider's CPU share.
    pub(crate) compute: Compute,
    /// What `bootstrap-tokens.join-token` answers (a secret: never logged).
    pub(crate) join_token: Option<BootstrapToken>,
    /// Whether the guest asked for it.
    pub(crate) join_token_asked: bool,
}

/// The guest's computing since it was last charged: the wall time less
/// the time spent in host calls (waiting for a response, say).
pub(crate) struct Compute {
    since: Instant,
    in_host: Duration,
    entered_host: Option<Instant>,
}

impl Compute {
    fn new() -> Self {
        Self {
            since: Instant::now(),
            in_host: Duration::ZERO,
            entered_host: None,
        }
    }

    /// The guest calls into the host.
    pub(crate) fn enter_host(&mut self) {
        self.entered_host = Some(Instant::now());
    }

    /// The host returns to the guest.
    pub(crate) fn leave_host(&mut self) {
        if let Some(entered) = self.entered_host.take() {
            self.in_host += entered.elapsed();
        }
    }

    /// How long the guest computed since the last charge; starts anew.
    pub(crate) fn charge(&mut self) -> Duration {
        let now = Instant::now();
        let computed = now
            .saturating_duration_since(self.since)
            .saturating_sub(self.in_host);
        self.since = now;
        self.in_host = Duration::ZERO;
        computed
    }
}

/// Lines over the log limit are dropped as they come and reported once,
/// when the call ends, however it ends.
impl Drop for CallState {
    fn drop(&mut self) {
        if self.log_lines_dropped > 0 {
            tracing::warn!(
                provider = &*self.provider,
                dropped = self.log_lines_dropped,
                "the provider wrote more log lines than its limit; the rest were dropped"
            );
        }
    }
}

impl CallState {
    pub(crate) fn new(
        provider: Arc<str>,
        limits: &Limits,
        egress: &Arc<Egress>,
        keys: Option<Arc<Keys>>,
        memory: &GuestMemory,
    ) -> Self {
        Self {
            wasi: None,
            stderr: None,
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            egress: EgressPolicy::new(provider.clone(), egress.clone(), limits.deadline, keys),
            limiter: MemoryLimiter::new(limits.memory_bytes, memory),
            provider,
            log_lines_left: limits.max_log_lines,
            log_lines_dropped: 0,
            panic_message: None,
            compute: Compute::new(),
            join_token: None,
            join_token_asked: false,
        }
    }

    /// The first host that turned down the credentials of this call's
    /// authenticated requests, and its status.
    pub(crate) fn rejected(&self) -> Option<(String, u16)> {
        self.egress.rejected()
    }

    /// What the guest said before it died: what it wrote to stderr (a
    /// guest linking Rust's standard library prints its panic there, an
    /// interpreter its traceback), lossily decoded, then the panic message it
    /// sent through `log` (as a `no_std` guest built with the SDK does);
    /// with the bytes of stderr written before those kept. Empty if neither.
    pub(crate) fn last_words(&self) -> (String, usize) {
        let (stderr, before) = self.stderr.as_ref().map(Tail::contents).unwrap_or_default();
        let stderr = stderr.trim_end();
        let said = match (stderr.is_empty(), &self.panic_message) {
            (_, None) => stderr.to_owned(),
            (true, Some(error)) => error.clone(),
            (false, Some(error)) => format!("{stderr}\n{error}"),
        };
        (said, before)
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let stderr = &mut self.stderr;
        let ctx = self.wasi.get_or_insert_with(|| {
            let pipe = Tail::new(STDERR_KEPT_BYTES);
            *stderr = Some(pipe.clone());
            // No args, environment, preopened directories or inherited
            // stdio; no socket may be opened, bound or looked up (the
            // default address check refuses every address as well).
            WasiCtxBuilder::new()
                .stderr(pipe)
                .allow_tcp(false)
                .allow_udp(false)
                .allow_ip_name_lookup(false)
                .build()
        });
        WasiCtxView {
            ctx,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.egress,
        }
    }
}
