//! Points the Cluster and MachinePool CRDs' conversion, and the
//! PlatformCluster admission webhook's configuration, at the webhook and
//! makes the API server trust its CA (`caBundle`), as cert-manager's CA
//! injector would, so that the install needs nothing else.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ServiceReference, ValidatingWebhook, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::CustomResourceExt as _;
use kube::api::{Api, Patch, PatchParams};

use super::{Error, admission};
use crate::api::{Cluster, ConversionWebhook, MachinePool, WebhookClient, crd_conversion};

/// The ValidatingWebhookConfiguration the operator keeps.
pub const ADMISSION_CONFIGURATION: &str = "capwasm-platform";

/// How long the API server waits for a judgement: a provider call's
/// default deadline, and then some.
const ADMISSION_TIMEOUT_SECONDS: i32 = 15;

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

/// Registers the PlatformCluster admission webhook at `endpoint` (its path
/// replaced by [`admission::PATH`]), trusted through `ca_pem`. The API
/// server ignores the webhook when it cannot be reached: the controller
/// judges every change anyway, and an operator that is down must not stop
/// anyone editing their clusters. Applying the same configuration again
/// (a restart) writes nothing.
pub async fn register_admission(
    client: &kube::Client,
    endpoint: &WebhookClient,
    ca_pem: &str,
) -> Result<(), Error> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let params = PatchParams::apply(crate::api::platform::FIELD_MANAGER).force();
    let configuration = admission_configuration(endpoint, ca_pem);
    api.patch(
        ADMISSION_CONFIGURATION,
        &params,
        &Patch::Apply(&configuration),
    )
    .await
    .map_err(Error::Admission)?;
    Ok(())
}

/// New and changed PlatformClusters, sent to `endpoint`.
fn admission_configuration(
    endpoint: &WebhookClient,
    ca_pem: &str,
) -> ValidatingWebhookConfiguration {
    let (url, service) = match endpoint.at(admission::PATH) {
        WebhookClient::Url(url) => (Some(url), None),
        WebhookClient::Service {
            namespace,
            name,
            path,
            port,
        } => (
            None,
            Some(ServiceReference {
                namespace,
                name,
                path,
                port,
            }),
        ),
    };
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(ADMISSION_CONFIGURATION.into()),
            ..ObjectMeta::default()
        },
        webhooks: Some(vec![ValidatingWebhook {
            name: format!("platformclusters.{}", crate::api::platform::GROUP),
            admission_review_versions: vec!["v1".into()],
            client_config: WebhookClientConfig {
                ca_bundle: Some(ByteString(ca_pem.as_bytes().to_vec())),
                service,
                url,
            },
            failure_policy: Some("Ignore".into()),
            rules: Some(vec![RuleWithOperations {
                api_groups: Some(vec![crate::api::platform::GROUP.into()]),
                api_versions: Some(vec!["*".into()]),
                operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
                resources: Some(vec!["platformclusters".into()]),
                scope: Some("Namespaced".into()),
            }]),
            side_effects: "None".into(),
            timeout_seconds: Some(ADMISSION_TIMEOUT_SECONDS),
            ..ValidatingWebhook::default()
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admission_webhook_is_called_at_its_own_path_of_the_same_endpoint() {
        let url = WebhookClient::Url("https://127.0.0.1:9443/convert".into());
        let configuration = admission_configuration(&url, "CA");
        let webhooks = configuration.webhooks.unwrap_or_default();
        let config = &webhooks[0].client_config;
        assert_eq!(
            config.url.as_deref(),
            Some("https://127.0.0.1:9443/validate-platformcluster")
        );
        assert_eq!(config.ca_bundle, Some(ByteString(b"CA".to_vec())));
        let service = WebhookClient::Service {
            namespace: "capwasm-system".into(),
            name: "capwasm-webhook".into(),
            path: Some("/convert".into()),
            port: Some(443),
        };
        let configuration = admission_configuration(&service, "CA");
        let webhooks = configuration.webhooks.unwrap_or_default();
        let reference = webhooks[0]
            .client_config
            .service
            .clone()
            .unwrap_or_default();
        assert_eq!(reference.path.as_deref(), Some(admission::PATH));
        assert_eq!(reference.name, "capwasm-webhook");
        assert_eq!(webhooks[0].failure_policy.as_deref(), Some("Ignore"));
    }
}
