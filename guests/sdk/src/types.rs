//! Types shared by every provider interface (WIT `capwasm:provider/types`).

use core::fmt;

use crate::prelude::*;

pub use crate::bindings::infrastructure::capwasm::provider::types::{
    Address, AddressType, ApiEndpoint, BootstrapData, BootstrapFormat, ClusterInfo, Credential,
    DeleteOutcome, Instance, InstanceState, InvalidConfigError, ObjectRef, ProviderError,
    ProviderInfo, RetryAfterError, TerminalError,
};

impl ProviderError {
    /// A transient failure: the host calls again after `seconds`.
    pub fn retry_after(seconds: u32, message: impl Into<String>) -> Self {
        Self::RetryAfter(RetryAfterError {
            seconds,
            message: message.into(),
        })
    }

    /// A failure that repeating the call will not fix. `reason` is a short
    /// CamelCase word, such as `QuotaExceeded`.
    pub fn terminal(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Terminal(TerminalError {
            reason: reason.into(),
            message: message.into(),
        })
    }

    /// The config value at `path` (a JSON path such as `$.token`) is not
    /// acceptable.
    pub fn invalid_config(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidConfig(InvalidConfigError {
            path: path.into(),
            message: message.into(),
        })
    }

    /// The message, whatever the kind of error.
    pub fn message(&self) -> &str {
        match self {
            Self::RetryAfter(e) => &e.message,
            Self::Terminal(e) => &e.message,
            Self::InvalidConfig(e) => &e.message,
        }
    }
}

impl ApiEndpoint {
    /// `host:port`, with an IPv6 host in brackets, as URLs and kubeadm's
    /// `apiServerEndpoint` expect.
    pub fn authority(&self) -> String {
        Authority(self).to_string()
    }
}

struct Authority<'a>(&'a ApiEndpoint);

impl fmt::Display for Authority<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ApiEndpoint { host, port } = self.0;
        if host.contains(':') && !host.starts_with('[') {
            write!(f, "[{host}]:{port}")
        } else {
            write!(f, "{host}:{port}")
        }
    }
}

/// The value of the credential named `key`, if the host handed one in.
pub fn credential<'a>(credentials: &'a [Credential], key: &str) -> Option<&'a [u8]> {
    credentials
        .iter()
        .find(|c| c.key == key)
        .map(|c| c.value.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(host: &str, port: u16) -> ApiEndpoint {
        ApiEndpoint {
            host: host.to_owned(),
            port,
        }
    }

    #[test]
    fn authority_brackets_ipv6_hosts_only() {
        assert_eq!(endpoint("10.0.0.1", 6443).authority(), "10.0.0.1:6443");
        assert_eq!(endpoint("api.example", 443).authority(), "api.example:443");
        assert_eq!(endpoint("fd00::1", 6443).authority(), "[fd00::1]:6443");
    }

    #[test]
    fn credential_finds_value_by_key() {
        let credentials = vec![Credential {
            key: "token".to_owned(),
            value: b"secret".to_vec(),
        }];
        assert_eq!(credential(&credentials, "token"), Some(&b"secret"[..]));
        assert_eq!(credential(&credentials, "other"), None);
    }
}
