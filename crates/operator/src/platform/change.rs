//! A change of template, put to the new template's provider (`validate`):
//! the question it is asked and how a refusal reads, the same for the
//! controller and the admission webhook.

use super::documents::{self, document};
use crate::api::platform::API_VERSION;
use crate::api::{ClusterTemplate, PlatformCluster};
use crate::wasm::composition::ValidateRequest;

/// The template `cluster` runs, when its spec names another one.
pub fn changing_from(cluster: &PlatformCluster) -> Option<String> {
    let applied = cluster.status.as_ref()?.applied_template.as_ref()?;
    (*applied != cluster.spec.template_name).then(|| applied.clone())
}

/// What `validate` is asked when `cluster` (`new`: it and the template its
/// spec names, as documents) changes from the template it runs (`old`, if
/// that still exists).
pub fn request(
    cluster: &PlatformCluster,
    new: (String, String),
    (old_name, old): (&str, Option<&ClusterTemplate>),
) -> ValidateRequest {
    let old_template = old.map_or_else(
        || {
            serde_json::json!({
                "apiVersion": API_VERSION,
                "kind": "ClusterTemplate",
                "metadata": {"name": old_name},
            })
            .to_string()
        },
        document,
    );
    ValidateRequest {
        old: document(&documents::as_running(cluster)),
        new: new.0,
        old_template,
        new_template: new.1,
    }
}

/// How `provider`'s refusal of a change from `old` reads.
pub fn refusal(cluster: &PlatformCluster, old: &str, provider: &str, why: &str) -> String {
    let new = &cluster.spec.template_name;
    format!(
        "spec.templateName: changing from {old:?} to {new:?} is refused by provider {provider:?}: {why}; the cluster keeps running {old:?}"
    )
}
