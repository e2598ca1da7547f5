//! What must hold before anything is composed: the spec's rules, a
//! template that exists and may be used, its provider in service for the
//! platform world, and values its schema accepts (a change of template is
//! judged next, in `change`). Any of them failing holds every write to the
//! cluster's objects: what runs keeps running as it is.

use std::time::Duration;

use kube::ResourceExt as _;

use crate::api::conditions::Desired;
use crate::api::{ClusterTemplate, ConditionType, PlatformCluster, Reason};
use crate::controllers::config::ConfigError;
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::provider::{self, loading};
use crate::controllers::reconciler::Scope;
use crate::platform::documents::{self, document};
use crate::platform::rules::{deprecated, node_groups};
use crate::wasm::World;

/// How soon to look again for a values check that outran its budget.
const VALUES_CHECK_RETRY: Duration = Duration::from_secs(5);

/// Holds the cluster's objects where they are, saying why on `type_`.
pub(super) fn hold(
    scope: &mut Scope<PlatformCluster>,
    type_: ConditionType,
    reason: Reason,
    message: String,
) -> Outcome {
    scope.found.hold = true;
    scope.waits(Desired::fails(type_, reason, message))
}

/// The spec's rules, the template, its provider and the values.
pub(super) async fn template(
    scope: &mut Scope<PlatformCluster>,
    ctx: &Context,
) -> Result<Outcome, Error> {
    let object = scope.object.clone();
    if let Err(why) = node_groups(&object.spec) {
        return Ok(hold(
            scope,
            ConditionType::Composed,
            Reason::InvalidSpec,
            why,
        ));
    }
    let name = &object.spec.template_name;
    let Some(template) = ctx.caches.templates.get(None, name) else {
        let why = format!("spec.templateName: ClusterTemplate {name:?} does not exist");
        return Ok(hold(
            scope,
            ConditionType::TemplateAccepted,
            Reason::TemplateNotFound,
            why,
        ));
    };
    if let Some(why) = deprecated(&object, &template) {
        let reason = Reason::TemplateDeprecated;
        return Ok(hold(scope, ConditionType::TemplateAccepted, reason, why));
    }
    let module = &template.spec.provider;
    if let Some(why) = not_allowed(ctx, &template, &scope.namespace()) {
        let reason = Reason::NamespaceNotAllowed;
        return Ok(hold(scope, ConditionType::TemplateAccepted, reason, why));
    }
    let Some(provider) = ctx.runtime.registry().get(module) else {
        // Served before, not yet by this process (it is starting): the
        // install brings the cluster back, and a cluster at rest says
        // nothing meanwhile rather than "not ready", then "ready".
        let modules = &ctx.caches.modules;
        if modules.get(None, module).is_some_and(|m| loading(&m)) {
            scope.defer_status = true;
        }
        let why = format!(
            "ProviderModule {module:?} of ClusterTemplate {name:?} has no version in service"
        );
        return Ok(hold(
            scope,
            ConditionType::Composed,
            Reason::ProviderNotReady,
            why,
        ));
    };
    if provider.world != World::Platform {
        let why = format!(
            "ProviderModule {module:?} of ClusterTemplate {name:?} implements the {} world, not platform-provider",
            provider.world
        );
        return Ok(hold(
            scope,
            ConditionType::Composed,
            Reason::ProviderWorldMismatch,
            why,
        ));
    }
    let values = documents::values(&template, &object);
    match ctx.schemas.check(&provider, Some(&values)).await {
        Ok(text) => scope.found.values = Some(text),
        Err(ConfigError::TimedOut { .. }) => {
            scope.found.hold = true;
            return Ok(Outcome::RequeueAfter(VALUES_CHECK_RETRY));
        }
        Err(error) => {
            let why = format!("the template's values overlaid with spec.values: {error}");
            return Ok(hold(
                scope,
                ConditionType::Composed,
                Reason::InvalidConfig,
                why,
            ));
        }
    }
    scope
        .found
        .kinds
        .clone_from(&provider.capabilities().allowed_kinds);
    scope.found.documents.cluster = document(&*object);
    scope.found.documents.template = document(&*template);
    scope.found.template = Some(template);
    scope.found.provider = Some(provider);
    Ok(Outcome::Continue)
}

/// Why clusters of `namespace` may not use `template`: the template, or
/// the ProviderModule composing it, does not allow the namespace.
fn not_allowed(ctx: &Context, template: &ClusterTemplate, namespace: &str) -> Option<String> {
    let caches = &ctx.caches;
    let name = template.name_any();
    if !caches.namespace_allowed(template.spec.allowed_namespaces.as_ref(), namespace) {
        return Some(format!(
            "spec.templateName: {}",
            provider::not_allowed("ClusterTemplate", &name, namespace)
        ));
    }
    // A module that does not exist is the next check's to name.
    let module = &template.spec.provider;
    let rule = caches
        .modules
        .get(None, module)?
        .spec
        .allowed_namespaces
        .clone();
    (!caches.namespace_allowed(rule.as_ref(), namespace)).then(|| {
        format!(
            "ClusterTemplate {name:?}: {}",
            provider::not_allowed("ProviderModule", module, namespace)
        )
    })
}
