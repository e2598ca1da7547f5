//! Authentication the host adds to a provider's outgoing requests, with
//! keys the provider never holds: per host, AWS Signature Version 4 or a
//! bearer token, from the entries of its module's credentials Secret. It is
//! added after the allow-list check and replaces whatever authentication
//! the guest wrote itself.

use std::collections::BTreeMap;
use std::fmt;
use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use bytes::Bytes;
use http::HeaderValue;
use http::header::AUTHORIZATION;
use http_body_util::{BodyExt as _, Full};
use wasmtime_wasi_http::{Error, WasiBody};

use super::super::types::Credential;

/// Default Secret keys of AWS credentials, the names AWS tools use.
pub const AWS_ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
/// See [`AWS_ACCESS_KEY_ID`].
pub const AWS_SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";

/// Headers a guest may not set on a request the host authenticates: the
/// host's signature covers them or replaces them.
const HOST_OWNED: [&str; 4] = [
    "authorization",
    "x-amz-date",
    "x-amz-security-token",
    "x-amz-content-sha256",
];

/// How requests to one host are authenticated: only those of its scheme,
/// host and port get the keys; any other request to its host is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostAuth {
    /// `host` or `host:port`; without a port, the scheme's (443, or 80
    /// over plain HTTP).
    pub host: String,
    /// Plain HTTP rather than HTTPS: keys sent in clear text, an explicit
    /// opt-in (a test endpoint on loopback).
    pub plain_http: bool,
    /// With what.
    pub scheme: Scheme,
}

/// An authentication scheme and the Secret keys it reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// AWS Signature Version 4.
    AwsSigV4 {
        /// Signing name of the service (`ec2`).
        service: String,
        /// Region signed for.
        region: String,
        /// Key of the access key id.
        access_key_id: String,
        /// Key of the secret access key.
        secret_access_key: String,
        /// Key of the session token, if any.
        session_token: Option<String>,
    },
    /// `Authorization: Bearer <token>`.
    Bearer {
        /// Key of the token.
        token: String,
    },
}

impl Scheme {
    /// The Secret keys it reads.
    pub fn keys(&self) -> Vec<&str> {
        match self {
            Self::AwsSigV4 {
                access_key_id,
                secret_access_key,
                session_token,
                ..
            } => [
                Some(access_key_id),
                Some(secret_access_key),
                session_token.as_ref(),
            ]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect(),
            Self::Bearer { token } => vec![token.as_str()],
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Self::AwsSigV4 { .. } => "awsSigV4",
            Self::Bearer { .. } => "bearer",
        }
    }
}

impl HostAuth {
    /// Whether a request to `authority` (`host[:port]`) is to its host,
    /// whatever the port.
    pub(crate) fn names_host(&self, authority: &str) -> bool {
        host_and_port(&self.host).0 == host_and_port(authority).0
    }

    /// Whether a request of URI scheme `scheme` to `authority` is its:
    /// the same scheme, host and port.
    pub(crate) fn matches(&self, scheme: &str, authority: &str) -> bool {
        let own = if self.plain_http { "http" } else { "https" };
        let port = |written: Option<u16>| written.or_else(|| default_port(own));
        let (host, written) = host_and_port(&self.host);
        let (requested, requested_port) = host_and_port(authority);
        scheme.eq_ignore_ascii_case(own)
            && host == requested
            && port(written) == requested_port.or_else(|| default_port(scheme))
    }

    /// What it expects, for people: `https://host:443`.
    pub fn endpoint(&self) -> String {
        let own = if self.plain_http { "http" } else { "https" };
        let (host, port) = host_and_port(&self.host);
        let port = port.or_else(|| default_port(own)).unwrap_or_default();
        format!("{own}://{host}:{port}")
    }

    /// The keys it reads that `keys` lacks, by name.
    pub fn missing<'a>(&'a self, keys: &Keys) -> Vec<&'a str> {
        self.scheme
            .keys()
            .into_iter()
            .filter(|key| !keys.0.contains_key(*key))
            .collect()
    }
}

/// The entries of a credentials Secret, as one call holds them. Never
/// printed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Keys(BTreeMap<String, Vec<u8>>);

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl Keys {
    /// From the entries the host read.
    pub fn new(credentials: Vec<Credential>) -> Self {
        Self(credentials.into_iter().map(|c| (c.key, c.value)).collect())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The text of entry `key`, trimmed (Secrets written by hand often end
    /// in a newline).
    fn text(&self, key: &str) -> Result<&str, AuthError> {
        let value = self
            .0
            .get(key)
            .ok_or_else(|| AuthError::MissingKey(key.to_owned()))?;
        std::str::from_utf8(value)
            .map(str::trim)
            .map_err(|_| AuthError::NotText(key.to_owned()))
    }
}

/// Why a request could not be authenticated. Names keys, never values.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The Secret lacks a key the rule reads.
    #[error("the credentials Secret has no key {0:?}")]
    MissingKey(String),
    /// A key's value is not UTF-8 text.
    #[error("the credentials Secret's key {0:?} is not text")]
    NotText(String),
    /// The signer refused the request.
    #[error("the request cannot be signed: {0}")]
    Signing(String),
}

/// `request` as `auth` authenticates it with `keys`. A SigV4 signature
/// covers the body, so the body is read first (it is already capped).
pub(crate) async fn authenticate(
    mut request: http::Request<WasiBody>,
    auth: &HostAuth,
    keys: &Keys,
) -> Result<http::Request<WasiBody>, Error> {
    let refused = |error: AuthError| {
        tracing::warn!(
            host = auth.host,
            scheme = auth.scheme.name(),
            error = &error as &dyn std::error::Error,
            "cannot authenticate a provider's request"
        );
        Error::HttpRequestDenied
    };
    for name in HOST_OWNED {
        request.headers_mut().remove(name);
    }
    match &auth.scheme {
        Scheme::Bearer { token } => {
            let token = keys.text(token).map_err(refused)?;
            let mut value = HeaderValue::try_from(format!("Bearer {token}")).map_err(|_| {
                refused(AuthError::Signing("the token is not a header value".into()))
            })?;
            value.set_sensitive(true);
            request.headers_mut().insert(AUTHORIZATION, value);
            Ok(request)
        }
        Scheme::AwsSigV4 {
            service,
            region,
            access_key_id,
            secret_access_key,
            session_token,
        } => {
            let credentials = Credentials::new(
                keys.text(access_key_id).map_err(refused)?,
                keys.text(secret_access_key).map_err(refused)?,
                session_token
                    .as_deref()
                    .map(|key| keys.text(key).map(str::to_owned))
                    .transpose()
                    .map_err(refused)?,
                None,
                "capwasm",
            );
            let (parts, body) = request.into_parts();
            let body = body.collect().await?.to_bytes();
            let mut request = http::Request::from_parts(parts, ());
            sign_v4(&mut request, &body, &credentials, service, region).map_err(refused)?;
            Ok(request.map(|()| {
                Full::new(body)
                    .map_err(|never| match never {})
                    .boxed_unsync()
            }))
        }
    }
}

fn sign_v4(
    request: &mut http::Request<()>,
    body: &Bytes,
    credentials: &Credentials,
    service: &str,
    region: &str,
) -> Result<(), AuthError> {
    let signing = |e: &dyn fmt::Display| AuthError::Signing(e.to_string());
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| signing(&e))?
        .into();
    let headers = request
        .headers()
        .iter()
        .map(|(name, value)| {
            value
                .to_str()
                .map(|value| (name.as_str(), value))
                .map_err(|_| AuthError::Signing(format!("header {name} is not text")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let uri = request.uri().to_string();
    let signable = SignableRequest::new(
        request.method().as_str(),
        uri,
        headers.into_iter(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| signing(&e))?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| signing(&e))?
        .into_parts();
    instructions.apply_to_request_http1x(request);
    Ok(())
}

/// Whether `authority` (`host[:port]`) is the `allowed` one: the same
/// authority, or any port of an allowed bare host (case-insensitive).
pub(crate) fn authority_matches(allowed: &str, authority: &str) -> bool {
    let authority = authority.to_ascii_lowercase();
    let (host, _) = host_and_port(&authority);
    let allowed = allowed.to_ascii_lowercase();
    allowed == authority || allowed == host
}

/// `host[:port]` as its host, lower case, and its port if written.
fn host_and_port(authority: &str) -> (String, Option<u16>) {
    let authority = authority.to_ascii_lowercase();
    match authority.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.chars().all(|c| c.is_ascii_digit()) => {
            (host.to_owned(), port.parse().ok())
        }
        _ => (authority, None),
    }
}

/// The port a URI of `scheme` means when it writes none.
fn default_port(scheme: &str) -> Option<u16> {
    match scheme.to_ascii_lowercase().as_str() {
        "https" => Some(443),
        "http" => Some(80),
        _ => None,
    }
}
