//! Running a WasmMachinePool's instances through an infrastructure-provider
//! component: desired replicas and bootstrap data in, instances, providerIDs
//! and readiness out; on deletion, the provider's delete until it is done.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Action;
use kube::{Api, Resource as _, ResourceExt as _};
use serde_json::json;

use super::{CONTROLLER, guest_io};
use crate::api::provider::{
    INFRASTRUCTURE_FIELD_MANAGER, InfrastructureInitialization, MACHINE_POOL_FINALIZER,
    WasmMachinePoolStatus,
};
use crate::api::providermodule::ProviderWorld;
use crate::api::{MachinePool, Reason, WasmMachinePool, labels};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Wait;
use crate::controllers::provider::{self, Prepared, Step};
use crate::controllers::write;
use crate::wasm::machine_pools::{DeleteRequest, ReconcileRequest};
use crate::wasm::types::{BootstrapData, BootstrapFormat, ClusterInfo};

/// How soon to look again at a pool whose instances are not all running,
/// when the provider does not say (the host cannot watch a cloud).
const POLL_NOT_READY: Duration = Duration::from_secs(10);

pub async fn reconcile(pool: Arc<WasmMachinePool>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile(CONTROLLER);
    let before = pool.status.clone().unwrap_or_default();
    let mut status = before.clone();
    let result = if pool.meta().deletion_timestamp.is_some() {
        delete(&pool, &ctx, &status).await
    } else {
        provision(&pool, &ctx, &mut status).await
    };
    let finalizer = Some(MACHINE_POOL_FINALIZER);
    provider::conclude(
        &ctx,
        CONTROLLER,
        INFRASTRUCTURE_FIELD_MANAGER,
        &*pool,
        finalizer,
        &before,
        status,
        result,
    )
    .await
}

#[allow(clippy::needless_pass_by_value)] // kube-runtime's error_policy signature
pub fn error_policy(pool: Arc<WasmMachinePool>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.error_action(CONTROLLER, &pool.uid().unwrap_or_default(), error)
}

async fn provision(
    pool: &WasmMachinePool,
    ctx: &Context,
    status: &mut WasmMachinePoolStatus,
) -> Result<(Step, Option<Duration>), Error> {
    let (machine_pool, cluster) = match provider::pool_owner(pool, ctx).await? {
        Ok(found) => found,
        Err(wait) => return Ok((Step::Wait(wait), None)),
    };
    if let Some(why) = crate::controllers::paused::why(pool, &cluster) {
        return Ok((Step::Paused(why), None));
    }
    ensure_finalizer(pool, ctx).await?;
    let prepared = match provider::prepare(
        ctx,
        &pool.spec.provider,
        ProviderWorld::Infrastructure,
        pool.spec.config.as_ref(),
    )
    .await?
    {
        Ok(prepared) => prepared,
        Err(wait) => return Ok((Step::Wait(wait), None)),
    };
    let replicas = u32::try_from(machine_pool.desired_replicas()).unwrap_or(0);
    let bootstrap_data = bootstrap_data(ctx, &machine_pool).await?;
    if bootstrap_data.is_none() && replicas > 0 {
        return Ok((
            Step::Wait(Wait::on_change(
                Reason::WaitingForBootstrapData,
                format!(
                    "MachinePool {:?} has no bootstrap data Secret yet",
                    machine_pool.name_any()
                ),
            )),
            None,
        ));
    }
    let request = ReconcileRequest {
        pool: provider::object_ref(pool),
        cluster: provider::cluster_info(
            &cluster,
            machine_pool.spec.template.spec.version.as_deref(),
        ),
        config: prepared.config.clone(),
        replicas,
        bootstrap_data,
        instances: guest_io::to_instances(&status.instances),
        idempotency_key: pool.uid().unwrap_or_default(),
        credentials: prepared.credentials.clone(),
    };
    let module = pool.spec.provider.clone();
    let state = ctx
        .runtime
        .blocking(move |runtime| runtime.reconcile_pool(&module, &request))
        .await
        .map_err(Error::Guest)?;

    let instances = guest_io::from_instances(&state.instances);
    let provider_ids = guest_io::provider_id_list(&instances);
    // The list goes first: a MachinePool that sees the pool ready copies it.
    if provider_ids != pool.spec.provider_id_list {
        write::fields(
            ctx,
            CONTROLLER,
            INFRASTRUCTURE_FIELD_MANAGER,
            pool,
            "spec",
            json!({ "spec": { "providerIDList": provider_ids } }),
        )
        .await?;
    }
    let provisioned = status.ready || state.ready;
    status.replicas = Some(i32::try_from(provider_ids.len()).unwrap_or(i32::MAX));
    status.instances = instances;
    // Once provisioned, the pool stays ready while it scales: its machines'
    // readiness shows in their Nodes, as with upstream providers.
    status.ready = provisioned;
    status.initialization = provisioned.then_some(InfrastructureInitialization {
        provisioned: Some(true),
    });
    status.common.served_by = Some(prepared.served_by());
    let requeue = state
        .requeue_after_seconds
        .map(|s| Duration::from_secs(u64::from(s)))
        .or((!state.ready).then_some(POLL_NOT_READY));
    let step = if state.ready {
        Step::Done(
            Reason::Ready,
            format!("{} of {replicas} instances running", running(status)),
        )
    } else {
        Step::Wait(Wait::on_change(
            Reason::WaitingForInstances,
            format!("{} of {replicas} instances running", running(status)),
        ))
    };
    Ok((step, requeue))
}

fn running(status: &WasmMachinePoolStatus) -> usize {
    status
        .instances
        .iter()
        .filter(|i| i.state == crate::api::provider::InstanceState::Running)
        .count()
}

async fn delete(
    pool: &WasmMachinePool,
    ctx: &Context,
    status: &WasmMachinePoolStatus,
) -> Result<(Step, Option<Duration>), Error> {
    if !pool
        .finalizers()
        .iter()
        .any(|f| f == MACHINE_POOL_FINALIZER)
    {
        return Ok((Step::Done(Reason::DeletionCompleted, String::new()), None));
    }
    let prepared: Prepared = match provider::prepare(
        ctx,
        &pool.spec.provider,
        ProviderWorld::Infrastructure,
        pool.spec.config.as_ref(),
    )
    .await?
    {
        Ok(prepared) => prepared,
        Err(wait) => return Ok((Step::Wait(wait), None)),
    };
    let cluster = match provider::pool_owner(pool, ctx).await {
        Ok(Ok((machine_pool, cluster))) => {
            provider::cluster_info(&cluster, machine_pool.spec.template.spec.version.as_deref())
        }
        // The owners may be gone already; the provider still gets what is known.
        _ => ClusterInfo {
            name: pool
                .labels()
                .get(labels::CLUSTER_NAME)
                .cloned()
                .unwrap_or_default(),
            namespace: pool.namespace().unwrap_or_default(),
            control_plane_endpoint: None,
            kubernetes_version: None,
        },
    };
    let request = DeleteRequest {
        pool: provider::object_ref(pool),
        cluster,
        config: prepared.config.clone(),
        instances: guest_io::to_instances(&status.instances),
        idempotency_key: pool.uid().unwrap_or_default(),
        credentials: prepared.credentials.clone(),
    };
    let module = pool.spec.provider.clone();
    let outcome = ctx
        .runtime
        .blocking(move |runtime| runtime.delete_pool(&module, &request))
        .await
        .map_err(Error::Guest)?;
    Ok(provider::deletion(outcome, "the pool's instances"))
}

/// Adds the finalizer (one server-side apply) before anything is provisioned.
pub async fn ensure_finalizer(pool: &WasmMachinePool, ctx: &Context) -> Result<(), Error> {
    if pool
        .finalizers()
        .iter()
        .any(|f| f == MACHINE_POOL_FINALIZER)
    {
        return Ok(());
    }
    write::fields(
        ctx,
        CONTROLLER,
        INFRASTRUCTURE_FIELD_MANAGER,
        pool,
        "metadata",
        json!({ "metadata": { "finalizers": [MACHINE_POOL_FINALIZER] } }),
    )
    .await
}

/// The pool's bootstrap data, from the Secret its MachinePool names.
async fn bootstrap_data(
    ctx: &Context,
    machine_pool: &MachinePool,
) -> Result<Option<BootstrapData>, Error> {
    let Some(name) = machine_pool
        .spec
        .template
        .spec
        .bootstrap
        .data_secret_name
        .as_deref()
    else {
        return Ok(None);
    };
    let secrets: Api<Secret> = Api::namespaced(
        ctx.client.clone(),
        &machine_pool.namespace().unwrap_or_default(),
    );
    let secret = secrets.get_opt(name).await.map_err(|source| Error::Get {
        kind: "Secret",
        name: name.to_owned(),
        source,
    })?;
    let Some(mut data) = secret.and_then(|s| s.data) else {
        return Ok(None);
    };
    let Some(value) = data.remove("value") else {
        return Ok(None);
    };
    let format = match data.get("format").map(|f| f.0.as_slice()) {
        Some(b"ignition") => BootstrapFormat::Ignition,
        Some(b"shell-script") => BootstrapFormat::ShellScript,
        _ => BootstrapFormat::CloudConfig,
    };
    Ok(Some(BootstrapData {
        format,
        value: value.0,
    }))
}
