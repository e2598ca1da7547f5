//! What a provider may use: memory, time, output size, log volume and
//! outgoing HTTP per call, with their defaults from [`bounds`], and the
//! capabilities its ProviderModule grants. Memory is enforced in
//! [`memory`](super::memory).

use std::time::Duration;

use super::bounds;
use super::host::auth::{HostAuth, authority_matches};

/// Bounds on one call into a provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory an instance may grow to, in bytes.
    pub memory_bytes: usize,
    /// Wall-clock time a call may run before it is interrupted.
    pub deadline: Duration,
    /// Size of what a call may return (bootstrap data, instance lists), in bytes.
    pub max_output_bytes: usize,
    /// Log lines a call may write; later lines are dropped and counted.
    pub max_log_lines: u32,
    /// Outgoing HTTP.
    pub http: HttpLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: (bounds::MEMORY_MIB as usize) << 20,
            deadline: Duration::from_millis(u64::from(bounds::TIMEOUT_MILLIS)),
            max_output_bytes: (bounds::MAX_OUTPUT_KIB as usize) << 10,
            max_log_lines: bounds::MAX_LOG_LINES,
            http: HttpLimits::default(),
        }
    }
}

/// Bounds on a provider's outgoing HTTP. A request over one fails in the
/// guest with `connection-limit-reached` (counts) or
/// `HTTP-request-body-size` / `HTTP-response-body-size` (bodies), errors it
/// can handle, and is counted by `capwasm_guest_http_refusals`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// Requests one call may send.
    pub requests_per_call: u32,
    /// Requests one call may have open at once.
    pub in_flight_per_call: u32,
    /// Requests all calls of one provider may have open at once.
    pub in_flight_per_provider: u32,
    /// Bytes of a request's body.
    pub max_request_body_bytes: u64,
    /// Bytes of a response's body.
    pub max_response_body_bytes: u64,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            requests_per_call: bounds::HTTP_REQUESTS_PER_CALL,
            in_flight_per_call: bounds::HTTP_IN_FLIGHT_PER_CALL,
            in_flight_per_provider: bounds::HTTP_IN_FLIGHT_PER_PROVIDER,
            max_request_body_bytes: u64::from(bounds::HTTP_MAX_REQUEST_BODY_KIB) << 10,
            max_response_body_bytes: u64::from(bounds::HTTP_MAX_RESPONSE_BODY_KIB) << 10,
        }
    }
}

/// Authority a provider has beyond computing on its inputs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Hosts (`host` or `host:port`, case-insensitive) outgoing HTTP may
    /// reach. Empty: no outgoing HTTP at all.
    pub allowed_hosts: Vec<String>,
    /// How the host authenticates requests to some of them.
    pub request_auth: Vec<HostAuth>,
    /// Whether calls hand the credentials to the guest too (weaker).
    pub expose_credentials: bool,
    /// The kinds a platform provider may render.
    pub allowed_kinds: Vec<super::ObjectKind>,
}

impl Capabilities {
    /// Whether a request to `authority` (`host[:port]`) is allowed.
    pub fn allows(&self, authority: &str) -> bool {
        self.allowed_hosts
            .iter()
            .any(|allowed| authority_matches(allowed, authority))
    }

    /// How a request of URI scheme `scheme` to `authority` is
    /// authenticated: by the rule of its host if it matches that rule's
    /// scheme, host and port; not at all if no rule names its host. A
    /// request to a ruled host that does not match (plain HTTP, another
    /// port) is the rule's error: it is refused, nothing attached.
    pub fn auth_for(&self, scheme: &str, authority: &str) -> Result<Option<&HostAuth>, &HostAuth> {
        if let Some(rule) = self
            .request_auth
            .iter()
            .find(|auth| auth.matches(scheme, authority))
        {
            return Ok(Some(rule));
        }
        match self
            .request_auth
            .iter()
            .find(|auth| auth.names_host(authority))
        {
            Some(rule) => Err(rule),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_listed_host_with_any_port_and_exact_authority() {
        let caps = Capabilities {
            allowed_hosts: vec!["127.0.0.1".into(), "api.example.com:8443".into()],
            ..Capabilities::default()
        };
        assert!(caps.allows("127.0.0.1:8080"));
        assert!(caps.allows("127.0.0.1"));
        assert!(caps.allows("API.example.com:8443"));
        assert!(!caps.allows("api.example.com:443"));
        assert!(!caps.allows("127.0.0.2:8080"));
        assert!(!caps.allows("127.0.0.1.evil.test"));
    }

    #[test]
    fn allows_nothing_when_no_host_is_listed() {
        assert!(!Capabilities::default().allows("127.0.0.1:80"));
    }
}
