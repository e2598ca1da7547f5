//! `wasi:http` egress: only the hosts a provider's capabilities list. A
//! refused request is an error the guest sees (`HttpRequestDenied`), not a
//! trap, and a host log line.

use std::sync::Arc;
use std::time::Duration;

use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::super::limits::Capabilities;

/// No single HTTP phase may take longer: the call's epoch deadline cannot
/// interrupt a guest blocked inside the host waiting for a response.
const MAX_PHASE_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) struct EgressPolicy {
    provider: Arc<str>,
    capabilities: Arc<Capabilities>,
}

impl EgressPolicy {
    pub(crate) fn new(provider: Arc<str>, capabilities: Arc<Capabilities>) -> Self {
        Self {
            provider,
            capabilities,
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
        let authority = request
            .uri()
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default();
        if !self.capabilities.allows(&authority) {
            tracing::warn!(
                provider = &*self.provider,
                authority,
                "refused outgoing HTTP request to a host the provider may not reach"
            );
            return Box::new(async { Err(Error::HttpRequestDenied) });
        }
        let options = bounded(options.unwrap_or_default());
        Box::new(async move {
            use http_body_util::BodyExt;
            let (response, io) =
                wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
            Ok((response.map(BodyExt::boxed_unsync), Box::new(io) as Io))
        })
    }
}

fn bounded(options: RequestOptions) -> RequestOptions {
    let cap = |t: Option<Duration>| Some(t.map_or(MAX_PHASE_TIMEOUT, |t| t.min(MAX_PHASE_TIMEOUT)));
    RequestOptions {
        connect_timeout: cap(options.connect_timeout),
        first_byte_timeout: cap(options.first_byte_timeout),
        between_bytes_timeout: cap(options.between_bytes_timeout),
    }
}
