//! A change of template, judged by the new template's provider
//! (`validate`): the controller holds a refused change as a condition and
//! applies nothing (the admission webhook asks the same question,
//! [`crate::platform::change`], and refuses the write itself).

use kube::ResourceExt as _;

use super::spec::hold;
use crate::api::conditions::Desired;
use crate::api::{ConditionType, PlatformCluster, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;
use crate::platform::change::{changing_from, refusal, request};

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
