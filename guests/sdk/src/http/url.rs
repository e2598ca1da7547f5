//! URLs: split the way `wasi:http` wants them, and their components encoded.

use core::fmt::Write as _;

use crate::prelude::*;

/// Whether `url` can be a config's base URL: `http://` or `https://`, a
/// host, no user info, query, fragment, whitespace or control characters.
pub fn is_base_url(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return false;
    };
    let host = rest.split('/').next().unwrap_or_default();
    !host.is_empty()
        && !host.contains('@')
        && !url.contains(['?', '#'])
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Percent-encodes `value` for use as one URL path segment or query value
/// (everything but RFC 3986 unreserved characters).
pub fn encode_component(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Where a request goes, split the way `wasi:http` wants it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) https: bool,
    pub(super) authority: String,
    pub(super) path_with_query: String,
}

impl Target {
    /// `url` split, or why it cannot be sent.
    pub(super) fn parse(url: &str) -> Result<Self, &'static str> {
        let (scheme, rest) = url.split_once("://").ok_or("no scheme")?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return Err("only http and https are supported"),
        };
        let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
        let (authority, path) = match rest.find(['/', '?']) {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err("no host");
        }
        if authority.contains('@') {
            return Err("user info is not supported; pass credentials in headers");
        }
        if authority
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
            || path.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err("whitespace or control characters");
        }
        let path_with_query = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("/{path}")
        };
        Ok(Self {
            https,
            authority: authority.to_owned(),
            path_with_query,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Result<Target, &'static str> {
        Target::parse(url)
    }

    #[test]
    fn target_splits_authority_and_path() {
        assert_eq!(
            target("http://127.0.0.1:8080/v1/regions/r/instances?pool=a%2Fb#frag"),
            Ok(Target {
                https: false,
                authority: "127.0.0.1:8080".to_owned(),
                path_with_query: "/v1/regions/r/instances?pool=a%2Fb".to_owned(),
            })
        );
    }

    #[test]
    fn target_defaults_path_to_root() {
        assert_eq!(
            target("HTTPS://api.example").map(|t| (t.https, t.path_with_query)),
            Ok((true, "/".to_owned()))
        );
        assert_eq!(
            target("http://h?x=1").map(|t| t.path_with_query),
            Ok("/?x=1".to_owned())
        );
    }

    #[test]
    fn target_rejects_other_schemes_and_user_info() {
        assert_eq!(target("ftp://h/"), Err("only http and https are supported"));
        assert_eq!(target("h/"), Err("no scheme"));
        assert_eq!(
            target("http://u:p@h/"),
            Err("user info is not supported; pass credentials in headers")
        );
        assert_eq!(target("http:///x"), Err("no host"));
        assert_eq!(
            target("http://h/a b"),
            Err("whitespace or control characters")
        );
    }

    #[test]
    fn encode_component_escapes_reserved_characters() {
        assert_eq!(encode_component("ns/pool-1_a.b~"), "ns%2Fpool-1_a.b~");
        assert_eq!(encode_component("a b&c=é"), "a%20b%26c%3D%C3%A9");
    }
}
