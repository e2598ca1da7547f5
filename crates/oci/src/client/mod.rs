//! Registry clients: a pull's, which reads every answer within a size bound
//! and every step within the pull's deadline, so that a registry sending
//! without end, or a byte at a time, costs bounded memory and time; and
//! oci-client's for pushes (its pulls read manifests and error answers
//! whole). Their errors are sorted into unreachable and refused.
//!
//! This file holds the pull's [`Registry`] and how its requests go out and
//! its answers come back; what a pull reads of it is in `fetch`, how it is
//! let in is in `auth`, and the bounded reading and decoding of answers,
//! which need no registry, is in `answer`.

mod answer;
mod auth;
mod fetch;

use std::future::Future;
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use reqwest::header::ACCEPT;
use reqwest::{Method, Response, StatusCode};
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::{Auth, Error, ImageRef};
use answer::{read_within, status_error};

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

    /// Sends `method` to `url` with the pull's authorization; an answer
    /// other than 200 is the error it says.
    async fn send(
        &self,
        method: Method,
        url: &str,
        manifest: bool,
        what: &str,
    ) -> Result<Response, Error> {
        let response = self.request(method, url, manifest, what).await?;
        if response.status() == StatusCode::OK {
            return Ok(response);
        }
        Err(self.refusal(response, what).await)
    }

    /// Sends `method` to `url` with the pull's authorization: the answer,
    /// whatever its status.
    async fn request(
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
        request.send().await.map_err(|e| self.error(what, e.into()))
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
