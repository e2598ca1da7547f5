//! Every bound on what a guest may make the host spend, in one place: the
//! per-call limits a ProviderModule may change (default and the CRD's
//! range, in the field's unit), the operator's flags that bound its
//! providers (default and range, in the flag's unit), and the fixed bounds
//! of the code that enforces them. The code that enforces a bound reads it
//! from here; so do the API types' schema ranges and the flags' defaults.
//!
//! The limits table of `docs/providers.md` is rendered from these
//! ([`table`], [`markdown`]); a test fails when the docs say otherwise
//! (`CAPWASM_BLESS=1` rewrites them).

use std::time::Duration;

mod table;

pub use table::{Row, markdown, table};

// === One call: a ProviderModule's `spec.limits` ===

/// Wall-clock time a call may take, computing or waiting, in milliseconds
/// (`limits.timeoutMillis`); the check calls at load have the same.
pub const TIMEOUT_MILLIS: u32 = 10_000;
/// The least `limits.timeoutMillis` may be.
pub const TIMEOUT_MILLIS_MIN: u32 = 10;
/// The most `limits.timeoutMillis` may be.
pub const TIMEOUT_MILLIS_MAX: u32 = 600_000;

/// Linear memory a call may grow to, in MiB (`limits.memoryMiB`).
pub const MEMORY_MIB: u32 = 64;
/// The least `limits.memoryMiB` may be.
pub const MEMORY_MIB_MIN: u32 = 1;
/// The most `limits.memoryMiB` may be; the operator's
/// `--max-provider-memory-mib` may allow less.
pub const MEMORY_MIB_MAX: u32 = 4096;

/// What a call may return, and the host memory its result and host-call
/// arguments may take, in KiB (`limits.maxOutputKiB`).
pub const MAX_OUTPUT_KIB: u32 = 1024;
/// The least `limits.maxOutputKiB` may be.
pub const MAX_OUTPUT_KIB_MIN: u32 = 1;
/// The most `limits.maxOutputKiB` may be.
pub const MAX_OUTPUT_KIB_MAX: u32 = 65_536;

/// Log lines a call may write; later ones are dropped and counted
/// (`limits.maxLogLines`).
pub const MAX_LOG_LINES: u32 = 100;
/// The least `limits.maxLogLines` may be (no lines at all).
pub const MAX_LOG_LINES_MIN: u32 = 0;
/// The most `limits.maxLogLines` may be.
pub const MAX_LOG_LINES_MAX: u32 = 100_000;

/// Outgoing HTTP requests a call may send (`limits.httpRequestsPerCall`).
pub const HTTP_REQUESTS_PER_CALL: u32 = 100;
/// The least `limits.httpRequestsPerCall` may be.
pub const HTTP_REQUESTS_PER_CALL_MIN: u32 = 1;
/// The most `limits.httpRequestsPerCall` may be.
pub const HTTP_REQUESTS_PER_CALL_MAX: u32 = 10_000;

/// Outgoing HTTP requests a call may have open at once
/// (`limits.httpInFlightPerCall`).
pub const HTTP_IN_FLIGHT_PER_CALL: u32 = 8;
/// The least `limits.httpInFlightPerCall` may be.
pub const HTTP_IN_FLIGHT_PER_CALL_MIN: u32 = 1;
/// The most `limits.httpInFlightPerCall` may be.
pub const HTTP_IN_FLIGHT_PER_CALL_MAX: u32 = 256;

/// Outgoing HTTP requests all calls of a provider may have open at once
/// (`limits.httpInFlightPerProvider`).
pub const HTTP_IN_FLIGHT_PER_PROVIDER: u32 = 32;
/// The least `limits.httpInFlightPerProvider` may be.
pub const HTTP_IN_FLIGHT_PER_PROVIDER_MIN: u32 = 1;
/// The most `limits.httpInFlightPerProvider` may be.
pub const HTTP_IN_FLIGHT_PER_PROVIDER_MAX: u32 = 1024;

/// An outgoing request's body, in KiB (`limits.httpMaxRequestBodyKiB`).
pub const HTTP_MAX_REQUEST_BODY_KIB: u32 = 1024;
/// The least `limits.httpMaxRequestBodyKiB` may be.
pub const HTTP_MAX_REQUEST_BODY_KIB_MIN: u32 = 1;
/// The most `limits.httpMaxRequestBodyKiB` may be.
pub const HTTP_MAX_REQUEST_BODY_KIB_MAX: u32 = 65_536;

/// A response's body, in KiB (`limits.httpMaxResponseBodyKiB`).
pub const HTTP_MAX_RESPONSE_BODY_KIB: u32 = 16 << 10;
/// The least `limits.httpMaxResponseBodyKiB` may be.
pub const HTTP_MAX_RESPONSE_BODY_KIB_MIN: u32 = 1;
/// The most `limits.httpMaxResponseBodyKiB` may be.
pub const HTTP_MAX_RESPONSE_BODY_KIB_MAX: u32 = 65_536;

// === All providers: the operator's flags ===

/// The most memory any provider's limits may allow, in MiB
/// (`--max-provider-memory-mib`; sizes the instance pool's slots).
pub const MAX_PROVIDER_MEMORY_MIB: usize = 256;

/// Calls that may run at once, of all providers; more wait for a slot
/// (`--max-provider-instances`).
pub const MAX_PROVIDER_INSTANCES: u32 = 64;
/// The least `--max-provider-instances` may be.
pub const MAX_PROVIDER_INSTANCES_MIN: u32 = 1;
/// The most `--max-provider-instances` may be.
pub const MAX_PROVIDER_INSTANCES_MAX: u32 = 1024;

/// The least `--guest-memory-budget-mib` may be (unset by default: only
/// each call's own cap bounds guests' memory).
pub const GUEST_MEMORY_BUDGET_MIB_MIN: u32 = 1;
/// The most `--guest-memory-budget-mib` may be.
pub const GUEST_MEMORY_BUDGET_MIB_MAX: u32 = 1_048_576;

/// Reconciles each controller runs at once (`--concurrency`); a call
/// waiting for its provider's turn holds one of them.
pub const CONCURRENCY: u16 = 16;

/// Calls of one provider that may run at once when
/// `--max-calls-per-provider` is unset: a quarter of the controllers'
/// `concurrency`, so that one provider's calls running to their deadline
/// leave workers for the others.
pub const fn calls_per_provider(concurrency: u16) -> u32 {
    let quarter = concurrency as u32 / 4;
    if quarter == 0 { 1 } else { quarter }
}
/// The least `--max-calls-per-provider` may be.
pub const MAX_CALLS_PER_PROVIDER_MIN: u32 = 1;
/// The most `--max-calls-per-provider` may be.
pub const MAX_CALLS_PER_PROVIDER_MAX: u32 = 1024;

/// The turns one tenant (the namespace of the objects its calls are
/// about) may hold of a provider's `turns`: half, rounded up, so that
/// whatever one tenant's calls do, the others have the rest. With one turn
/// there is nothing to share: whoever holds it holds the provider.
pub const fn turns_per_tenant(turns: usize) -> usize {
    let half = turns.div_ceil(2);
    if half == 0 { 1 } else { half }
}

/// The share of a core one provider's calls may compute together, beyond
/// [`CPU_BURST`] (`--provider-cpu-share`).
pub const PROVIDER_CPU_SHARE: f64 = 0.5;

// === Fixed: turns, CPU and the throttle ===

/// How long a call waits for its provider's turn and an instance slot
/// before it is refused as busy (loading waits as long as it takes).
pub const PATIENCE: Duration = Duration::from_millis(250);
/// CPU a provider may compute in a burst beyond its share.
pub const CPU_BURST: Duration = Duration::from_secs(2);
/// A computing guest yields to the executor at least this often, so that a
/// deadline (a timer of the executor) can end it and its CPU is charged.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);
/// Deadlines in a row that throttle a tenant's calls of a provider.
pub const THROTTLE_AFTER: u32 = 3;
/// How long the first throttle lasts.
pub const FIRST_THROTTLE: Duration = Duration::from_secs(30);
/// The longest a throttle lasts.
pub const MAX_THROTTLE: Duration = Duration::from_secs(300);

// === Fixed: what an instance may be ===

/// Elements of a table: tables hold function references, and a guest has
/// no business with more.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;
/// Core instances of one component (a Rust component's module plus shims
/// need a few).
pub const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 16;
/// Linear memories of one component.
pub const MAX_MEMORIES_PER_COMPONENT: u32 = 2;
/// Tables of one component.
pub const MAX_TABLES_PER_COMPONENT: u32 = 8;

// === Fixed: outgoing HTTP ===

/// Outgoing HTTP connections all guests together may hold open, so that
/// the operator's own clients always have descriptors left.
pub const MAX_GUEST_CONNECTIONS: u32 = 256;
/// No single HTTP phase (connect, first byte, between bytes) may take
/// longer, whatever the guest asks for.
pub const MAX_HTTP_PHASE_TIMEOUT: Duration = Duration::from_secs(10);

// === Fixed: what a result may hold ===

/// Instances a pool result may hold per replica, room for a provider that
/// replaces machines before it removes them...
pub const INSTANCES_PER_REPLICA: usize = 2;
/// ...and beyond those.
pub const SPARE_INSTANCES: usize = 10;
/// Instances a pool of `replicas` may report.
pub const fn max_instances(replicas: u32) -> usize {
    (replicas as usize)
        .saturating_mul(INSTANCES_PER_REPLICA)
        .saturating_add(SPARE_INSTANCES)
}
/// Bytes of an instance or cluster id, failure domain, address or request
/// token.
pub const MAX_ID_BYTES: usize = 256;
/// Bytes of a providerID.
pub const MAX_PROVIDER_ID_BYTES: usize = 512;
/// Addresses of one instance.
pub const MAX_ADDRESSES: usize = 32;
/// Failure domains of a cluster.
pub const MAX_FAILURE_DOMAINS: usize = 100;
/// Attributes of one failure domain.
pub const MAX_ATTRIBUTES: usize = 64;
/// Resources in a node shape's capacity.
pub const MAX_CAPACITY_RESOURCES: usize = 32;

// === Fixed: a platform provider's results ===

/// Objects one platform cluster may be made of.
pub const MAX_RENDERED_OBJECTS: usize = 500;
/// Secrets the host generates for one platform cluster, and keys of one.
pub const MAX_GENERATED_SECRETS: usize = 16;
/// Random bytes of one generated key.
pub const MAX_GENERATED_SECRET_BYTES: u32 = 512;
/// Conditions of a summary.
pub const MAX_SUMMARY_CONDITIONS: usize = 32;
/// Node groups of a summary.
pub const MAX_SUMMARY_NODE_GROUPS: usize = 100;
/// Nodes of a summary.
pub const MAX_SUMMARY_NODES: usize = 5_000;

// === Fixed: guest text, cut before it leaves the runtime ===

/// Bytes of an error message a guest returns (retry-after, terminal).
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// Bytes of a terminal error's reason.
pub const MAX_REASON_BYTES: usize = 128;
/// Bytes of an invalid-config error's JSON path.
pub const MAX_PATH_BYTES: usize = 256;
/// Bytes of what a guest said before it died (stderr, panic message).
pub const MAX_LAST_WORDS_BYTES: usize = 2048;
/// Bytes of guest stderr kept for those last words: the last ones written.
pub const STDERR_KEPT_BYTES: usize = 4096;
/// Bytes of a log line's message.
pub const MAX_LOG_MESSAGE_BYTES: usize = 2048;
/// Fields of one log line; later ones are dropped.
pub const MAX_LOG_FIELDS: usize = 16;
/// Bytes of a log field's key.
pub const MAX_LOG_KEY_BYTES: usize = 64;
/// Bytes of a log field's value.
pub const MAX_LOG_VALUE_BYTES: usize = 256;
/// Bytes of a provider's name and version (from `info`).
pub const MAX_INFO_BYTES: usize = 128;

// === Fixed: the config schema and each config ===

/// Bytes of a config schema's text.
pub const SCHEMA_MAX_BYTES: usize = 512 * 1024;
/// Nesting of a config schema, counted with every `$ref` inlined.
pub const SCHEMA_MAX_DEPTH: usize = 64;
/// JSON values of a config schema, counted with every `$ref` inlined at
/// each use.
pub const SCHEMA_MAX_EXPANDED_NODES: u64 = 50_000;
/// Subschemas of one `anyOf`, `oneOf`, `allOf` or `prefixItems`.
pub const SCHEMA_MAX_FAN_OUT: usize = 64;
/// Bytes a compiled `pattern` may take (the regex crate's size limit).
pub const SCHEMA_MAX_PATTERN_BYTES: usize = 1024 * 1024;
/// Bytes of one `spec.config`, as JSON; larger data belongs in Secrets.
pub const CONFIG_MAX_BYTES: usize = 128 * 1024;
/// How long a reconcile waits for one check of a `spec.config` against
/// its provider's schema.
pub const CONFIG_CHECK_BUDGET: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_has_a_quarter_of_the_workers_and_at_least_one() {
        assert_eq!(calls_per_provider(CONCURRENCY), 4);
        assert_eq!(calls_per_provider(3), 1);
        assert_eq!(calls_per_provider(0), 1);
    }

    #[test]
    fn a_tenant_holds_at_most_half_the_turns_rounded_up() {
        let halves: Vec<usize> = (1..=5).map(turns_per_tenant).collect();
        // With one turn there is nothing to share.
        assert_eq!(halves, [1, 1, 2, 2, 3]);
    }
}
