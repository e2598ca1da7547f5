//! Registry clients: a pull's, which reads every answer within a size bound
//! and every step within the pull's deadline, so that a registry sending
//! without end, or a byte at a time, costs bounded memory and time; and
//! oci-client's for pushes (its pulls read manifests and error answers
//! whole). Their errors are sorted into unreachable and refused.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciEnvelope};
use oci_client::manifest::OciDescriptor;
use reqwest::header::{ACCEPT, WWW_AUTHENTICATE};
use reqwest::{Method, Response, StatusCode};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::reference::is_sha256;
use super::{Auth, Error, ImageRef};

/// How the operator pulls.
#[derive(Clone, Copy, Debug)]
pub struct Puller {
    /// The largest component taken, in bytes.
    pub max_component_bytes: u64,
    /// The largest manifest, image index, token or error answer read, in
    /// bytes. The distribution spec asks registries to take manifests of
    /// at least 4 MiB, so none larger is pushed where they follow it.
    pub max_manifest_bytes: u64,
    /// How long a registry may take to connect or to send the next bytes.
    pub timeout: Duration,
    /// How long a whole pull may take, from the tag's resolution to the
    /// component's last byte, its signatures included: a registry that
    /// keeps sending, if slowly, never trips [`Self::timeout`].
    pub deadline: Duration,
}

impl Default for Puller {
    fn default() -> Self {
        Self {
            max_component_bytes: 64 << 20,
            max_manifest_bytes: 4 << 20,
            timeout: Duration::from_secs(10),
            deadline: Duration::from_secs(60),
        }
    }
}

/// The manifest media types a pull takes.
const ACCEPTED: &[&str] = &[
    oci_client::manifest::OCI_IMAGE_MEDIA_TYPE,
    oci_client::manifest::IMAGE_MANIFEST_MEDIA_TYPE,
    oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE,
    oci_client::manifest::IMAGE_MANIFEST_LIST_MEDIA_TYPE,
];
/// Where a registry says a manifest's digest.
const DIGEST_HEADER: &str = "docker-content-digest";

/// One pull's client of `image`'s registry: its credentials, the
/// authorization its registry asked for, and the pull's bounds.
pub(crate) struct Registry<'a> {
    http: reqwest::Client,
    auth: Auth,
    pub(crate) image: &'a ImageRef,
    /// The most bytes of a manifest, an index, a token or an error answer.
    max_answer_bytes: u64,
    /// The whole pull's time, and when it runs out.
    deadline: Duration,
    until: Instant,
    /// Learnt from the registry's challenge at the first request.
    authorization: OnceCell<Authorization>,
}

/// What a pull's requests carry to be let in.
enum Authorization {
    /// Nothing: the registry asked for nothing, or nothing the pull has.
    None,
    /// The pull Secret's user and password (a `Basic` challenge).
    Basic { username: String, password: String },
    /// A token from the registry's token service (a `Bearer` challenge).
    Bearer(String),
}

/// What a registry's `WWW-Authenticate` asks for.
#[derive(Debug, PartialEq, Eq)]
enum Challenge {
    Bearer {
        realm: String,
        service: Option<String>,
    },
    Basic,
}

impl<'a> Registry<'a> {
    pub(crate) fn new(image: &'a ImageRef, auth: &Auth, puller: &Puller) -> Result<Self, Error> {
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(puller.timeout.min(Duration::from_secs(5)))
            .read_timeout(puller.timeout)
            .user_agent(concat!("capwasm/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Client {
                registry: image.registry().to_owned(),
                source: e.into(),
            })?;
        Ok(Self {
            http,
            auth: auth.clone(),
            image,
            max_answer_bytes: puller.max_manifest_bytes,
            deadline: puller.deadline,
            until: Instant::now() + puller.deadline,
            authorization: OnceCell::new(),
        })
    }

    /// The error of asking the registry for `what`.
    pub(crate) fn error(&self, what: impl Into<String>, source: OciDistributionError) -> Error {
        classify(self.image.registry(), what, source)
    }

    /// The digest the image's tag names: the registry's digest header on a
    /// HEAD, else the digest of the manifest it serves.
    pub(crate) async fn tag_digest(&self) -> Result<String, Error> {
        let what = format!("the tag {}", self.image);
        self.within(&what, async {
            let url = self.manifest_url(self.image);
            let response = self.send(Method::HEAD, &url, true, &what).await?;
            let digest = match digest_header(&response) {
                Some(digest) => digest,
                None => self.read_manifest(self.image, &what).await?.1,
            };
            if !is_sha256(&digest) {
                return Err(self.error(
                    what.clone(),
                    OciDistributionError::DigestError(DigestError::UnsupportedAlgorithm(digest)),
                ));
            }
            Ok(digest)
        })
        .await
    }

    /// The manifest `reference` (a tag or digest of the image's repository)
    /// names, as raw bytes checked against its digest, with that digest.
    pub(crate) async fn manifest(&self, reference: &ImageRef) -> Result<(Vec<u8>, String), Error> {
        let what = format!("the manifest {reference}");
        self.within(&what, self.read_manifest(reference, &what))
            .await
    }

    /// The blob `descriptor` names, at most `limit` bytes, checked against
    /// its digest.
    pub(crate) async fn blob(
        &self,
        descriptor: &OciDescriptor,
        limit: u64,
    ) -> Result<Vec<u8>, Error> {
        let what = format!("the blob {}", descriptor.digest);
        let layout = |why: String| Error::Layout {
            image: self.image.by_digest(&descriptor.digest),
            why,
        };
        // The digest goes into the URL: it must be no more than a digest.
        if !is_sha256(&descriptor.digest) {
            return Err(layout(format!(
                "the blob digest {:?} is not sha256:<64 hex digits>",
                descriptor.digest
            )));
        }
        let size = u64::try_from(descriptor.size).unwrap_or(u64::MAX);
        if size > limit {
            return Err(Error::TooLarge {
                image: self.image.by_digest(&descriptor.digest),
                size,
                limit,
            });
        }
        self.within(&what, async {
            let url = format!(
                "{}/v2/{}/blobs/{}",
                self.base(),
                self.image.reference().repository(),
                descriptor.digest
            );
            let response = self.send(Method::GET, &url, false, &what).await?;
            let declared = response.content_length();
            let bytes = read_within(response.bytes_stream(), declared, size)
                .await
                .map_err(|e| self.error(what.clone(), e.into()))?
                .ok_or_else(|| {
                    layout(format!(
                        "the blob is longer than the {size} bytes its descriptor says"
                    ))
                })?;
            let actual = sha256(&bytes);
            if actual != descriptor.digest {
                return Err(self.error(
                    what.clone(),
                    OciDistributionError::DigestError(DigestError::VerificationError {
                        expected: descriptor.digest.clone(),
                        actual,
                    }),
                ));
            }
            Ok(bytes)
        })
        .await
    }

    /// Runs `step` (reading `what`) within what is left of the deadline.
    async fn within<T>(
        &self,
        what: &str,
        step: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        tokio::time::timeout_at(self.until, step)
            .await
            .unwrap_or_else(|_| {
                Err(Error::Deadline {
                    image: self.image.to_string(),
                    what: what.to_owned(),
                    limit: self.deadline,
                })
            })
    }

    /// The manifest at `reference`, within the cap, and its digest.
    async fn read_manifest(
        &self,
        reference: &ImageRef,
        what: &str,
    ) -> Result<(Vec<u8>, String), Error> {
        let response = self
            .send(Method::GET, &self.manifest_url(reference), true, what)
            .await?;
        let header = digest_header(&response);
        let body = self.read_answer(response, what).await?;
        let digest = sha256(&body);
        // A digest of another algorithm in the header cannot be checked here.
        let expected = reference
            .digest()
            .map(str::to_owned)
            .into_iter()
            .chain(header.filter(|h| h.starts_with("sha256:")));
        for expected in expected {
            if expected != digest {
                return Err(self.error(
                    what,
                    OciDistributionError::DigestError(DigestError::VerificationError {
                        expected,
                        actual: digest,
                    }),
                ));
            }
        }
        Ok((body, digest))
    }

    /// Sends `method` to `url` with the pull's authorization; an answer
    /// other than 200 is the error it says.
    async fn send(
        &self,
        method: Method,
        url: &str,
        manifest: bool,
        what: &str,
    ) -> Result<Response, Error> {
        let mut request = self.http.request(method, url);
        if manifest {
            request = request.header(ACCEPT, ACCEPTED.join(", "));
        }
        request = match self.authorization().await? {
            Authorization::None => request,
            Authorization::Basic { username, password } => {
                request.basic_auth(username, Some(password))
            }
            Authorization::Bearer(token) => request.bearer_auth(token),
        };
        let response = request
            .send()
            .await
            .map_err(|e| self.error(what, e.into()))?;
        if response.status() == StatusCode::OK {
            return Ok(response);
        }
        Err(self.refusal(response, what).await)
    }

    /// The error a refusing `response` to the request for `what` says, its
    /// body read within the cap.
    async fn refusal(&self, response: Response, what: &str) -> Error {
        let status = response.status();
        let url = response.url().to_string();
        let answer = format!("the {} answer to {what}", status.as_u16());
        match self.read_answer(response, &answer).await {
            Ok(body) => self.error(what, status_error(status, &body, &url)),
            Err(error) => error,
        }
    }

    /// The body of `response` (for `what`), at most the answer cap.
    async fn read_answer(&self, response: Response, what: &str) -> Result<Vec<u8>, Error> {
        let declared = response.content_length();
        read_within(response.bytes_stream(), declared, self.max_answer_bytes)
            .await
            .map_err(|e| self.error(what, e.into()))?
            .ok_or_else(|| Error::AnswerTooLarge {
                registry: self.image.registry().to_owned(),
                what: what.to_owned(),
                limit: self.max_answer_bytes,
            })
    }

    /// What requests carry, asked of the registry at the first one.
    async fn authorization(&self) -> Result<&Authorization, Error> {
        self.authorization
            .get_or_try_init(|| self.negotiate())
            .await
    }

    /// The registry's challenge to `GET /v2/`, answered as docker and
    /// oci-client do: a Bearer token from the service it names (with the
    /// pull Secret's credentials if any), or Basic with those credentials.
    async fn negotiate(&self) -> Result<Authorization, Error> {
        let what = "the API version check";
        let response = self
            .http
            .get(format!("{}/v2/", self.base()))
            .send()
            .await
            .map_err(|e| self.error(what, e.into()))?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(Authorization::None);
        }
        // The body is not read: dropping the answer closes its connection.
        let challenge = response
            .headers()
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(challenge);
        match (challenge, &self.auth) {
            (Some(Challenge::Bearer { realm, service }), _) => self
                .token(&realm, service.as_deref())
                .await
                .map(Authorization::Bearer),
            (Some(Challenge::Basic), Auth::Basic { username, password }) => {
                Ok(Authorization::Basic {
                    username: username.clone(),
                    password: password.clone(),
                })
            }
            _ => Ok(Authorization::None),
        }
    }

    /// A pull token for the image's repository from the token service at `realm`.
    async fn token(&self, realm: &str, service: Option<&str>) -> Result<String, Error> {
        let what = format!("a pull token for {}", self.image.repository());
        let scope = format!("repository:{}:pull", self.image.reference().repository());
        let mut query = vec![("scope", scope.as_str())];
        query.extend(service.map(|s| ("service", s)));
        let url = reqwest::Url::parse_with_params(realm, &query)
            .ok()
            .filter(|u| matches!(u.scheme(), "https" | "http"))
            .ok_or_else(|| {
                self.error(
                    what.clone(),
                    OciDistributionError::UrlParseError(format!(
                        "the token service {realm:?} is not an HTTP(S) URL"
                    )),
                )
            })?;
        let mut request = self.http.get(url.clone());
        // Credentials go in the clear only where the registry itself is
        // spoken to in the clear (loopback).
        if let Auth::Basic { username, password } = &self.auth
            && (url.scheme() == "https" || self.image.plain_http())
        {
            request = request.basic_auth(username, Some(password));
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.error(what.clone(), e.into()))?;
        if response.status() != StatusCode::OK {
            return Err(self.refusal(response, &what).await);
        }
        let body = self.read_answer(response, &what).await?;
        token_of(&body).ok_or_else(|| {
            self.error(
                what,
                OciDistributionError::RegistryTokenDecodeError(
                    "the answer holds neither a token nor an access_token".into(),
                ),
            )
        })
    }

    fn base(&self) -> String {
        let scheme = if self.image.plain_http() {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{}", self.image.reference().resolve_registry())
    }

    fn manifest_url(&self, reference: &ImageRef) -> String {
        let reference = reference.reference();
        let target = reference
            .digest()
            .or_else(|| reference.tag())
            .unwrap_or("latest");
        format!(
            "{}/v2/{}/manifests/{target}",
            self.base(),
            reference.repository()
        )
    }
}

/// reqwest is built without a default TLS backend; the process's rustls
/// provider is ring, as for every other client here.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// oci-client's client for a push to `image`'s registry.
pub(crate) fn oci_client(image: &ImageRef, timeout: Duration) -> Result<oci_client::Client, Error> {
    install_crypto_provider();
    let config = ClientConfig {
        protocol: if image.plain_http() {
            ClientProtocol::HttpsExcept(vec![image.registry().to_owned()])
        } else {
            ClientProtocol::Https
        },
        connect_timeout: Some(timeout.min(Duration::from_secs(5))),
        read_timeout: Some(timeout),
        platform_resolver: None,
        // One request per blob: what every registry takes (chunked
        // uploads are optional, and some answer them without a Location).
        use_monolithic_push: true,
        ..ClientConfig::default()
    };
    oci_client::Client::try_from(config).map_err(|source| Error::Client {
        registry: image.registry().to_owned(),
        source,
    })
}

/// The error of asking `registry` for `what`: unreachable, or refused.
pub(crate) fn classify(
    registry: &str,
    what: impl Into<String>,
    source: OciDistributionError,
) -> Error {
    let registry = registry.to_owned();
    let unreachable = match &source {
        OciDistributionError::RequestError(e) => e.is_connect() || e.is_timeout() || e.is_request(),
        OciDistributionError::ServerError { code, .. } => *code >= 500,
        _ => false,
    };
    if unreachable {
        Error::Unreachable { registry, source }
    } else {
        Error::Registry {
            registry,
            what: what.into(),
            source,
        }
    }
}

/// The body of `chunks`, or `None` as soon as it is known to pass `limit`
/// bytes (from the length the answer declares, or from what came): what
/// is past the limit is never held.
async fn read_within<E>(
    mut chunks: impl Stream<Item = Result<Bytes, E>> + Unpin,
    declared: Option<u64>,
    limit: u64,
) -> Result<Option<Vec<u8>>, E> {
    if declared.is_some_and(|n| n > limit) {
        return Ok(None);
    }
    let mut body =
        Vec::with_capacity(usize::try_from(declared.unwrap_or(0).min(limit)).unwrap_or_default());
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if (body.len() + chunk.len()) as u64 > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// The error a registry's refusal says, as the distribution spec writes
/// them: an error envelope, or a status and a message.
fn status_error(status: StatusCode, body: &[u8], url: &str) -> OciDistributionError {
    let url = url.to_owned();
    if status == StatusCode::UNAUTHORIZED {
        return OciDistributionError::UnauthorizedError { url };
    }
    if status.is_success() {
        return OciDistributionError::SpecViolationError(format!(
            "expected HTTP status 200, got {status}"
        ));
    }
    if status.is_client_error()
        && let Ok(envelope) = serde_json::from_slice::<OciEnvelope>(body)
    {
        return OciDistributionError::RegistryError { envelope, url };
    }
    OciDistributionError::ServerError {
        code: status.as_u16(),
        url,
        message: String::from_utf8_lossy(body).into_owned(),
    }
}

/// The first challenge in a `WWW-Authenticate` value the pull can answer:
/// Bearer with a realm, else Basic.
fn challenge(header: &str) -> Option<Challenge> {
    let mut basic = false;
    for challenge in http_auth::ChallengeParser::new(header).filter_map(Result::ok) {
        if challenge.scheme.eq_ignore_ascii_case("bearer") {
            let param = |name: &str| {
                challenge
                    .params
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.to_unescaped())
            };
            if let Some(realm) = param("realm") {
                return Some(Challenge::Bearer {
                    realm,
                    service: param("service"),
                });
            }
        } else if challenge.scheme.eq_ignore_ascii_case("basic") {
            basic = true;
        }
    }
    basic.then_some(Challenge::Basic)
}

/// The token of a token service's answer (`token`, or OAuth2's `access_token`).
fn token_of(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Answer {
        token: Option<String>,
        access_token: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(body).ok()?;
    answer
        .token
        .filter(|t| !t.is_empty())
        .or(answer.access_token.filter(|t| !t.is_empty()))
}

fn digest_header(response: &Response) -> Option<String> {
    response
        .headers()
        .get(DIGEST_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(sizes: &[usize]) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
        futures::stream::iter(
            sizes
                .iter()
                .map(|n| Ok(Bytes::from(vec![b'x'; *n])))
                .collect::<Vec<_>>(),
        )
    }

    async fn read(sizes: &[usize], declared: Option<u64>, limit: u64) -> Option<usize> {
        read_within(chunks(sizes), declared, limit)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .map(|body| body.len())
    }

    #[tokio::test]
    async fn an_answer_within_the_limit_is_read_whole() {
        assert_eq!(read(&[3, 4, 3], None, 10).await, Some(10));
        assert_eq!(read(&[3, 4, 3], Some(10), 10).await, Some(10));
        assert_eq!(read(&[], None, 0).await, Some(0));
    }

    #[tokio::test]
    async fn an_answer_past_the_limit_is_refused_at_the_chunk_that_crosses_it() {
        assert_eq!(read(&[3, 4, 4], None, 10).await, None);
        // What comes after the crossing chunk is never asked for.
        let mut polled = 0;
        let endless = futures::stream::repeat_with(|| {
            polled += 1;
            Ok::<_, std::io::Error>(Bytes::from_static(&[0; 1024]))
        });
        assert!(
            read_within(endless, None, 4096)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .is_none()
        );
        assert_eq!(polled, 5);
    }

    #[tokio::test]
    async fn a_declared_length_past_the_limit_is_refused_before_reading() {
        let never = futures::stream::pending::<Result<Bytes, std::io::Error>>();
        assert!(
            read_within(never, Some(1 << 30), 4 << 20)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .is_none()
        );
    }

    #[test]
    fn a_bearer_challenge_is_preferred_and_basic_taken_otherwise() {
        assert_eq!(
            challenge(r#"Bearer realm="https://auth.example/token",service="registry.example""#),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
            })
        );
        assert_eq!(
            challenge(r#"Basic realm="capwasm-test", Bearer realm="https://a/t""#),
            Some(Challenge::Bearer {
                realm: "https://a/t".into(),
                service: None,
            })
        );
        assert_eq!(
            challenge(r#"Basic realm="capwasm-test""#),
            Some(Challenge::Basic)
        );
        // A Bearer challenge without a realm names no token service.
        assert_eq!(challenge(r#"Bearer service="x""#), None);
        assert_eq!(challenge("Negotiate"), None);
    }

    #[test]
    fn refusals_keep_the_registry_error_envelope_or_the_status() {
        let envelope = br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"no","detail":null}]}"#;
        assert!(matches!(
            status_error(StatusCode::NOT_FOUND, envelope, "u"),
            OciDistributionError::RegistryError { .. }
        ));
        assert!(matches!(
            status_error(StatusCode::NOT_FOUND, b"not json", "u"),
            OciDistributionError::ServerError { code: 404, .. }
        ));
        assert!(matches!(
            status_error(StatusCode::UNAUTHORIZED, b"", "u"),
            OciDistributionError::UnauthorizedError { .. }
        ));
        assert!(matches!(
            status_error(StatusCode::BAD_GATEWAY, envelope, "u"),
            OciDistributionError::ServerError { code: 502, .. }
        ));
        assert!(matches!(
            status_error(StatusCode::ACCEPTED, b"", "u"),
            OciDistributionError::SpecViolationError(_)
        ));
    }

    #[test]
    fn a_token_answer_gives_token_or_access_token() {
        assert_eq!(token_of(br#"{"token":"t1"}"#).as_deref(), Some("t1"));
        assert_eq!(
            token_of(br#"{"token":"","access_token":"t2"}"#).as_deref(),
            Some("t2")
        );
        assert_eq!(token_of(br#"{"expires_in":60}"#), None);
        assert_eq!(token_of(b"<html>"), None);
    }
}
