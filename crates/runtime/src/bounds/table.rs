//! The limits table of `docs/providers.md`, rendered from the bounds: the
//! prose is written here, every number comes from a constant, so the docs
//! cannot say one thing while the code does another.

use std::time::Duration;

use super::{
    CONCURRENCY, CONFIG_CHECK_BUDGET, CONFIG_MAX_BYTES, CPU_BURST, EPOCH_TICK, FIRST_THROTTLE,
    HTTP_IN_FLIGHT_PER_CALL, HTTP_IN_FLIGHT_PER_PROVIDER, HTTP_MAX_REQUEST_BODY_KIB,
    HTTP_MAX_RESPONSE_BODY_KIB, HTTP_REQUESTS_PER_CALL, INSTANCES_PER_REPLICA, MAX_ADDRESSES,
    MAX_ATTRIBUTES, MAX_CAPACITY_RESOURCES, MAX_FAILURE_DOMAINS, MAX_GUEST_CONNECTIONS,
    MAX_HTTP_PHASE_TIMEOUT, MAX_ID_BYTES, MAX_INFO_BYTES, MAX_LAST_WORDS_BYTES, MAX_LOG_FIELDS,
    MAX_LOG_KEY_BYTES, MAX_LOG_LINES, MAX_LOG_MESSAGE_BYTES, MAX_LOG_VALUE_BYTES,
    MAX_MESSAGE_BYTES, MAX_OUTPUT_KIB, MAX_PATH_BYTES, MAX_PROVIDER_ID_BYTES,
    MAX_PROVIDER_INSTANCES, MAX_PROVIDER_MEMORY_MIB, MAX_REASON_BYTES, MAX_TABLE_ELEMENTS,
    MAX_THROTTLE, MEMORY_MIB, PATIENCE, PROVIDER_CPU_SHARE, SCHEMA_MAX_BYTES, SCHEMA_MAX_DEPTH,
    SCHEMA_MAX_EXPANDED_NODES, SCHEMA_MAX_FAN_OUT, SCHEMA_MAX_PATTERN_BYTES, SPARE_INSTANCES,
    THROTTLE_AFTER, TIMEOUT_MILLIS, TIMEOUT_MILLIS_MAX, calls_per_provider, turns_per_tenant,
};

/// One row of the limits table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// What the guest controls.
    pub what: String,
    /// The bound, and its default where something may change it.
    pub bound: String,
    /// What may change it: a ProviderModule field, a flag, or nothing.
    pub set_by: String,
    /// What the guest sees past it.
    pub guest_sees: String,
    /// What the operator reports past it.
    pub reports: String,
}

/// The table's columns, in order.
const HEADER: [&str; 5] = [
    "What the guest controls",
    "Bound (default)",
    "Set by",
    "The guest sees",
    "The operator reports",
];

/// The limits table: every bound a guest meets, what sets it, and what
/// happens past it.
pub fn table() -> Vec<Row> {
    [calls(), results(), text(), loading(), http()].concat()
}

/// Time, memory, turns and CPU: what a call may take of the machine.
fn calls() -> Vec<Row> {
    let turns = calls_per_provider(CONCURRENCY);
    vec![
        row(
            "Wall time of a call, computing or waiting (timer, HTTP, stream)",
            format!(
                "{}, at most {}",
                time(millis(TIMEOUT_MILLIS)),
                time(millis(TIMEOUT_MILLIS_MAX))
            ),
            "`limits.timeoutMillis`",
            "interrupted",
            "`GuestTimedOut`",
        ),
        row(
            "Wall time of the check calls at load (`info`, schema)",
            "the same",
            "`limits.timeoutMillis`",
            "interrupted",
            "module `Failed`, last good version serves",
        ),
        row(
            "Linear memory of a call",
            size(u64::from(MEMORY_MIB) << 20),
            format!(
                "`limits.memoryMiB`, at most `--max-provider-memory-mib` ({MAX_PROVIDER_MEMORY_MIB})"
            ),
            "allocation fails",
            "`GuestMemoryLimit` (\"its N-byte memory limit\")",
        ),
        row(
            "Linear memory of all calls together",
            "none; 96 MiB in `deploy/`",
            "`--guest-memory-budget-mib`",
            "first memory waits for room; growth fails",
            "`GuestMemoryLimit` (\"the budget all providers share\")",
        ),
        row(
            "Calls at once",
            format!("{}; 12 in `deploy/`", count(MAX_PROVIDER_INSTANCES.into())),
            "`--max-provider-instances`",
            "waits for a slot, queued not dropped",
            "`capwasm_guest_instances` (of `capwasm_guest_instance_slots`), `capwasm_guest_calls_waiting{provider}`",
        ),
        row(
            "Calls of one provider at once",
            format!(
                "a quarter of `--concurrency` ({turns}), of which calls about one namespace's objects half, rounded up ({})",
                turns_per_tenant(turns as usize)
            ),
            "`--max-calls-per-provider`",
            format!(
                "waits up to {} for its turn and a slot, then is refused as busy (it did not start); at once when every turn of its namespace is held by a call already running longer than that; its object comes back in 0.5–1.5 s and nothing is written",
                time(PATIENCE)
            ),
            "`capwasm_guest_calls_waiting{provider}`, `capwasm_guest_calls_total{outcome=\"busy\"}`",
        ),
        row(
            "CPU of one provider's calls together",
            format!(
                "{} beyond a {} burst",
                cores(PROVIDER_CPU_SHARE),
                time(CPU_BURST)
            ),
            "`--provider-cpu-share`",
            format!(
                "a call past it waits at its next {} epoch tick",
                time(EPOCH_TICK)
            ),
            "—",
        ),
        row(
            "Calls in a row that run into their deadline, about one namespace's objects",
            count(THROTTLE_AFTER.into()),
            "fixed",
            format!(
                "the provider's calls about that namespace are refused at once for {}, doubling to {} while it goes on (the other namespaces' are made); an answer or a new version ends it",
                time(FIRST_THROTTLE),
                time(MAX_THROTTLE)
            ),
            "`ProviderThrottled` on its objects (they back off until the time it names); `Throttled` on the ProviderModule naming each throttled namespace, with a Warning Event",
        ),
        row(
            "Tables",
            format!("{} elements", count(MAX_TABLE_ELEMENTS as u64)),
            "fixed",
            "growth fails",
            "`GuestTrapped`",
        ),
    ]
}

/// What a result may hold.
fn results() -> Vec<Row> {
    vec![
        row(
            "Result and host-call arguments: bytes, and elements at their size in the host",
            size(u64::from(MAX_OUTPUT_KIB) << 10),
            "`limits.maxOutputKiB`",
            "trapped",
            "`GuestOutputTooLarge`",
        ),
        row(
            "Instances in a pool result",
            format!("{INSTANCES_PER_REPLICA} × replicas + {SPARE_INSTANCES}"),
            "fixed",
            "—",
            "`InvalidProviderResult`",
        ),
        row(
            "Instance and cluster ids",
            format!("non-empty, unique, {MAX_ID_BYTES} bytes"),
            "fixed",
            "—",
            "`InvalidProviderResult`",
        ),
        row(
            "providerIDs",
            format!(
                "`<scheme>://…`, printable, {MAX_PROVIDER_ID_BYTES} bytes, within the module's `capabilities.providerIDPrefix`, unique in the Cluster, no control-plane Node's, `owns` says yes"
            ),
            "fixed",
            "—",
            "`InvalidProviderResult`",
        ),
        row(
            "Addresses per instance / failure domains / their attributes / resources of a node shape",
            format!(
                "{MAX_ADDRESSES} / {MAX_FAILURE_DOMAINS} / {MAX_ATTRIBUTES} / {MAX_CAPACITY_RESOURCES}"
            ),
            "fixed",
            "—",
            "`InvalidProviderResult`",
        ),
        row(
            "Bootstrap data",
            "its declared format (cloud-config, Ignition JSON, script)",
            "fixed",
            "—",
            "`InvalidProviderResult`",
        ),
    ]
}

/// Log lines and guest text.
fn text() -> Vec<Row> {
    vec![
        row(
            "Log lines per call",
            count(MAX_LOG_LINES.into()),
            "`limits.maxLogLines`",
            "dropped, counted",
            "a line saying how many",
        ),
        row(
            "Log line: message / field count / key / value",
            format!(
                "{MAX_LOG_MESSAGE_BYTES} / {MAX_LOG_FIELDS} / {MAX_LOG_KEY_BYTES} / {MAX_LOG_VALUE_BYTES} bytes"
            ),
            "fixed",
            "cut",
            "—",
        ),
        row(
            "Error message / reason / config path",
            format!("{MAX_MESSAGE_BYTES} / {MAX_REASON_BYTES} / {MAX_PATH_BYTES} bytes"),
            "fixed",
            "cut",
            "the cut text",
        ),
        row(
            "Trap last words (the end of stderr, panic message)",
            format!("the last {MAX_LAST_WORDS_BYTES} bytes, lines kept"),
            "fixed",
            "cut at the front",
            "the cut text",
        ),
        row(
            "Name and version from `info`",
            format!("{MAX_INFO_BYTES} bytes"),
            "fixed",
            "cut",
            "—",
        ),
    ]
}

/// What a module may be, and its config schema and configs.
fn loading() -> Vec<Row> {
    vec![
        row(
            "Imports",
            "its world's only",
            "fixed",
            "module refused",
            "module `Failed`, naming the import",
        ),
        row(
            "Config schema: size / depth with `$ref`s inlined / expanded size / combinator fan-out / patterns",
            format!(
                "{} / {SCHEMA_MAX_DEPTH} / {} nodes / {SCHEMA_MAX_FAN_OUT} / linear-time engine, {} compiled; local `$ref`s only",
                size(SCHEMA_MAX_BYTES as u64),
                count(SCHEMA_MAX_EXPANDED_NODES),
                size(SCHEMA_MAX_PATTERN_BYTES as u64)
            ),
            "fixed",
            "module refused",
            "module `Failed`, naming the bound",
        ),
        row(
            "Checking one `spec.config`",
            format!(
                "{}, {}, off the async runtime",
                size(CONFIG_MAX_BYTES as u64),
                time(CONFIG_CHECK_BUDGET)
            ),
            "fixed",
            "—",
            "`InvalidConfig`, `ConfigCheckTimedOut`",
        ),
    ]
}

/// Outgoing HTTP.
fn http() -> Vec<Row> {
    vec![
        row(
            "HTTP requests per call",
            count(HTTP_REQUESTS_PER_CALL.into()),
            "`limits.httpRequestsPerCall`",
            "`connection-limit-reached` (SDK: `LimitReached`)",
            "`capwasm_guest_http_refusals_total`",
        ),
        row(
            "HTTP requests in flight, per call / per provider",
            format!(
                "{} / {}",
                count(HTTP_IN_FLIGHT_PER_CALL.into()),
                count(HTTP_IN_FLIGHT_PER_PROVIDER.into())
            ),
            "`limits.httpInFlightPerCall`, `httpInFlightPerProvider`",
            "`connection-limit-reached`",
            "the same",
        ),
        row(
            "HTTP connections of all guests together",
            count(MAX_GUEST_CONNECTIONS.into()),
            "fixed",
            "`connection-limit-reached`",
            "the same",
        ),
        row(
            "HTTP request / response body",
            format!(
                "{} / {}",
                size(u64::from(HTTP_MAX_REQUEST_BODY_KIB) << 10),
                size(u64::from(HTTP_MAX_RESPONSE_BODY_KIB) << 10)
            ),
            "`limits.httpMaxRequestBodyKiB`, `httpMaxResponseBodyKiB`",
            "`HTTP-request-body-size` / `HTTP-response-body-size` (SDK: `InvalidRequest` / `ResponseTooLarge`)",
            "the same",
        ),
        row(
            "HTTP connect / first byte / between bytes",
            format!(
                "the guest's, at most {} and the call's deadline",
                time(MAX_HTTP_PHASE_TIMEOUT)
            ),
            "fixed",
            "`connection-timeout` and the like",
            "—",
        ),
        row(
            "HTTP destinations",
            "`capabilities.allowedHosts`; none by default",
            "the ProviderModule",
            "`HTTP-request-denied`",
            "a log line",
        ),
    ]
}

/// The table as Markdown: a header, its rule, a line per row.
pub fn markdown(rows: &[Row]) -> String {
    let line = |cells: [&str; 5]| format!("| {} |\n", cells.join(" | "));
    let mut out = line(HEADER);
    out.push_str(&line(["---"; 5]));
    for row in rows {
        out.push_str(&line([
            &row.what,
            &row.bound,
            &row.set_by,
            &row.guest_sees,
            &row.reports,
        ]));
    }
    out
}

fn row(
    what: impl Into<String>,
    bound: impl Into<String>,
    set_by: impl Into<String>,
    guest_sees: impl Into<String>,
    reports: impl Into<String>,
) -> Row {
    Row {
        what: what.into(),
        bound: bound.into(),
        set_by: set_by.into(),
        guest_sees: guest_sees.into(),
        reports: reports.into(),
    }
}

fn millis(ms: u32) -> Duration {
    Duration::from_millis(u64::from(ms))
}

/// `10 min`, `10 s`, `250 ms`: the largest unit that divides it.
fn time(duration: Duration) -> String {
    let ms = duration.as_millis();
    match ms {
        0 => "0 s".to_owned(),
        _ if ms.is_multiple_of(60_000) => format!("{} min", ms / 60_000),
        _ if ms.is_multiple_of(1000) => format!("{} s", ms / 1000),
        _ => format!("{ms} ms"),
    }
}

/// `16 MiB`, `512 KiB`, `100 bytes`: the largest binary unit that divides it.
fn size(bytes: u64) -> String {
    match bytes {
        0 => "0 bytes".to_owned(),
        _ if bytes.is_multiple_of(1 << 20) => format!("{} MiB", bytes >> 20),
        _ if bytes.is_multiple_of(1 << 10) => format!("{} KiB", bytes >> 10),
        _ => format!("{bytes} bytes"),
    }
}

/// `100,000`: thousands separated.
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `½ core`, `1 core`, `1.5 cores`.
fn cores(share: f64) -> String {
    match share.to_string().as_str() {
        "0.5" => "½ core".to_owned(),
        "1" => "1 core".to_owned(),
        other => format!("{other} cores"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The docs page holding the table, from this crate's directory.
    fn providers_md() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/providers.md")
    }

    const START: &str = "<!-- limits table: generated from crates/runtime/src/bounds.rs; \
                         CAPWASM_BLESS=1 cargo test -p capwasm-runtime --lib bounds rewrites it -->\n";
    const END: &str = "<!-- end of limits table -->";

    #[test]
    fn the_docs_limits_table_is_the_one_the_bounds_render() {
        let path = providers_md();
        let docs = std::fs::read_to_string(&path).unwrap();
        let start = docs
            .find(START)
            .expect("the start marker in docs/providers.md")
            + START.len();
        let end = start + docs[start..].find(END).expect("the end marker after it");
        // Blank lines apart from the markers, so every renderer sees a table.
        let expected = format!("\n{}\n", markdown(&table()));
        if docs[start..end] == expected {
            return;
        }
        if std::env::var("CAPWASM_BLESS").as_deref() == Ok("1") {
            let blessed = format!("{}{expected}{}", &docs[..start], &docs[end..]);
            std::fs::write(&path, blessed).unwrap();
            return;
        }
        panic!(
            "the limits table in docs/providers.md differs from the bounds; \
             rerun with CAPWASM_BLESS=1 to rewrite it, or make it:\n{expected}"
        );
    }

    #[test]
    fn numbers_are_written_as_the_docs_write_them() {
        assert_eq!(time(Duration::from_secs(600)), "10 min");
        assert_eq!(time(Duration::from_secs(90)), "90 s");
        assert_eq!(time(Duration::from_millis(250)), "250 ms");
        assert_eq!(size(16 << 20), "16 MiB");
        assert_eq!(size(512 << 10), "512 KiB");
        assert_eq!(size(100), "100 bytes");
        assert_eq!(count(100_000), "100,000");
        assert_eq!(count(1_048_576), "1,048,576");
        assert_eq!(count(256), "256");
        assert_eq!(cores(0.5), "½ core");
        assert_eq!(cores(2.0), "2 cores");
    }

    #[test]
    fn every_row_has_five_cells_and_no_pipe_in_them() {
        for row in table() {
            for cell in [
                &row.what,
                &row.bound,
                &row.set_by,
                &row.guest_sees,
                &row.reports,
            ] {
                assert!(!cell.is_empty() && !cell.contains('|'), "{row:?}");
            }
        }
    }
}
