//! A change of template, judged by the new template's provider (`validate`):
//! the question it is asked and how a refusal reads, shared by the
//! controller, which holds a refused change as a condition and applies
//! nothing, and the admission webhook, which refuses the write itself.

use kube::ResourceExt as _;

use super::documents::{self, document};
use super::spec::hold;
use crate::api::conditions::Desired;
use crate::api::platform::API_VERSION;
use crate::api::{ClusterTemplate, ConditionType, PlatformCluster, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;
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

/// The controller's phase: a refused change holds every write, and the
/// objects keep the template they run.
pub(super) async fn change(
    scope: &mut Scope<PlatformCluster>,
    ctx: &Context,
) -> Result<Outcome, Error> {
    // Set, with the template and its documents, when everything held.
    let Some(provider) = scope.found.provider.clone() else {
        return Ok(Outcome::Continue);
    };
    let object = scope.object.clone();
    let new = &object.spec.template_name;
    let Some(old) = changing_from(&object) else {
        scope.set(Desired::holds(
            ConditionType::TemplateAccepted,
            Reason::TemplateAccepted,
            format!("ClusterTemplate {new:?}"),
        ));
        return Ok(Outcome::Continue);
    };
    let old_template = ctx.caches.templates.get(None, &old);
    let documents = &scope.found.documents;
    let new_documents = (documents.cluster.clone(), documents.template.clone());
    let request = request(&object, new_documents, (&old, old_template.as_deref()));
    let uid = object.uid().unwrap_or_default();
    let namespace = object.namespace().unwrap_or_default();
    let verdict = ctx
        .runtime
        .validate(provider.name(), &uid, &namespace, &request)
        .await
        .map_err(|e| scope.failed(ConditionType::TemplateAccepted, Error::Guest(e)))?;
    match verdict {
        crate::wasm::composition::Verdict::Allowed => {
            scope.set(Desired::holds(
                ConditionType::TemplateAccepted,
                Reason::TemplateAccepted,
                format!("ClusterTemplate {new:?}, changed from {old:?}"),
            ));
            Ok(Outcome::Continue)
        }
        crate::wasm::composition::Verdict::Refused(why) => {
            let why = refusal(&object, &old, provider.name(), &why);
            let reason = Reason::TemplateChangeRefused;
            Ok(hold(scope, ConditionType::TemplateAccepted, reason, why))
        }
    }
}
