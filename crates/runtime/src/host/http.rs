//! `wasi:http` egress, bounded: only the hosts a provider's capabilities
//! list, and only so many requests, open at once or in all, with bodies of
//! bounded size, each within the call's deadline. A refused request is an
//! error the guest sees and can handle (`HTTP-request-denied`,
//! `connection-limit-reached`, `HTTP-request-body-size`,
//! `HTTP-response-body-size`), never a trap, and is counted.
//!
//! Open requests hold permits until their connection closes: one of the
//! call's, one of the provider's, and one of the runtime's, which bounds the
//! sockets guests can hold all together, so that the operator's own clients
//! always have descriptors left. The call's are refused at once (they
//! count what the guest itself does); the provider's and the runtime's are
//! shared with other calls, so a request waits for one, within its connect
//! timeout, rather than failing because the fleet is busy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http_body_util::BodyExt as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::super::bounds::MAX_HTTP_PHASE_TIMEOUT;
use super::super::limits::{Capabilities, HttpLimits};
use super::super::metrics::Metrics;
use super::auth::{self, HostAuth, Keys};

/// What the outgoing HTTP of one provider shares across its calls.
pub(crate) struct Egress {
    pub(crate) capabilities: Capabilities,
    pub(crate) limits: HttpLimits,
    /// Requests of this provider open now.
    in_flight: Arc<Semaphore>,
    /// Requests of every provider open now (the runtime's).
    connections: Arc<Semaphore>,
    metrics: Option<Metrics>,
}

impl Egress {
    pub(crate) fn new(
        capabilities: Capabilities,
        limits: HttpLimits,
        connections: Arc<Semaphore>,
        metrics: Option<Metrics>,
    ) -> Self {
        Self {
            capabilities,
            limits,
            in_flight: Arc::new(Semaphore::new(limits.in_flight_per_provider as usize)),
            connections,
            metrics,
        }
    }
}

/// The egress of one call.
pub(crate) struct EgressPolicy {
    provider: Arc<str>,
    egress: Arc<Egress>,
    /// Requests this call has sent.
    sent: u32,
    /// Requests of this call open now; made at the first request, since
    /// most calls send none.
    in_flight: Option<Arc<Semaphore>>,
    /// The call's deadline: no phase waits longer.
    deadline: Duration,
    /// The credentials the host authenticates this call's requests with.
    keys: Option<Arc<Keys>>,
    /// The first host that turned down those credentials, and its status.
    rejected: Arc<Mutex<Option<(String, u16)>>>,
}

impl EgressPolicy {
    pub(crate) fn new(
        provider: Arc<str>,
        egress: Arc<Egress>,
        deadline: Duration,
        keys: Option<Arc<Keys>>,
    ) -> Self {
        Self {
            provider,
            egress,
            sent: 0,
            in_flight: None,
            deadline,
            keys,
            rejected: Arc::default(),
        }
    }

    /// The first host that answered an authenticated request of this call
    /// with 401 or 403, and the status.
    pub(crate) fn rejected(&self) -> Option<(String, u16)> {
        self.rejected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The call's own permit for one more request, or the limit it would
    /// cross: what one call sends is the guest's doing, refused at once.
    fn admit(&mut self) -> Result<OwnedSemaphorePermit, &'static str> {
        self.sent = self.sent.saturating_add(1);
        if self.sent > self.egress.limits.requests_per_call {
            return Err("requests_per_call");
        }
        let per_call = self.egress.limits.in_flight_per_call as usize;
        self.in_flight
            .get_or_insert_with(|| Arc::new(Semaphore::new(per_call)))
            .clone()
            .try_acquire_owned()
            .map_err(|_| "in_flight_per_call")
    }

    /// The slot pools this call shares with others, by limit name.
    fn shared_pools(&self) -> [(&'static str, Arc<Semaphore>); 2] {
        [
            ("in_flight_per_provider", self.egress.in_flight.clone()),
            ("connections", self.egress.connections.clone()),
        ]
    }

    fn refused(&self, limit: &'static str) {
        self.tally().refused(limit);
    }

    /// Where a request to `uri` goes (its authority) and how it is
    /// authenticated: by its host's rule, or not at all. Refused (and
    /// counted) if its host is not allowed, or has a rule the request does
    /// not match in scheme, host and port.
    fn destination(&self, uri: &http::Uri) -> Result<(String, Option<HostAuth>), ()> {
        let authority = uri
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default();
        if !self.egress.capabilities.allows(&authority) {
            self.refused("host");
            tracing::warn!(
                provider = &*self.provider,
                authority,
                "refused outgoing HTTP request to a host the provider may not reach"
            );
            return Err(());
        }
        let scheme = uri.scheme_str().unwrap_or_default();
        match self.egress.capabilities.auth_for(scheme, &authority) {
            Ok(auth) => Ok((authority, auth.cloned())),
            Err(rule) => {
                self.refused("credential_rule");
                tracing::warn!(
                    provider = &*self.provider,
                    scheme,
                    authority,
                    rule = rule.endpoint(),
                    "refused outgoing HTTP request to a host with a credential rule it does not match"
                );
                Err(())
            }
        }
    }

    fn tally(&self) -> Tally {
        Tally {
            metrics: self.egress.metrics.clone(),
            provider: self.provider.clone(),
        }
    }
}

/// Counts a provider's requests, for the futures that outlive the call's borrow.
#[derive(Clone)]
struct Tally {
    metrics: Option<Metrics>,
    provider: Arc<str>,
}

impl Tally {
    fn refused(&self, limit: &'static str) {
        if let Some(metrics) = &self.metrics {
            metrics.http_refused(&self.provider, limit);
        }
    }

    /// A request sent, and its answer's status (none: no answer).
    fn sent(&self, status: Option<u16>) {
        if let Some(metrics) = &self.metrics {
            metrics.http_sent(&self.provider, status);
        }
    }
}

type Io = Box<dyn Future<Output = Result<(), Error>> + Send>;
type Sent = Box<dyn Future<Output = Result<(http::Response<WasiBody>, Io), Error>> + Send>;

impl WasiHttpHooks for EgressPolicy {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _io: Io,
    ) -> Sent {
        // Only to allowed hosts; authenticated by the host, or not at all: a
        // host with a rule never gets the request unauthenticated, nor the
        // keys anywhere but the rule's scheme, host and port.
        let Ok((authority, auth)) = self.destination(request.uri()) else {
            return Box::new(async { Err(Error::HttpRequestDenied) });
        };
        // A body the request says is too large is refused before it is sent.
        let max_body = self.egress.limits.max_request_body_bytes;
        let declared = content_length(request.headers());
        if declared.is_some_and(|length| length > max_body) {
            self.refused("request_body");
            return Box::new(async move { Err(Error::HttpRequestBodySize(declared)) });
        }
        let call_permit = match self.admit() {
            Ok(permit) => permit,
            Err(limit) => {
                self.refused(limit);
                tracing::debug!(
                    provider = &*self.provider,
                    limit,
                    "refused an outgoing HTTP request over a limit"
                );
                return Box::new(async { Err(Error::ConnectionLimitReached) });
            }
        };
        let keys = self.keys.clone();
        let rejected = self.rejected.clone();
        let limits = self.egress.limits;
        let options = bounded(options.unwrap_or_default(), self.deadline);
        let tally = self.tally();
        let counter = |limit| {
            let tally = tally.clone();
            move || tally.refused(limit)
        };
        let request_body = Cap {
            limit: limits.max_request_body_bytes,
            error: Error::HttpRequestBodySize,
            crossed: Arc::new(AtomicBool::new(false)),
        };
        let crossed = request_body.crossed.clone();
        let request = request.map(|body| request_body.apply(body, counter("request_body")));
        let response_body = Cap {
            limit: limits.max_response_body_bytes,
            error: Error::HttpResponseBodySize,
            crossed: Arc::new(AtomicBool::new(false)),
        };
        let count_response = counter("response_body");
        let shared = self.shared_pools();
        Box::new(async move {
            let wait = options.connect_timeout.unwrap_or(MAX_HTTP_PHASE_TIMEOUT);
            let permits = shared_slots(shared, wait).await.map_err(|limit| {
                tally.refused(limit);
                Error::ConnectionLimitReached
            })?;
            let permits = (call_permit, permits);
            let request = match &auth {
                Some(auth) => {
                    let keys = keys.unwrap_or_default();
                    auth::authenticate(request, auth, &keys).await?
                }
                None => request,
            };
            let sent = wasmtime_wasi_http::default_send_request(request, Some(options)).await;
            tally.sent(sent.as_ref().ok().map(|(r, _)| r.status().as_u16()));
            // A streamed body over its cap fails the send as a protocol
            // error; the guest is told what it crossed.
            let (response, io) = sent.map_err(|error| {
                if crossed.load(Ordering::Relaxed) {
                    Error::HttpRequestBodySize(Some(limits.max_request_body_bytes))
                } else {
                    error
                }
            })?;
            // A body the response says is too large is refused before it is
            // read: the guest learns which cap it met, not just that the
            // stream broke.
            let declared = content_length(response.headers());
            if declared.is_some_and(|length| length > limits.max_response_body_bytes) {
                count_response();
                return Err(Error::HttpResponseBodySize(declared));
            }
            let status = response.status().as_u16();
            if auth.is_some() && matches!(status, 401 | 403) {
                rejected
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert((authority, status));
            }
            let response =
                response.map(|body| response_body.apply(body.boxed_unsync(), count_response));
            // The permits go when the connection does.
            let io = async move {
                let _permits = permits;
                io.await
            };
            Ok((response, Box::new(io) as Io))
        })
    }
}

/// A slot of each shared pool (the provider's, the host's), each waited
/// for at most `wait` (as long as connecting may take): a request waits
/// rather than failing because other calls are busy. Otherwise the limit
/// it could not get.
async fn shared_slots(
    shared: [(&'static str, Arc<Semaphore>); 2],
    wait: Duration,
) -> Result<Vec<OwnedSemaphorePermit>, &'static str> {
    let mut permits = Vec::with_capacity(shared.len());
    for (limit, slots) in shared {
        let Ok(Ok(permit)) = tokio::time::timeout(wait, slots.acquire_owned()).await else {
            return Err(limit);
        };
        permits.push(permit);
    }
    Ok(permits)
}

/// The length a message declares for its body.
fn content_length(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// A cap on a body's bytes, and whether the body crossed it.
struct Cap {
    limit: u64,
    error: fn(Option<u64>) -> Error,
    crossed: Arc<AtomicBool>,
}

impl Cap {
    /// `body`, failing with the cap's error (and `crossing` called) once it
    /// passes the limit.
    fn apply(self, body: WasiBody, crossing: impl Fn() + Send + Sync + 'static) -> WasiBody {
        let limit_usize = usize::try_from(self.limit).unwrap_or(usize::MAX);
        let Self {
            limit,
            error,
            crossed,
        } = self;
        http_body_util::Limited::new(body, limit_usize)
            .map_err(move |e| {
                if let Ok(e) = e.downcast::<Error>() {
                    return *e;
                }
                if !crossed.swap(true, Ordering::Relaxed) {
                    crossing();
                }
                error(Some(limit))
            })
            .boxed_unsync()
    }
}

/// The guest's timeouts, none over [`MAX_HTTP_PHASE_TIMEOUT`] or the call's deadline.
fn bounded(options: RequestOptions, deadline: Duration) -> RequestOptions {
    let most = MAX_HTTP_PHASE_TIMEOUT.min(deadline);
    let cap = |t: Option<Duration>| Some(t.map_or(most, |t| t.min(most)));
    RequestOptions {
        connect_timeout: cap(options.connect_timeout),
        first_byte_timeout: cap(options.first_byte_timeout),
        between_bytes_timeout: cap(options.between_bytes_timeout),
    }
}
