//! What must hold before anything is composed: the spec's rules, a
//! template that exists and may be used, its provider in service for the
//! platform world, and values its schema accepts (a change of template is
//! judged next, in `change`). Any of them failing holds every write to the
//! cluster's objects: what runs keeps running as it is.

use std::time::Duration;

use kube::ResourceExt as _;

use super::documents::{self, document};
use crate::api::conditions::Desired;
use crate::api::platform::PlatformClusterSpec;
use crate::api::{ClusterTemplate, ConditionType, PlatformCluster, Reason};
use crate::controllers::config::ConfigError;
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::provider::{self, loading};
use crate::controllers::reconciler::Scope;
use crate::wasm::World;
use crate::wasm::composed::dns_label;

/// How soon to look again for a values check that outran its budget.
const VALUES_CHECK_RETRY: Duration = Duration::from_secs(5);

/// Why `template`, which `cluster` names, may not be used: it is
/// deprecated and the cluster does not run it yet (it is new, or changing
/// to it).
pub fn deprecated(cluster: &PlatformCluster, template: &ClusterTemplate) -> Option<String> {
    let name = &cluster.spec.template_name;
    let applied = cluster
        .status
        .as_ref()
        .and_then(|s| s.applied_template.as_ref());
    (template.spec.deprecated && applied != Some(name)).then(|| {
        format!(
            "spec.templateName: ClusterTemplate {name:?} is deprecated: no new cluster, and no cluster changing to it, may use it"
        )
    })
}

/// The first rule of the node groups `spec` breaks, naming the field.
pub fn node_groups(spec: &PlatformClusterSpec) -> Result<(), String> {
    for (i, group) in spec.node_groups.iter().enumerate() {
        let at = format!("spec.nodeGroups[{i}]");
        if !dns_label(&group.name) {
            return Err(format!(
                "{at}.name: {:?} is not a DNS label (lowercase letters, digits and '-')",
                group.name
            ));
        }
        match (group.count, group.min_count, group.max_count) {
            (Some(_), None, None) => {}
            (Some(_), _, _) => {
                return Err(format!(
                    "{at}: set count, or minCount and maxCount, not both"
                ));
            }
            (None, Some(min), Some(max)) if min > max => {
                return Err(format!(
                    "{at}: minCount ({min}) is greater than maxCount ({max})"
                ));
            }
            (None, Some(_), Some(_)) => {}
            (None, _, _) => {
                return Err(format!("{at}: set count, or minCount and maxCount"));
            }
        }
    }
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::platform::NodeGroup;

    fn group(count: Option<u32>, min: Option<u32>, max: Option<u32>) -> NodeGroup {
        NodeGroup {
            name: "workers".into(),
            count,
            min_count: min,
            max_count: max,
            values: None,
        }
    }

    fn check(groups: Vec<NodeGroup>) -> Result<(), String> {
        node_groups(&PlatformClusterSpec {
            node_groups: groups,
            ..PlatformClusterSpec::default()
        })
    }

    #[test]
    fn a_group_has_a_count_or_both_bounds() {
        assert_eq!(check(vec![group(Some(2), None, None)]), Ok(()));
        assert_eq!(check(vec![group(None, Some(1), Some(3))]), Ok(()));
        let both = check(vec![
            group(Some(2), None, None),
            group(Some(2), Some(1), None),
        ]);
        assert_eq!(
            both,
            Err("spec.nodeGroups[1]: set count, or minCount and maxCount, not both".into())
        );
        let inverted = check(vec![group(None, Some(5), Some(2))]);
        assert_eq!(
            inverted,
            Err("spec.nodeGroups[0]: minCount (5) is greater than maxCount (2)".into())
        );
        assert!(check(vec![group(None, Some(1), None)]).is_err());
        assert!(check(vec![group(None, None, None)]).is_err());
    }

    #[test]
    fn a_group_is_named_by_a_dns_label() {
        let mut bad = group(Some(1), None, None);
        bad.name = "Workers".into();
        assert!(check(vec![bad]).is_err_and(|e| e.starts_with("spec.nodeGroups[0].name")));
    }
}
