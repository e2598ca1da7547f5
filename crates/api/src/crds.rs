//! The CRDs of every kind, generated from the Rust types; `capwasm crds`
//! prints or writes them and a test keeps `crds/` equal to them.
//!
//! [`all`] has Cluster and MachinePool in v1beta2 alone; [`with_v1beta1`]
//! gives them v1beta1 too, with the conversion webhook that version needs:
//! without one the API server would convert by rewriting `apiVersion` alone.
//! `crds/` holds [`published`].

use k8s_openapi::ByteString;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray,
    JSONSchemaPropsOrBool, ServiceReference, WebhookClientConfig, WebhookConversion,
};
use kube::CustomResourceExt;
use kube::core::crd::{MergeError, merge_crds};

use super::{
    Cluster, ClusterTemplate, Machine, MachinePool, PlatformCluster, ProviderModule,
    WasmBootstrapConfig, WasmCluster, WasmControlPlane, WasmMachine, WasmMachinePool, v1beta1,
};

/// Where the API server sends the `ConversionReview`s of Cluster and MachinePool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversionWebhook {
    /// How the API server reaches the webhook.
    pub client: WebhookClient,
    /// PEM certificates the webhook's serving certificate must chain to;
    /// empty for the API server's own trust roots.
    pub ca_bundle: Vec<u8>,
}

/// How the API server reaches a webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookClient {
    /// An `https://` URL.
    Url(String),
    /// A Service in the cluster.
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The URL path, such as `/convert`.
        path: Option<String>,
        /// Its port; 443 when unset.
        port: Option<i32>,
    },
}

impl WebhookClient {
    /// The same server at `path` (another webhook it serves).
    #[must_use]
    pub fn at(&self, path: &str) -> Self {
        match self {
            Self::Url(url) => {
                // Scheme and authority kept, path and query replaced.
                let authority_at = url.find("://").map_or(0, |i| i + 3);
                let end = url[authority_at..]
                    .find(['/', '?'])
                    .map_or(url.len(), |i| authority_at + i);
                Self::Url(format!("{}{path}", &url[..end]))
            }
            Self::Service {
                namespace,
                name,
                port,
                ..
            } => Self::Service {
                namespace: namespace.clone(),
                name: name.clone(),
                path: Some(path.to_owned()),
                port: *port,
            },
        }
    }
}

/// Every CRD capwasm serves, in the order of [`all`], with Cluster and
/// MachinePool serving v1beta1 (deprecated) next to v1beta2 (stored),
/// converted by `webhook`.
pub fn with_v1beta1(
    webhook: &ConversionWebhook,
) -> Result<Vec<CustomResourceDefinition>, MergeError> {
    let cluster = merge_crds(vec![Cluster::crd(), v1beta1::Cluster::crd()], "v1beta2")?;
    let pool = merge_crds(
        vec![MachinePool::crd(), v1beta1::MachinePool::crd()],
        "v1beta2",
    )?;
    let mut crds = all();
    for crd in &mut crds {
        if crd.spec.names.kind == cluster.spec.names.kind && crd.spec.group == cluster.spec.group {
            *crd = with_conversion_webhook(cluster.clone(), webhook);
        } else if crd.spec.names.kind == pool.spec.names.kind && crd.spec.group == pool.spec.group {
            *crd = with_conversion_webhook(pool.clone(), webhook);
        }
    }
    Ok(crds)
}

/// `crd` converting between its versions through `webhook`.
pub fn with_conversion_webhook(
    mut crd: CustomResourceDefinition,
    webhook: &ConversionWebhook,
) -> CustomResourceDefinition {
    crd.spec.conversion = Some(conversion(webhook));
    crd
}

/// A CRD's `spec.conversion` through `webhook` (`ConversionReview` `v1`).
pub fn conversion(webhook: &ConversionWebhook) -> CustomResourceConversion {
    let (url, service) = match &webhook.client {
        WebhookClient::Url(url) => (Some(url.clone()), None),
        WebhookClient::Service {
            namespace,
            name,
            path,
            port,
        } => (
            None,
            Some(ServiceReference {
                namespace: namespace.clone(),
                name: name.clone(),
                path: path.clone(),
                port: *port,
            }),
        ),
    };
    CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            client_config: Some(WebhookClientConfig {
                ca_bundle: (!webhook.ca_bundle.is_empty())
                    .then(|| ByteString(webhook.ca_bundle.clone())),
                service,
                url,
            }),
            conversion_review_versions: vec!["v1".into()],
        }),
    }
}

/// The webhook of the install in `deploy/`: Service `capwasm-webhook` in
/// `capwasm-system`, path `/convert`. The operator adds its CA (or, run
/// outside the cluster, its URL) when it starts.
pub fn installed_webhook() -> ConversionWebhook {
    ConversionWebhook {
        client: WebhookClient::Service {
            namespace: "capwasm-system".into(),
            name: "capwasm-webhook".into(),
            path: Some(WEBHOOK_PATH.into()),
            port: Some(443),
        },
        ca_bundle: Vec::new(),
    }
}

/// The path the conversion webhook serves.
pub const WEBHOOK_PATH: &str = "/convert";

/// What `capwasm crds` writes and `crds/` holds: [`with_v1beta1`] through
/// [`installed_webhook`].
pub fn published() -> Result<Vec<CustomResourceDefinition>, MergeError> {
    with_v1beta1(&installed_webhook())
}

/// Every CRD capwasm serves, in a stable order.
pub fn all() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        Cluster::crd(),
        MachinePool::crd(),
        Machine::crd(),
        WasmBootstrapConfig::crd(),
        WasmMachinePool::crd(),
        WasmMachine::crd(),
        WasmCluster::crd(),
        WasmControlPlane::crd(),
        ProviderModule::crd(),
        PlatformCluster::crd(),
        ClusterTemplate::crd(),
    ];
    for crd in &mut crds {
        for version in &mut crd.spec.versions {
            if let Some(schema) = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
            {
                signed(schema);
            }
        }
    }
    crds
}

/// `schema` with the unsigned integer formats schemars writes for Rust's
/// `u8`..`u64` (`uint32`, say) replaced by the signed ones the API server
/// knows, their range kept as `minimum` and `maximum`: it warns on every
/// apply of a CRD with a format it does not know.
fn signed(schema: &mut JSONSchemaProps) {
    let range = match schema.format.as_deref() {
        Some("uint8") => Some(("int32", u64::from(u8::MAX))),
        Some("uint16") => Some(("int32", u64::from(u16::MAX))),
        Some("uint32") => Some(("int64", u64::from(u32::MAX))),
        // 2^53 - 1: an int64 the API server accepts as a bound, and a
        // JSON number every client reads exactly (i64::MAX as a float
        // rounds up to 2^63, which the API server refuses as no int64).
        Some("uint64" | "uint") => Some(("int64", (1 << 53) - 1)),
        _ => None,
    };
    if let Some((format, max)) = range {
        schema.format = Some(format.to_owned());
        schema.minimum = Some(schema.minimum.map_or(0.0, |m| m.max(0.0)));
        #[allow(clippy::cast_precision_loss)] // CRD bounds are JSON numbers
        let max = max as f64;
        schema.maximum = Some(schema.maximum.map_or(max, |m| m.min(max)));
    }
    let children = schema
        .properties
        .iter_mut()
        .flat_map(|p| p.values_mut())
        .chain(
            schema
                .additional_properties
                .iter_mut()
                .filter_map(|a| match a {
                    JSONSchemaPropsOrBool::Schema(s) => Some(&mut **s),
                    JSONSchemaPropsOrBool::Bool(_) => None,
                }),
        )
        .chain(schema.items.iter_mut().flat_map(|items| match items {
            JSONSchemaPropsOrArray::Schema(s) => std::slice::from_mut(&mut **s),
            JSONSchemaPropsOrArray::Schemas(all) => all.as_mut_slice(),
        }))
        .chain(schema.all_of.iter_mut().flatten())
        .chain(schema.any_of.iter_mut().flatten())
        .chain(schema.one_of.iter_mut().flatten());
    for child in children {
        signed(child);
    }
}

/// One CRD as the YAML file `crds/<group>_<plural>.yaml` holds: the file
/// name and its content.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<(String, String), serde_yaml_ng::Error> {
    let file = format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural);
    let body = serde_yaml_ng::to_string(crd)?;
    Ok((
        file,
        format!("# Generated by `capwasm crds --output-dir crds`: do not edit.\n{body}"),
    ))
}

/// `crds/kustomization.yaml`: the CRD files, so that `deploy/` can list
/// `../crds` and one `kubectl apply -k deploy/` installs everything.
pub fn kustomization(files: &[String]) -> String {
    let mut text = String::from(
        "# Generated by `capwasm crds --output-dir crds`: do not edit.\n\
         apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
    );
    for file in files {
        text.push_str("  - ");
        text.push_str(file);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_crds_carry_contract_labels_and_core_kinds_do_not() {
        for crd in all() {
            let labels = crd.metadata.labels.clone().unwrap_or_default();
            let is_provider = crd.spec.group.ends_with(".cluster.x-k8s.io");
            assert_eq!(
                labels.contains_key(crate::labels::CONTRACT_V1BETA2),
                is_provider,
                "{}",
                crd.spec.names.kind
            );
        }
    }

    #[test]
    fn crd_names_follow_the_contract_plural_dot_group() {
        for crd in all() {
            let name = crd.metadata.name.clone().unwrap_or_default();
            assert_eq!(
                name,
                format!(
                    "{}.{}",
                    crd.spec.names.kind.to_lowercase() + "s",
                    crd.spec.group
                )
            );
        }
    }

    /// Every integer field of every CRD in `schema`, as (path, format, maximum).
    fn integers(
        path: &str,
        schema: &JSONSchemaProps,
        found: &mut Vec<(String, Option<String>, Option<f64>)>,
    ) {
        if schema.type_.as_deref() == Some("integer") {
            found.push((path.to_owned(), schema.format.clone(), schema.maximum));
        }
        for (name, child) in schema.properties.iter().flatten() {
            integers(&format!("{path}.{name}"), child, found);
        }
        if let Some(JSONSchemaPropsOrBool::Schema(child)) = &schema.additional_properties {
            integers(&format!("{path}.*"), child, found);
        }
        if let Some(JSONSchemaPropsOrArray::Schema(child)) = &schema.items {
            integers(&format!("{path}[]"), child, found);
        }
    }

    #[test]
    fn integers_have_formats_the_api_server_knows_and_a_maximum() {
        let mut found = Vec::new();
        for crd in published().unwrap() {
            for version in &crd.spec.versions {
                let schema = version
                    .schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref());
                let path = format!("{}/{}", crd.spec.names.kind, version.name);
                integers(&path, schema.unwrap(), &mut found);
            }
        }
        assert!(found.len() > 20, "{found:?}");
        for (path, format, maximum) in &found {
            assert!(
                matches!(format.as_deref(), Some("int32" | "int64")),
                "{path}: format {format:?}"
            );
            // int32 is bounded by its format; a wider one a spec holds
            // needs its own.
            assert!(
                !path.contains(".spec.") || format.as_deref() == Some("int32") || maximum.is_some(),
                "{path}: no maximum"
            );
            // The API server refuses a bound its format cannot hold.
            let largest = match format.as_deref() {
                Some("int32") => f64::from(i32::MAX),
                _ => 9_007_199_254_740_991_f64,
            };
            assert!(
                maximum.is_none_or(|m| m <= largest),
                "{path}: maximum {maximum:?} is past {format:?}"
            );
        }
    }

    #[test]
    fn provider_id_lists_use_the_contract_field_name() {
        let schema = serde_json::to_string(&all()).unwrap();
        assert!(schema.contains("\"providerIDList\""));
        assert!(!schema.contains("providerIdList"));
    }

    fn webhook() -> ConversionWebhook {
        ConversionWebhook {
            client: WebhookClient::Service {
                namespace: "capwasm-system".into(),
                name: "capwasm-webhook".into(),
                path: Some("/convert".into()),
                port: Some(9443),
            },
            ca_bundle: b"-----BEGIN CERTIFICATE-----\n".to_vec(),
        }
    }

    #[test]
    fn all_serves_one_version_and_converts_none() {
        for crd in all() {
            assert_eq!(crd.spec.versions.len(), 1, "{}", crd.spec.names.kind);
            assert!(crd.spec.conversion.is_none());
        }
    }

    #[test]
    fn with_v1beta1_serves_v1beta1_deprecated_beside_the_stored_v1beta2() {
        let crds = with_v1beta1(&webhook()).unwrap();
        let names = |crds: &[CustomResourceDefinition]| {
            crds.iter()
                .map(|c| c.metadata.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&crds), names(&all()));
        for crd in &crds {
            let kind = crd.spec.names.kind.as_str();
            if !matches!(kind, "Cluster" | "MachinePool") {
                assert!(all().contains(crd), "{kind} is unchanged");
                continue;
            }
            let version = |name: &str| {
                crd.spec
                    .versions
                    .iter()
                    .find(|v| v.name == name)
                    .cloned()
                    .unwrap()
            };
            let (new, old) = (version("v1beta2"), version("v1beta1"));
            assert_eq!(crd.spec.versions.len(), 2);
            assert!(new.served && new.storage && new.deprecated.is_none());
            assert!(old.served && !old.storage && old.deprecated == Some(true));
            assert_eq!(
                old.deprecation_warning.as_deref(),
                Some(
                    format!(
                        "cluster.x-k8s.io/v1beta1 {kind} is deprecated; use cluster.x-k8s.io/v1beta2 {kind}"
                    )
                    .as_str()
                )
            );
            for v in [&new, &old] {
                let subresources = v.subresources.clone().unwrap();
                assert!(subresources.status.is_some());
                assert_eq!(subresources.scale.is_some(), kind == "MachinePool");
            }
            let schema = serde_json::to_string(&old.schema).unwrap();
            assert!(schema.contains("\"apiVersion\"") && !schema.contains("apiGroup"));
            let conversion = crd.spec.conversion.clone().unwrap();
            assert_eq!(conversion.strategy, "Webhook");
            let webhook = conversion.webhook.unwrap();
            assert_eq!(webhook.conversion_review_versions, ["v1"]);
            let client = webhook.client_config.unwrap();
            assert_eq!(client.url, None);
            assert_eq!(
                client.service,
                Some(ServiceReference {
                    namespace: "capwasm-system".into(),
                    name: "capwasm-webhook".into(),
                    path: Some("/convert".into()),
                    port: Some(9443),
                })
            );
            assert_eq!(
                client.ca_bundle,
                Some(ByteString(b"-----BEGIN CERTIFICATE-----\n".to_vec()))
            );
        }
    }

    #[test]
    fn published_crds_convert_through_the_installed_webhook_service() {
        for crd in published().unwrap() {
            let kind = crd.spec.names.kind.clone();
            let client = crd
                .spec
                .conversion
                .and_then(|c| c.webhook)
                .and_then(|w| w.client_config);
            if matches!(kind.as_str(), "Cluster" | "MachinePool") {
                let service = client.and_then(|c| c.service).unwrap();
                assert_eq!(
                    (service.namespace.as_str(), service.name.as_str()),
                    ("capwasm-system", "capwasm-webhook")
                );
                assert_eq!(service.path.as_deref(), Some(WEBHOOK_PATH));
            } else {
                assert!(client.is_none(), "{kind} converts nothing");
            }
        }
    }

    #[test]
    fn a_webhook_url_without_ca_bundle_uses_the_api_server_roots() {
        let webhook = ConversionWebhook {
            client: WebhookClient::Url("https://capwasm.example:9443/convert".into()),
            ca_bundle: vec![],
        };
        let crd = with_conversion_webhook(Cluster::crd(), &webhook);
        let client = crd
            .spec
            .conversion
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config)
            .unwrap();
        assert_eq!(
            client,
            WebhookClientConfig {
                url: Some("https://capwasm.example:9443/convert".into()),
                service: None,
                ca_bundle: None,
            }
        );
    }

    #[test]
    fn machinepool_crd_has_scale_and_status_subresources() {
        let crd = MachinePool::crd();
        let subresources = crd.spec.versions[0]
            .subresources
            .clone()
            .unwrap_or_default();
        assert!(subresources.status.is_some());
        let scale = subresources.scale.expect("scale subresource");
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        assert_eq!(scale.status_replicas_path, ".status.replicas");
    }
}
