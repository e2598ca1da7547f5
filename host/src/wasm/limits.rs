//! What a provider may use: memory, time, output size, log volume, and the
//! capabilities its ProviderModule grants.

use std::time::Duration;

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
            memory_bytes: 64 << 20,
            deadline: Duration::from_secs(10),
            max_output_bytes: 1 << 20,
            max_log_lines: 100,
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
            requests_per_call: 100,
            in_flight_per_call: 8,
            in_flight_per_provider: 32,
            max_request_body_bytes: 1 << 20,
            max_response_body_bytes: 16 << 20,
        }
    }
}

/// Authority a provider has beyond computing on its inputs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Hosts (`host` or `host:port`, case-insensitive) outgoing HTTP may
    /// reach. Empty: no outgoing HTTP at all.
    pub allowed_hosts: Vec<String>,
}

impl Capabilities {
    /// Whether a request to `authority` (`host[:port]`) is allowed.
    pub fn allows(&self, authority: &str) -> bool {
        let authority = authority.to_ascii_lowercase();
        let host = authority
            .rsplit_once(':')
            .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
            .map_or(authority.as_str(), |(host, _)| host);
        self.allowed_hosts.iter().any(|allowed| {
            let allowed = allowed.to_ascii_lowercase();
            allowed == authority || allowed == host
        })
    }
}

/// Refuses memory growth beyond the cap and remembers that it did, so a
/// guest that then aborts is reported as out of memory, not as a bare trap.
pub(crate) struct MemoryLimiter {
    max_bytes: usize,
    pub(crate) hit: bool,
}

impl MemoryLimiter {
    pub(crate) fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            hit: false,
        }
    }
}

/// Tables hold function references; a guest has no business with more.
const MAX_TABLE_ELEMENTS: usize = 100_000;

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.hit = true;
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
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_listed_host_with_any_port_and_exact_authority() {
        let caps = Capabilities {
            allowed_hosts: vec!["127.0.0.1".into(), "api.example.com:8443".into()],
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
