//! Points the Cluster and MachinePool CRDs' conversion at the webhook and
//! makes the API server trust its CA (`caBundle`), as cert-manager's CA
//! injector would, so that the install needs nothing else.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;
use kube::api::{Api, Patch, PatchParams};

use super::Error;
use crate::api::{Cluster, ConversionWebhook, MachinePool, WebhookClient, crd_conversion};

/// Sets the conversion of the Cluster and MachinePool CRDs to the webhook
/// at `client`, trusted through `ca_pem`: the whole `spec.conversion`
/// replaced, so no field of an earlier endpoint is left.
pub async fn point_crds_at(
    client: &kube::Client,
    endpoint: &WebhookClient,
    ca_pem: &str,
) -> Result<(), Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let conversion = crd_conversion(&ConversionWebhook {
        client: endpoint.clone(),
        ca_bundle: ca_pem.as_bytes().to_vec(),
    });
    let patch = serde_json::json!([
        { "op": "add", "path": "/spec/conversion", "value": conversion },
    ]);
    let patch: json_patch::Patch = serde_json::from_value(patch).map_err(|e| Error::Crd {
        crd: String::new(),
        source: kube::Error::SerdeError(e),
    })?;
    for crd in [Cluster::crd_name(), MachinePool::crd_name()] {
        let failed = |source| Error::Crd {
            crd: crd.to_owned(),
            source,
        };
        // A restart with the same certificate and address writes nothing.
        let current = crds.get(crd).await.map_err(failed)?;
        if current.spec.conversion.as_ref() == Some(&conversion) {
            continue;
        }
        crds.patch(
            crd,
            &PatchParams::default(),
            &Patch::Json::<()>(patch.clone()),
        )
        .await
        .map_err(failed)?;
    }
    Ok(())
}
