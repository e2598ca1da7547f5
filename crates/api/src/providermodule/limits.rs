//! Per-call bounds a ProviderModule sets for its provider; their defaults
//! and ranges are the runtime's [`bounds`].

use capwasm_runtime::bounds;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Per-call bounds; unset fields take the operator's defaults.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ModuleLimits {
    /// Linear memory an instance may grow to, in MiB.
    #[serde(rename = "memoryMiB", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = bounds::MEMORY_MIB_MIN, max = bounds::MEMORY_MIB_MAX))]
    pub memory_mib: Option<u32>,
    /// Wall-clock time a call may take, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = bounds::TIMEOUT_MILLIS_MIN, max = bounds::TIMEOUT_MILLIS_MAX))]
    pub timeout_millis: Option<u32>,
    /// Size of what a call may return, in KiB.
    #[serde(
        rename = "maxOutputKiB",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = bounds::MAX_OUTPUT_KIB_MIN, max = bounds::MAX_OUTPUT_KIB_MAX))]
    pub max_output_kib: Option<u32>,
    /// Log lines a call may write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = bounds::MAX_LOG_LINES_MIN, max = bounds::MAX_LOG_LINES_MAX))]
    pub max_log_lines: Option<u32>,
    /// Outgoing HTTP requests one call may send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = bounds::HTTP_REQUESTS_PER_CALL_MIN, max = bounds::HTTP_REQUESTS_PER_CALL_MAX))]
    pub http_requests_per_call: Option<u32>,
    /// Outgoing HTTP requests one call may have open at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = bounds::HTTP_IN_FLIGHT_PER_CALL_MIN, max = bounds::HTTP_IN_FLIGHT_PER_CALL_MAX))]
    pub http_in_flight_per_call: Option<u32>,
    /// Outgoing HTTP requests all calls of the provider may have open at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = bounds::HTTP_IN_FLIGHT_PER_PROVIDER_MIN, max = bounds::HTTP_IN_FLIGHT_PER_PROVIDER_MAX))]
    pub http_in_flight_per_provider: Option<u32>,
    /// Size of an outgoing request's body, in KiB.
    #[serde(
        rename = "httpMaxRequestBodyKiB",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = bounds::HTTP_MAX_REQUEST_BODY_KIB_MIN, max = bounds::HTTP_MAX_REQUEST_BODY_KIB_MAX))]
    pub http_max_request_body_kib: Option<u32>,
    /// Size of a response's body, in KiB.
    #[serde(
        rename = "httpMaxResponseBodyKiB",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = bounds::HTTP_MAX_RESPONSE_BODY_KIB_MIN, max = bounds::HTTP_MAX_RESPONSE_BODY_KIB_MAX))]
    pub http_max_response_body_kib: Option<u32>,
}
