//! Requests the operator makes to the management API server, counted by
//! verb and resource as the client sends them: what the caches save, and
//! what a fleet costs the API server, can be read off `/metrics`; and by
//! status code, method and host as client-go counts them
//! (`rest_client_requests_total`), once answered.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Method, Request, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: &'static str,
    /// `<plural>[/<subresource>]`: bounded by the kinds the server serves.
    resource: String,
}

/// client-go's labels of `rest_client_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    /// The status code (`200`), or `<error>` when no answer came.
    code: String,
    /// The HTTP method (`GET`).
    method: String,
    /// The API server's `host:port`.
    host: Arc<str>,
}

/// Requests by verb (`get`, `list`, `watch`, `create`, `update`, `patch`,
/// `delete`, `deletecollection`) and resource; and answered, by code,
/// method and host.
#[derive(Clone, Debug, Default)]
pub struct ApiRequests {
    counts: Family<RequestLabels, Counter>,
    results: Family<ResultLabels, Counter>,
}

impl ApiRequests {
    /// Registers the counts as `capwasm_api_requests` and
    /// `rest_client_requests`.
    pub(super) fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "capwasm_api_requests",
            "Requests to the management API server, by verb and resource",
            self.counts.clone(),
        );
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            self.results.clone(),
        );
    }

    /// A layer for the client of the API server at `host` (`host:port`)
    /// that counts each request as it goes out, and its answer.
    pub fn layer(&self, host: &str) -> CountLayer {
        CountLayer {
            requests: self.clone(),
            host: host.into(),
        }
    }

    /// Requests answered with `code` (or `<error>`) for `method` so far.
    pub fn answered(&self, code: &str, method: &str, host: &str) -> u64 {
        self.results
            .get(&ResultLabels {
                code: code.to_owned(),
                method: method.to_owned(),
                host: host.into(),
            })
            .map_or(0, |c| c.get())
    }

    /// Counts `request`.
    pub fn count<B>(&self, request: &Request<B>) {
        let (verb, resource) = classify(request.method(), request.uri());
        self.counts
            .get_or_create(&RequestLabels { verb, resource })
            .inc();
    }

    /// Requests of `verb` on `resource` so far.
    pub fn get(&self, verb: &'static str, resource: &str) -> u64 {
        self.counts
            .get(&RequestLabels {
                verb,
                resource: resource.to_owned(),
            })
            .map_or(0, |c| c.get())
    }
}

/// Counts requests and their answers ([`ApiRequests::layer`]).
#[derive(Clone, Debug)]
pub struct CountLayer {
    requests: ApiRequests,
    host: Arc<str>,
}

impl<S> tower::Layer<S> for CountLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            requests: self.requests.clone(),
            host: self.host.clone(),
        }
    }
}

/// A service whose requests and answers are counted.
#[derive(Clone, Debug)]
pub struct Counted<S> {
    inner: S,
    requests: ApiRequests,
    host: Arc<str>,
}

impl<S, B, R> tower::Service<Request<B>> for Counted<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        self.requests.count(&request);
        let results = self.requests.results.clone();
        let method = request.method().as_str().to_owned();
        let host = self.host.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            let code = match &answer {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_owned(),
            };
            results
                .get_or_create(&ResultLabels { code, method, host })
                .inc();
            answer
        })
    }
}

/// The Kubernetes verb and resource of a request, from its method and path
/// (`/api/v1/namespaces/ns/secrets/name`, `/apis/g/v/plural/name/status`).
fn classify(method: &Method, uri: &http::Uri) -> (&'static str, String) {
    let segments: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    // After `api/<version>` or `apis/<group>/<version>`.
    let rest = match segments.as_slice() {
        ["api", _, rest @ ..] | ["apis", _, _, rest @ ..] => rest,
        _ => &[][..],
    };
    let rest = match rest {
        ["namespaces", _, rest @ ..] if !rest.is_empty() => rest,
        rest => rest,
    };
    let (resource, named) = match rest {
        [] => (String::new(), false),
        [plural] => ((*plural).to_owned(), false),
        [plural, _] => ((*plural).to_owned(), true),
        // A subresource: `<plural>/<subresource>` as one label.
        [plural, _, subresource, ..] => (format!("{plural}/{subresource}"), true),
    };
    let watching = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let verb = match *method {
        Method::GET if watching => "watch",
        Method::GET if named || resource.is_empty() => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    };
    (verb, resource)
}

#[cfg(test)]
mod tests {
    use tower::{Layer as _, ServiceExt as _};

    use super::*;

    #[tokio::test]
    async fn answers_are_counted_by_code_method_and_host_and_failures_as_error() {
        let requests = ApiRequests::default();
        let layer = requests.layer("10.96.0.1:443");
        let answering = layer.layer(tower::service_fn(|request: Request<()>| async move {
            let status = if request.uri().path().ends_with("/missing") {
                404
            } else {
                200
            };
            Ok::<_, std::io::Error>(Response::builder().status(status).body(()).unwrap())
        }));
        for path in ["/api/v1/namespaces", "/api/v1/namespaces/missing"] {
            let request = Request::get(path).body(()).unwrap();
            answering.clone().oneshot(request).await.unwrap();
        }
        let failing = layer.layer(tower::service_fn(|_: Request<()>| async {
            Err::<Response<()>, _>(std::io::Error::other("connection refused"))
        }));
        let request = Request::patch("/api/v1/namespaces/a").body(()).unwrap();
        assert!(failing.oneshot(request).await.is_err());
        assert_eq!(requests.answered("200", "GET", "10.96.0.1:443"), 1);
        assert_eq!(requests.answered("404", "GET", "10.96.0.1:443"), 1);
        assert_eq!(requests.answered("<error>", "PATCH", "10.96.0.1:443"), 1);
        assert_eq!(requests.get("list", "namespaces"), 1);
        assert_eq!(requests.get("patch", "namespaces"), 1);
    }

    fn of(method: &Method, uri: &str) -> (&'static str, String) {
        let uri: http::Uri = uri.parse().unwrap();
        classify(method, &uri)
    }

    #[test]
    fn requests_are_classified_by_verb_and_resource() {
        let cases = [
            (
                Method::GET,
                "/api/v1/namespaces/ns/secrets/c1-kubeconfig",
                "get",
                "secrets",
            ),
            (
                Method::GET,
                "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters",
                "list",
                "clusters",
            ),
            (
                Method::GET,
                "/apis/cluster.x-k8s.io/v1beta2/clusters?watch=true&resourceVersion=5",
                "watch",
                "clusters",
            ),
            (
                Method::GET,
                "/apis/cluster.x-k8s.io/v1beta2/machinepools?labelSelector=a",
                "list",
                "machinepools",
            ),
            (
                Method::PATCH,
                "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinepools/p/status?fieldManager=x",
                "patch",
                "machinepools/status",
            ),
            (
                Method::PATCH,
                "/apis/runtime.capwasm.dev/v1alpha1/providermodules/m/status",
                "patch",
                "providermodules/status",
            ),
            (
                Method::GET,
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/a.b",
                "get",
                "customresourcedefinitions",
            ),
            (
                Method::POST,
                "/apis/events.k8s.io/v1/namespaces/ns/events",
                "create",
                "events",
            ),
            (
                Method::DELETE,
                "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinepools/p",
                "delete",
                "machinepools",
            ),
            (Method::GET, "/api/v1/namespaces", "list", "namespaces"),
            (Method::GET, "/api/v1/namespaces/ns", "get", "namespaces"),
            (Method::GET, "/version", "get", ""),
        ];
        for (method, uri, verb, resource) in cases {
            assert_eq!(of(&method, uri), (verb, resource.to_owned()), "{uri}");
        }
    }
}
