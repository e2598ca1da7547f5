//! Points the Cluster and MachinePool CRDs' conversion at the webhook and
//! makes the API server trust its CA (`caBundle`), as cert-manager's CA
//! injector would, so that the install needs nothing else.

use base64::Engine as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::Error;
use crate::api::{Cluster, MachinePool};

/// The path the webhook serves conversions on.
pub const PATH: &str = "/convert";

/// How the API server reaches the webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A Service in front of the operator's pods (port 443), in a cluster.
    Service {
        /// Its name.
        name: String,
        /// Its namespace.
        namespace: String,
    },
    /// A URL (`https://host:port/convert`), for an operator outside the cluster.
    Url(String),
}

impl Endpoint {
    /// The CRD's `clientConfig`, the other way of reaching it cleared.
    fn client_config(&self, ca_pem: &str) -> Value {
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
        match self {
            Self::Service { name, namespace } => json!({
                "service": { "name": name, "namespace": namespace, "path": PATH, "port": 443 },
                "url": null,
                "caBundle": ca_bundle,
            }),
            Self::Url(url) => json!({ "url": url, "service": null, "caBundle": ca_bundle }),
        }
    }
}

/// Sets the conversion of the Cluster and MachinePool CRDs to the webhook
/// at `endpoint`, trusted through `ca_pem`.
pub async fn point_crds_at(
    client: &kube::Client,
    endpoint: &Endpoint,
    ca_pem: &str,
) -> Result<(), Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let patch = json!({ "spec": { "conversion": {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": endpoint.client_config(ca_pem),
        },
    }}});
    for crd in [Cluster::crd_name(), MachinePool::crd_name()] {
        crds.patch(crd, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| Error::Crd {
                crd: crd.to_owned(),
                source,
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_or_a_url_replaces_the_other_and_carries_the_ca() {
        let service = Endpoint::Service {
            name: "capwasm-webhook".into(),
            namespace: "capwasm-system".into(),
        }
        .client_config("CA");
        assert_eq!(service["service"]["path"], PATH);
        assert_eq!(service["service"]["port"], 443);
        assert!(service["url"].is_null());
        assert_eq!(service["caBundle"], "Q0E=");
        let url = Endpoint::Url("https://127.0.0.1:9443/convert".into()).client_config("CA");
        assert_eq!(url["url"], "https://127.0.0.1:9443/convert");
        assert!(url["service"].is_null());
    }
}
