//! Per-call bounds a ProviderModule sets for its provider.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Per-call bounds; unset fields take the operator's defaults.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ModuleLimits {
    /// Linear memory an instance may grow to, in MiB.
    #[serde(rename = "memoryMiB", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4096))]
    pub memory_mib: Option<u32>,
    /// Wall-clock time a call may take, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 600_000))]
    pub timeout_millis: Option<u32>,
    /// Size of what a call may return, in KiB.
    #[serde(
        rename = "maxOutputKiB",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 65536))]
    pub max_output_kib: Option<u32>,
    /// Log lines a call may write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100_000))]
    pub max_log_lines: Option<u32>,
    /// Outgoing HTTP requests one call may send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10_000))]
    pub http_requests_per_call: Option<u32>,
    /// Outgoing HTTP requests one call may have open at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub http_in_flight_per_call: Option<u32>,
    /// Outgoing HTTP requests all calls of the provider may have open at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub http_in_flight_per_provider: Option<u32>,
    /// Size of an outgoing request's body, in KiB.
    #[serde(
        rename = "httpMaxRequestBodyKiB",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 65_536))]
    pub http_max_request_body_kib: Option<u32>,
    /// Size of a response's body, in KiB.
    #[serde(
        rename = "httpMaxResponseBodyKiB",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1, max = 65_536))]
    pub http_max_response_body_kib: Option<u32>,
}
