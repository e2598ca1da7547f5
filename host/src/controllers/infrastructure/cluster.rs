//! Provisioning a WasmCluster's shared infrastructure through an
//! infrastructure-provider component: endpoint, failure domains, readiness;
//! on deletion, the provider's delete until it is done.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::{Api, Resource as _, ResourceExt as _};
use serde_json::json;

use super::{CONTROLLER_CLUSTER as CONTROLLER, guest_io};
use crate::api::provider::{
    CLUSTER_FINALIZER, INFRASTRUCTURE_FIELD_MANAGER, InfrastructureInitialization,
    WasmClusterStatus,
};
use crate::api::providermodule::ProviderWorld;
use crate::api::{ApiEndpoint, Cluster, Reason, WasmCluster, labels};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Wait;
use crate::controllers::provider::{self, Step};
use crate::controllers::write;
use crate::wasm::clusters::ClusterRequest;
use crate::wasm::types::ClusterInfo;

pub async fn reconcile(object: Arc<WasmCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile(CONTROLLER);
    let before = object.status.clone().unwrap_or_default();
    let mut status = before.clone();
    let result = if object.meta().deletion_timestamp.is_some() {
        delete(&object, &ctx).await
    } else {
        provision(&object, &ctx, &mut status).await
    };
    let finalizer = Some(CLUSTER_FINALIZER);
    provider::conclude(
        &ctx,
        CONTROLLER,
        INFRASTRUCTURE_FIELD_MANAGER,
        &*object,
        finalizer,
        &before,
        status,
        result,
    )
    .await
}

#[allow(clippy::needless_pass_by_value)] // kube-runtime's error_policy signature
pub fn error_policy(object: Arc<WasmCluster>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.error_action(CONTROLLER, &object.uid().unwrap_or_default(), error)
}

/// The owner Cluster, or what is missing.
async fn owner(object: &WasmCluster, ctx: &Context) -> Result<Result<Cluster, Wait>, Error> {
    let Some(owner) = provider::capi_owner(object, "Cluster") else {
        return Ok(Err(Wait::on_change(
            Reason::WaitingForOwner,
            "waiting for a Cluster to reference this object",
        )));
    };
    let clusters: Api<Cluster> =
        Api::namespaced(ctx.client.clone(), &object.namespace().unwrap_or_default());
    match clusters.get_opt(&owner.name).await {
        Ok(Some(cluster)) => Ok(Ok(cluster)),
        Ok(None) => Ok(Err(Wait::on_change(
            Reason::OwnerNotFound,
            format!("the owner Cluster {:?} does not exist", owner.name),
        ))),
        Err(source) => Err(Error::Get {
            kind: "Cluster",
            name: owner.name,
            source,
        }),
    }
}

fn request(
    object: &WasmCluster,
    cluster: ClusterInfo,
    prepared: &provider::Prepared,
) -> ClusterRequest {
    ClusterRequest {
        cluster_object: provider::object_ref(object),
        cluster,
        config: prepared.config.clone(),
        idempotency_key: object.uid().unwrap_or_default(),
        credentials: prepared.credentials.clone(),
    }
}

async fn provision(
    object: &WasmCluster,
    ctx: &Context,
    status: &mut WasmClusterStatus,
) -> Result<(Step, Option<Duration>), Error> {
    let cluster = match owner(object, ctx).await? {
        Ok(cluster) => cluster,
        Err(wait) => return Ok((Step::Wait(wait), None)),
    };
    if let Some(why) = crate::controllers::paused::why(object, &cluster) {
        return Ok((Step::Paused(why), None));
    }
    if !object.finalizers().iter().any(|f| f == CLUSTER_FINALIZER) {
        write::fields(
            ctx,
            CONTROLLER,
            INFRASTRUCTURE_FIELD_MANAGER,
            object,
            "metadata",
            json!({ "metadata": { "finalizers": [CLUSTER_FINALIZER] } }),
        )
        .await?;
    }
    let prepared = match provider::prepare(
        ctx,
        &object.spec.provider,
        ProviderWorld::Infrastructure,
        object.spec.config.as_ref(),
    )
    .await?
    {
        Ok(prepared) => prepared,
        Err(wait) => return Ok((Step::Wait(wait), None)),
    };
    let request = request(object, provider::cluster_info(&cluster, None), &prepared);
    let module = object.spec.provider.clone();
    let state = ctx
        .runtime
        .blocking(move |runtime| runtime.reconcile_cluster(&module, &request))
        .await
        .map_err(Error::Guest)?;

    // The provider's endpoint, unless one was given in spec already.
    let given = object
        .spec
        .control_plane_endpoint
        .as_ref()
        .is_some_and(ApiEndpoint::is_valid);
    if !given && let Some(endpoint) = &state.control_plane_endpoint {
        write::fields(
            ctx,
            CONTROLLER,
            INFRASTRUCTURE_FIELD_MANAGER,
            object,
            "spec",
            json!({ "spec": { "controlPlaneEndpoint": { "host": endpoint.host, "port": endpoint.port } } }),
        )
        .await?;
    }
    let provisioned = status.ready || state.ready;
    status.ready = provisioned;
    status.initialization = provisioned.then_some(InfrastructureInitialization {
        provisioned: Some(true),
    });
    status.failure_domains = guest_io::failure_domains(&state.failure_domains);
    status.common.served_by = Some(prepared.served_by());
    let requeue = state
        .requeue_after_seconds
        .map(|s| Duration::from_secs(u64::from(s)));
    let step = if state.ready {
        Step::Done(Reason::Ready, "cluster infrastructure provisioned".into())
    } else {
        Step::Wait(Wait::on_change(
            Reason::WaitingForInfrastructure,
            "the provider is provisioning the cluster infrastructure",
        ))
    };
    Ok((step, requeue))
}

async fn delete(object: &WasmCluster, ctx: &Context) -> Result<(Step, Option<Duration>), Error> {
    if !object.finalizers().iter().any(|f| f == CLUSTER_FINALIZER) {
        return Ok((Step::Done(Reason::DeletionCompleted, String::new()), None));
    }
    let prepared = match provider::prepare(
        ctx,
        &object.spec.provider,
        ProviderWorld::Infrastructure,
        object.spec.config.as_ref(),
    )
    .await?
    {
        Ok(prepared) => prepared,
        Err(wait) => return Ok((Step::Wait(wait), None)),
    };
    let cluster = match owner(object, ctx).await {
        Ok(Ok(cluster)) => provider::cluster_info(&cluster, None),
        _ => ClusterInfo {
            name: object
                .labels()
                .get(labels::CLUSTER_NAME)
                .cloned()
                .unwrap_or_default(),
            namespace: object.namespace().unwrap_or_default(),
            control_plane_endpoint: None,
            kubernetes_version: None,
        },
    };
    let request = request(object, cluster, &prepared);
    let module = object.spec.provider.clone();
    let outcome = ctx
        .runtime
        .blocking(move |runtime| runtime.delete_cluster(&module, &request))
        .await
        .map_err(Error::Guest)?;
    Ok(provider::deletion(outcome, "the cluster infrastructure"))
}
