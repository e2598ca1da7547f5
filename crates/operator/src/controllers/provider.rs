//! What the Wasm provider kinds share: their owners from the caches, the
//! phase that gets their provider ready to call (its module, world, config
//! and credentials), and the `Ready` summary of how their phases ended.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt as _};
use serde_json::Value;

use crate::api::conditions::{self, Desired};
use crate::api::provider::{HasProviderStatus, ServedBy};
use crate::api::providermodule::PHASE_READY;
use crate::api::{
    CLUSTER_API_GROUP, Cluster, ConditionType, MachinePool, ProviderModule, Reason,
    WasmBootstrapConfig, WasmCluster, WasmControlPlane, WasmMachinePool,
};
use crate::wasm::types::{self, ProviderError};
use crate::wasm::{CallError, LoadedProvider, World};

use super::config::ConfigError;
use super::context::Context;
use super::credentials;
use super::error::Error;
use super::outcome::{Outcome, Wait};
use super::reconciler::{Reconciler, Scope};

/// How soon to look again for the verdict of a config check that outran its budget.
const CONFIG_CHECK_RETRY: Duration = Duration::from_secs(5);

/// A Wasm provider kind: which module serves it, with what config.
pub trait ProviderObject: Reconciler<Found = Found>
where
    Self::Status: HasProviderStatus,
{
    /// The world its module must implement.
    const WORLD: World;
    /// The ProviderModule serving it.
    fn provider(&self) -> &str;
    /// Its `spec.config`.
    fn config(&self) -> Option<&Value>;
}

macro_rules! provider_object {
    ($($kind:ty => $world:expr),*) => {$(
        impl ProviderObject for $kind {
            const WORLD: World = $world;
            fn provider(&self) -> &str {
                &self.spec.provider
            }
            fn config(&self) -> Option<&Value> {
                self.spec.config.as_ref()
            }
        }
    )*};
}

provider_object!(
    WasmBootstrapConfig => World::Bootstrap,
    WasmMachinePool => World::Infrastructure,
    WasmCluster => World::Infrastructure,
    WasmControlPlane => World::ControlPlane
);

/// What a provider kind's phases find.
#[derive(Default)]
pub struct Found {
    /// The owner MachinePool (owner phase of pool-owned kinds).
    pub pool: Option<Arc<MachinePool>>,
    /// The provider, ready to call (prepare phase).
    pub prepared: Option<Prepared>,
    /// How the work ended, when it did: `Ready` holds with this reason and message.
    pub done: Option<(Reason, String)>,
    /// The cluster's certificates (a control plane's certificates phase).
    pub certificates: Option<crate::wasm::control_planes::ClusterCertificates>,
}

/// A provider ready to be called for one object.
pub struct Prepared {
    /// The version in service.
    pub provider: Arc<LoadedProvider>,
    /// `spec.config` as JSON text, valid against the provider's schema.
    pub config: String,
    /// The entries of the module's credentials Secret.
    pub credentials: Vec<types::Credential>,
}

impl Prepared {
    /// Which code answers.
    pub fn served_by(&self) -> ServedBy {
        ServedBy {
            digest: self.provider.digest.clone(),
            version: self.provider.info.version.clone(),
        }
    }
}

/// The owner of `object` of kind `kind` in the Cluster API group, if any.
pub fn capi_owner<K: Resource>(object: &K, kind: &str) -> Option<OwnerReference> {
    object
        .owner_references()
        .iter()
        .find(|r| r.kind == kind && r.api_version.split('/').next() == Some(CLUSTER_API_GROUP))
        .cloned()
}

/// The Cluster owning `object` (a Cluster-owned provider kind), from the cache.
pub fn owner_cluster<K: Resource>(object: &K, ctx: &Context) -> Option<Arc<Cluster>> {
    capi_owner(object, "Cluster").and_then(|owner| {
        ctx.caches
            .clusters
            .get(object.namespace().as_deref(), &owner.name)
    })
}

/// The owner phase of Cluster-owned kinds: waits for the owner Cluster to
/// exist (the owner reference may name one deleted, or not yet in the cache).
pub async fn owner_cluster_exists<K: ProviderObject>(
    scope: &mut Scope<K>,
    _: &Context,
) -> Result<Outcome, Error>
where
    K::Status: HasProviderStatus,
{
    if scope.cluster.is_some() {
        return Ok(Outcome::Continue);
    }
    let name = capi_owner(&*scope.object, "Cluster")
        .map(|owner| owner.name)
        .unwrap_or_default();
    Ok(Outcome::Wait(Wait::on_change(
        Reason::OwnerNotFound,
        format!("the owner Cluster {name:?} does not exist"),
    )))
}

/// The Cluster of the MachinePool owning `object`, from the caches: none
/// without an owner; an error if the pool names a Cluster that does not
/// exist, unless `object` is being deleted (its owners may be gone).
pub fn cluster_of_pool_owner<K: Resource>(
    object: &K,
    ctx: &Context,
) -> Result<Option<Arc<Cluster>>, Error> {
    let namespace = object.namespace();
    let Some(pool) = capi_owner(object, "MachinePool")
        .and_then(|owner| ctx.caches.pools.get(namespace.as_deref(), &owner.name))
    else {
        return Ok(None);
    };
    let name = &pool.spec.cluster_name;
    match ctx.caches.clusters.get(namespace.as_deref(), name) {
        Some(cluster) => Ok(Some(cluster)),
        None if object.meta().deletion_timestamp.is_some() => Ok(None),
        None => Err(Error::ClusterNotFound(name.clone())),
    }
}

/// The owner phase of pool-owned kinds: the MachinePool owning the object
/// (claimed, so the owner reference is there; the pool may be gone).
pub async fn owner_pool<K: ProviderObject>(
    scope: &mut Scope<K>,
    ctx: &Context,
) -> Result<Outcome, Error>
where
    K::Status: HasProviderStatus,
{
    let name = capi_owner(&*scope.object, "MachinePool")
        .map(|owner| owner.name)
        .unwrap_or_default();
    let Some(pool) = ctx.caches.pools.get(Some(&scope.namespace()), &name) else {
        return Ok(Outcome::Wait(Wait::on_change(
            Reason::OwnerNotFound,
            format!("the owner MachinePool {name:?} does not exist"),
        )));
    };
    scope.found.pool = Some(pool);
    Ok(Outcome::Continue)
}

/// `config` as the text a call hands `provider`, or the wait while its
/// schema does not (or not yet) accept it.
async fn check_config(
    ctx: &Context,
    provider: &LoadedProvider,
    config: Option<&Value>,
) -> Result<String, Outcome> {
    ctx.schemas
        .check(provider, config)
        .await
        .map_err(|error| match error {
            late @ ConfigError::TimedOut { .. } => Outcome::Wait(Wait::after(
                Reason::ConfigCheckTimedOut,
                late.to_string(),
                CONFIG_CHECK_RETRY,
            )),
            invalid => wait(Reason::InvalidConfig, invalid.to_string()),
        })
}

/// `value`, what `provider`'s `export` returned as it would stand in a
/// status (`what`: `instances`), within the status bound; otherwise the
/// result is `InvalidProviderResult` and the status keeps what it had.
pub fn within_status_bound<S: serde::Serialize + ?Sized>(
    ctx: &Context,
    provider: &LoadedProvider,
    export: &'static str,
    what: &str,
    value: &S,
) -> Result<(), Error> {
    let Some(size) = crate::api::status::oversized(value) else {
        return Ok(());
    };
    let violation = crate::wasm::checks::Violation {
        rule: "a result whose status would be over 512 KiB",
        field: format!("{what} ({size} bytes as JSON)"),
    };
    Err(Error::Guest(
        ctx.runtime.refused(provider, export, violation),
    ))
}

/// Why a cluster-scoped `kind` `name` may not be used from `namespace`.
pub fn not_allowed(kind: &str, name: &str, namespace: &str) -> String {
    format!(
        "{kind} {name:?} does not allow namespace {namespace:?} (its spec.allowedNamespaces): nothing is called for objects of this namespace"
    )
}

/// The prepare phase: the object's ProviderModule must exist, implement
/// the kind's world, allow the object's namespace, have a version in
/// service and accept the config, and its credentials Secret must be
/// readable. What is missing is a wait.
pub async fn prepare<K: ProviderObject>(
    scope: &mut Scope<K>,
    ctx: &Context,
) -> Result<Outcome, Error>
where
    K::Status: HasProviderStatus,
{
    if scope.found.done.is_some() {
        return Ok(Outcome::Continue);
    }
    let name = scope.object.provider().to_owned();
    let Some(module) = ctx.caches.modules.get(None, &name) else {
        return Ok(wait(
            Reason::ProviderNotFound,
            format!("ProviderModule {name:?} does not exist"),
        ));
    };
    if module.spec.world != K::WORLD {
        return Ok(wait(
            Reason::ProviderWorldMismatch,
            format!(
                "ProviderModule {name:?} implements the {} world; this kind needs {}",
                module.spec.world,
                K::WORLD
            ),
        ));
    }
    let namespace = scope.namespace();
    if !ctx
        .caches
        .namespace_allowed(module.spec.allowed_namespaces.as_ref(), &namespace)
    {
        return Ok(wait(
            Reason::NamespaceNotAllowed,
            not_allowed("ProviderModule", &name, &namespace),
        ));
    }
    // The version that will serve this object: a canary's share goes to it.
    let uid = scope.object.meta().uid.clone().unwrap_or_default();
    let Some((provider, _)) = ctx.runtime.registry().pick(&name, &uid) else {
        if loading(&module) {
            // Served before, not yet by this process (it is starting, say):
            // its install brings the object back, and an object at rest
            // says nothing meanwhile rather than "not ready", then "ready".
            scope.defer_status = true;
            return Ok(wait(
                Reason::ProviderNotReady,
                format!("ProviderModule {name:?} is being put in service"),
            ));
        }
        let why = module
            .status
            .as_ref()
            .and_then(|s| s.message.clone())
            .unwrap_or_else(|| "not loaded yet".into());
        return Ok(wait(
            Reason::ProviderNotReady,
            format!("ProviderModule {name:?} has no version in service: {why}"),
        ));
    };
    let config = match check_config(ctx, &provider, scope.object.config()).await {
        Ok(text) => text,
        Err(refused) => return Ok(refused),
    };
    let credentials = match credentials::read(ctx, &name, &module.spec).await? {
        Ok(credentials) => credentials,
        Err(wait) => return Ok(Outcome::Wait(wait)),
    };
    scope.found.prepared = Some(Prepared {
        provider,
        config,
        credentials,
    });
    Ok(Outcome::Continue)
}

/// Whether `module` says a version of it is in service for its current
/// spec: then a process that has none yet is loading it.
pub(crate) fn loading(module: &ProviderModule) -> bool {
    module.status.as_ref().is_some_and(|s| {
        s.phase.as_deref() == Some(PHASE_READY)
            && s.active_digest.is_some()
            && s.observed_generation == module.metadata.generation
    })
}

fn wait(reason: Reason, message: String) -> Outcome {
    Outcome::Wait(Wait::on_change(reason, message))
}

/// The call's view of an object.
pub fn object_ref<K: Resource>(object: &K) -> types::ObjectRef {
    types::ObjectRef {
        namespace: object.namespace().unwrap_or_default(),
        name: object.name_any(),
        uid: object.uid().unwrap_or_default(),
    }
}

/// The call's view of a Cluster: the one given, else what the object's
/// cluster-name label says (while deleting, the Cluster may be gone).
pub fn cluster_info<K: Resource>(
    object: &K,
    cluster: Option<&Cluster>,
    kubernetes_version: Option<&str>,
) -> types::ClusterInfo {
    let Some(cluster) = cluster else {
        return types::ClusterInfo {
            name: object
                .labels()
                .get(crate::api::labels::CLUSTER_NAME)
                .cloned()
                .unwrap_or_default(),
            namespace: object.namespace().unwrap_or_default(),
            control_plane_endpoint: None,
            kubernetes_version: None,
        };
    };
    types::ClusterInfo {
        name: cluster.name_any(),
        namespace: cluster.namespace().unwrap_or_default(),
        control_plane_endpoint: cluster.endpoint().and_then(|e| {
            u16::try_from(e.port).ok().map(|port| types::ApiEndpoint {
                host: e.host.clone(),
                port,
            })
        }),
        kubernetes_version: kubernetes_version.map(str::to_owned),
    }
}

/// `Ready` from how the phases ended: the first error, else the first
/// wait, else what the work ended in; a terminal provider error also fills
/// the failure fields, which success clears.
pub fn summarize<K: ProviderObject>(scope: &mut Scope<K>, results: &[Result<Outcome, Error>])
where
    K::Status: HasProviderStatus,
{
    let error = results.iter().find_map(|r| r.as_ref().err());
    let waiting = results.iter().find_map(|r| match r {
        Ok(Outcome::Wait(wait)) => Some(wait),
        _ => None,
    });
    let ready = match (error, waiting, scope.found.done.clone()) {
        // A ready object whose provider asks to be called again later (its
        // cloud is busy, say) stays ready: it is called again when asked,
        // and a condition flipping twice would say nothing that lasts.
        (
            Some(Error::Guest(CallError::Provider {
                error: ProviderError::RetryAfter(_),
                ..
            })),
            _,
            _,
        ) if conditions::is_true(&scope.status.common_ref().conditions, ConditionType::Ready) => {
            return;
        }
        (Some(error), _, _) => {
            if let Error::Guest(CallError::Provider {
                error: ProviderError::Terminal(terminal),
                ..
            }) = error
            {
                let common = scope.status.common();
                common.failure_reason = Some(failure_reason(&terminal.reason));
                common.failure_message = Some(terminal.message.clone());
            }
            Desired::fails(
                ConditionType::Ready,
                error.reason(),
                crate::report::error_chain(error),
            )
        }
        (None, Some(wait), _) => {
            Desired::fails(ConditionType::Ready, wait.reason, wait.message.clone())
        }
        (None, None, Some((reason, message))) => {
            let common = scope.status.common();
            common.failure_reason = None;
            common.failure_message = None;
            Desired::holds(ConditionType::Ready, reason, message)
        }
        (None, None, None) => return,
    };
    scope.set(ready);
}

/// A provider's terminal reason as a CamelCase token (it is guest input).
fn failure_reason(reason: &str) -> String {
    let token: String = reason
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(64)
        .collect();
    if token.is_empty() {
        "ProviderFailed".into()
    } else {
        token
    }
}

/// How a provider's delete call ended: done, or in progress (look again
/// when the provider says).
pub fn deletion(outcome: types::DeleteOutcome, what: &str) -> Outcome {
    match outcome {
        types::DeleteOutcome::Done => Outcome::Continue,
        types::DeleteOutcome::InProgress(seconds) => Outcome::Wait(Wait::after(
            Reason::WaitingForProviderDeletion,
            format!("the provider is removing {what}"),
            Duration::from_secs(u64::from(seconds.max(1))),
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::wasm::types::RetryAfterError;

    /// A pool whose Ready condition has `status`.
    fn pool(status: &str) -> Arc<WasmMachinePool> {
        let pool = json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
            "kind": "WasmMachinePool",
            "metadata": { "name": "p", "namespace": "ns", "generation": 1 },
            "spec": { "provider": "sim" },
            "status": { "conditions": [{
                "type": "Ready", "status": status, "reason": "Ready", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }] },
        });
        Arc::new(serde_json::from_value(pool).unwrap_or_else(|e| panic!("a pool: {e}")))
    }

    fn retry_after() -> Result<Outcome, Error> {
        Err(Error::Guest(CallError::Provider {
            provider: "sim".into(),
            digest: "sha256:00".into(),
            export: "machine-pools.reconcile",
            error: ProviderError::RetryAfter(RetryAfterError {
                seconds: 15,
                message: "the cloud is busy".into(),
            }),
        }))
    }

    fn ready(scope: &Scope<WasmMachinePool>) -> (String, String) {
        let conditions = &scope.status.common_ref().conditions;
        let ready = conditions.iter().find(|c| c.type_ == "Ready");
        ready.map_or_else(Default::default, |c| (c.status.clone(), c.reason.clone()))
    }

    #[test]
    fn a_ready_object_asked_to_retry_later_stays_ready() {
        let mut scope = Scope::new(pool("True"), None);
        summarize(&mut scope, &[retry_after()]);
        assert_eq!(ready(&scope), ("True".into(), "Ready".into()));
    }

    #[test]
    fn an_object_not_ready_yet_says_its_provider_asked_to_retry() {
        let mut scope = Scope::new(pool("False"), None);
        summarize(&mut scope, &[retry_after()]);
        assert_eq!(ready(&scope), ("False".into(), "ProviderRetrying".into()));
    }

    #[test]
    fn a_terminal_reason_becomes_a_bounded_camel_case_token() {
        assert_eq!(failure_reason("Quota Exceeded!"), "QuotaExceeded");
        assert_eq!(failure_reason("\u{1b}[31m"), "31m");
        assert_eq!(failure_reason("..."), "ProviderFailed");
        assert_eq!(failure_reason(&"x".repeat(100)).len(), 64);
    }
}
