//! Requests the operator makes to the management API server, counted by
//! verb and resource as the client sends them: what the caches save, and
//! what a fleet costs the API server, can be read off `/metrics`.

use http::{Method, Request};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: &'static str,
    /// `<plural>[/<subresource>]`: bounded by the kinds the server serves.
    resource: String,
}

/// Requests by verb (`get`, `list`, `watch`, `create`, `update`, `patch`,
/// `delete`, `deletecollection`) and resource.
#[derive(Clone, Debug, Default)]
pub struct ApiRequests {
    counts: Family<RequestLabels, Counter>,
}

impl ApiRequests {
    /// Registers the counts as `capwasm_api_requests`.
    pub(super) fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "capwasm_api_requests",
            "Requests to the management API server, by verb and resource",
            self.counts.clone(),
        );
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
    use super::*;

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
