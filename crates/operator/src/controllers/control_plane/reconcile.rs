//! The WasmControlPlane as the frame reconciles it: its owner Cluster, its
//! provider ready, then the control plane through the provider (endpoint,
//! initialization, counts, version, `Available`); on deletion, the
//! provider's delete until it is done.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt as _;
use serde_json::json;

use super::{CONTROLLER, certificates, initialized};
use crate::api::conditions::Desired;
use crate::api::provider::{
    CONTROL_PLANE_FIELD_MANAGER, CONTROL_PLANE_FINALIZER, ControlPlaneInitialization,
};
use crate::api::{ApiEndpoint, Cluster, ConditionType, Reason, WasmControlPlane, labels};
use crate::controllers::context::Context;
use crate::controllers::error::{Error, Retry};
use crate::controllers::kubeconfig::Kubeconfig;
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::provider::{self, Found, Prepared};
use crate::controllers::reconciler::{Phase, Reconciler, Scope};
use crate::controllers::shard::{Role, Shard};
use crate::phases;
use crate::wasm::control_planes::{ControlPlaneRequest, ControlPlaneState};
use crate::workload::ClusterKey;

impl Reconciler for WasmControlPlane {
    type Found = Found;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = CONTROL_PLANE_FIELD_MANAGER;
    const FINALIZER: Option<&'static str> = Some(CONTROL_PLANE_FINALIZER);
    const SUMMARY: ConditionType = ConditionType::Ready;
    const PHASES: &'static [Phase<Self>] = phases![WasmControlPlane:
        provider::owner_cluster_exists::<WasmControlPlane>,
        provider::prepare::<WasmControlPlane>,
        certificates::ensure,
        run,
    ];
    const DELETE_PHASES: &'static [Phase<Self>] =
        phases![WasmControlPlane: provider::prepare::<WasmControlPlane>, delete];

    fn role(&self, shard: Shard) -> Role {
        shard.role(self)
    }

    /// The owner Cluster, from the cache.
    fn cluster(&self, ctx: &Context) -> Result<Option<Arc<Cluster>>, Error> {
        Ok(provider::owner_cluster(self, ctx))
    }

    fn claimed(&self) -> bool {
        provider::capi_owner(self, "Cluster").is_some()
    }

    fn summarize(scope: &mut Scope<Self>, _: &Context, results: &[Result<Outcome, Error>]) {
        provider::summarize(scope, results);
    }
}

fn request(scope: &Scope<WasmControlPlane>, prepared: &Prepared) -> ControlPlaneRequest {
    let object = &*scope.object;
    let cluster = provider::cluster_info(object, scope.cluster.as_deref(), None).name;
    // Deleting, the names only: the Secrets may be gone with their owner.
    let certificates = scope
        .found
        .certificates
        .clone()
        .unwrap_or_else(|| certificates::named(scope.namespace(), &cluster, String::new()));
    ControlPlaneRequest {
        certificates,
        control_plane: provider::object_ref(object),
        cluster: provider::cluster_info(
            object,
            scope.cluster.as_deref(),
            Some(&object.spec.version),
        ),
        version: object.spec.version.clone(),
        replicas: object.spec.replicas(),
        config: prepared.config.clone(),
        idempotency_key: object.uid().unwrap_or_default(),
        credentials: prepared.credentials.clone(),
    }
}

/// Calls the provider and reports the control plane as it says it is.
async fn run(scope: &mut Scope<WasmControlPlane>, ctx: &Context) -> Result<Outcome, Error> {
    let (Some(cluster), Some(prepared), Some(_)) = (
        scope.cluster.clone(),
        scope.found.prepared.as_ref(),
        scope.found.certificates.as_ref(),
    ) else {
        return Ok(Outcome::Continue);
    };
    let request = request(scope, prepared);
    let served_by = prepared.served_by();
    let object = scope.object.clone();
    let state = ctx
        .runtime
        .reconcile_control_plane(&object.spec.provider, &request)
        .await
        .map_err(Error::Guest)?;

    // The provider's endpoint, unless one was given in spec already.
    let given = object
        .spec
        .control_plane_endpoint
        .as_ref()
        .is_some_and(ApiEndpoint::is_valid);
    if !given && let Some(endpoint) = &state.endpoint {
        let spec = json!({ "spec": { "controlPlaneEndpoint": { "host": endpoint.host, "port": endpoint.port } } });
        scope.apply(ctx, "spec", spec).await?;
    }
    report(scope, &state);
    scope.status.common.served_by = Some(served_by);
    let asked = state
        .requeue_after_seconds
        .map(|s| Duration::from_secs(u64::from(s)));
    if !initialized(scope) {
        let message = state
            .message
            .clone()
            .unwrap_or_else(|| "the provider is bringing the control plane up".to_owned());
        let wait = Wait::on_change(Reason::WaitingForControlPlane, message);
        return Ok(Outcome::Wait(match asked {
            Some(after) => Wait {
                retry: Retry::After(after),
                ..wait
            },
            None => wait,
        }));
    }
    // As KubeadmControlPlane: the control plane's side writes the kubeconfig.
    let key = ClusterKey::new(scope.namespace(), cluster.name_any());
    let kubeconfig = Kubeconfig {
        key: &key,
        endpoint: object
            .spec
            .control_plane_endpoint
            .clone()
            .filter(ApiEndpoint::is_valid)
            .or_else(|| state.endpoint.as_ref().map(api_endpoint)),
        owner: scope.controller_reference(),
        reference: scope.reference(),
        controller: CONTROLLER,
    };
    if !kubeconfig.ensure(ctx).await? {
        return Ok(Outcome::Wait(Wait::on_change(
            Reason::KubeconfigSecretNotFound,
            "waiting for the endpoint and the CA Secret to write the kubeconfig",
        )));
    }
    scope.found.done = Some((Reason::Ready, "control plane initialized".into()));
    Ok(asked.map_or(Outcome::Continue, Outcome::RequeueAfter))
}

fn api_endpoint(endpoint: &crate::wasm::types::ApiEndpoint) -> ApiEndpoint {
    ApiEndpoint {
        host: endpoint.host.clone(),
        port: i32::from(endpoint.port),
    }
}

/// The contract's status from what the provider reported: initialization
/// kept once reached, the counts, the selector of its replicas, and
/// `Available` while a replica serves.
fn report(scope: &mut Scope<WasmControlPlane>, state: &ControlPlaneState) {
    let count = |n: u32| Some(i32::try_from(n).unwrap_or(i32::MAX));
    let cluster = scope
        .object
        .labels()
        .get(labels::CLUSTER_NAME)
        .cloned()
        .or_else(|| scope.cluster.as_ref().map(|c| c.name_any()))
        .unwrap_or_default();
    let was_initialized = initialized(scope);
    let status = &mut scope.status;
    if state.initialized || was_initialized {
        status.initialization = Some(ControlPlaneInitialization {
            control_plane_initialized: Some(true),
        });
    }
    status.replicas = count(state.replicas);
    status.ready_replicas = count(state.ready_replicas);
    status.available_replicas = count(state.available_replicas);
    status.up_to_date_replicas = count(state.up_to_date_replicas);
    status.version.clone_from(&state.version);
    status.external_managed_control_plane = Some(state.externally_managed);
    status.selector = Some(format!(
        "{}={cluster},{}={}",
        labels::CLUSTER_NAME,
        CONTROL_PLANE_NAME_LABEL,
        scope.object.name_any()
    ));
    let available = state.initialized && state.available_replicas > 0;
    let desired = if available {
        Desired::holds(ConditionType::Available, Reason::Available, "")
    } else {
        let message = state
            .message
            .clone()
            .unwrap_or_else(|| "no replica serves the API".to_owned());
        Desired::fails(ConditionType::Available, Reason::NotAvailable, message)
    };
    scope.set(desired);
}

/// The label naming the control plane its replicas belong to (what
/// KubeadmControlPlane's machines carry).
const CONTROL_PLANE_NAME_LABEL: &str = "cluster.x-k8s.io/control-plane-name";

/// Calls the provider's delete until it says the control plane is gone.
async fn delete(scope: &mut Scope<WasmControlPlane>, ctx: &Context) -> Result<Outcome, Error> {
    let Some(prepared) = scope.found.prepared.as_ref() else {
        return Ok(Outcome::Continue);
    };
    let request = request(scope, prepared);
    let outcome = ctx
        .runtime
        .delete_control_plane(&scope.object.spec.provider, &request)
        .await
        .map_err(Error::Guest)?;
    Ok(provider::deletion(outcome, "the control plane"))
}
