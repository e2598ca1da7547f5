//! The WasmMachinePool as the frame reconciles it: its owner MachinePool,
//! then its instances through an infrastructure-provider component (desired
//! replicas and bootstrap data in; instances, providerIDs and readiness
//! out); on deletion, the provider's delete until it is done.

mod capacity;
mod data;
mod pass;
mod provider_ids;

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt as _;
use serde_json::json;

use super::{CONTROLLER, guest_io, machines, rollout};
use crate::api::provider::{
    INFRASTRUCTURE_FIELD_MANAGER, InfrastructureInitialization, InstanceStatus,
    MACHINE_POOL_FINALIZER,
};
use crate::api::{Cluster, ConditionType, Reason, WasmMachinePool};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::provider::{self, Found};
use crate::controllers::reconciler::{Phase, Reconciler, Scope};
use crate::controllers::shard::{Role, Shard};
use crate::phases;
use crate::wasm::machine_pools::{DeleteRequest, ReconcileRequest};
use crate::wasm::types::DeleteOutcome;
use data::{bootstrap_data, waiting_for_data};
use pass::{Pass, rolling_out};
use provider_ids::{EXPORT, check_provider_ids};

/// How soon to look again at a pool whose instances are not all running,
/// when the provider does not say (the host cannot watch a cloud).
const POLL_NOT_READY: Duration = Duration::from_secs(10);

impl Reconciler for WasmMachinePool {
    type Found = Found;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = INFRASTRUCTURE_FIELD_MANAGER;
    const FINALIZER: Option<&'static str> = Some(MACHINE_POOL_FINALIZER);
    const SUMMARY: ConditionType = ConditionType::Ready;
    const PHASES: &'static [Phase<Self>] = phases![WasmMachinePool:
        provider::owner_pool::<WasmMachinePool>,
        provider::prepare::<WasmMachinePool>,
        capacity::capacity,
        provision,
    ];
    const DELETE_PHASES: &'static [Phase<Self>] =
        phases![WasmMachinePool: provider::prepare::<WasmMachinePool>, delete];

    fn role(&self, shard: Shard) -> Role {
        shard.role(self)
    }

    fn cluster(&self, ctx: &Context) -> Result<Option<Arc<Cluster>>, Error> {
        provider::cluster_of_pool_owner(self, ctx)
    }

    fn claimed(&self) -> bool {
        provider::capi_owner(self, "MachinePool").is_some()
    }

    fn summarize(scope: &mut Scope<Self>, _: &Context, results: &[Result<Outcome, Error>]) {
        provider::summarize(scope, results);
    }
}

/// Calls the provider with the desired replicas and the bootstrap data,
/// and records the instances it reports.
async fn provision(scope: &mut Scope<WasmMachinePool>, ctx: &Context) -> Result<Outcome, Error> {
    let (Some(machine_pool), Some(prepared)) =
        (scope.found.pool.clone(), scope.found.prepared.as_ref())
    else {
        return Ok(Outcome::Continue);
    };
    let replicas = u32::try_from(machine_pool.desired_replicas()).unwrap_or(0);
    let bootstrap_data = bootstrap_data(ctx, &machine_pool).await?;
    let had = scope.status.instances.len();
    if let Some(wait) =
        waiting_for_data(ctx, &machine_pool, replicas, had, bootstrap_data.is_some()).await?
    {
        return Ok(wait);
    }
    let pool = scope.object.clone();
    let cluster = provider::cluster_info(
        &*pool,
        scope.cluster.as_deref(),
        machine_pool.spec.template.spec.version.as_deref(),
    );
    let mut pass = Pass::new(scope, ctx, prepared, &machine_pool, &cluster).await?;
    pass.plan(ctx, &pool, replicas).await?;
    let request = ReconcileRequest {
        pool: provider::object_ref(&*pool),
        cluster,
        config: prepared.config.clone(),
        replicas: pass.plan.asked,
        bootstrap_data,
        instances: guest_io::to_instances(&pass.recorded),
        idempotency_key: pool.uid().unwrap_or_default(),
        credentials: prepared.credentials.clone(),
    };
    let served_by = prepared.served_by();
    let state = ctx
        .runtime
        .reconcile_pool(&pool.spec.provider, &request)
        .await
        .map_err(Error::Guest)?;

    let mut instances = guest_io::from_instances(&state.instances);
    rollout::stamp(&mut instances, &pass.recorded, &pass.revision);
    provider::within_status_bound(ctx, &prepared.provider, EXPORT, "instances", &instances)?;
    let provider_ids = guest_io::provider_id_list(&instances);
    check_provider_ids(ctx, &pool, &machine_pool, &prepared.provider, &provider_ids).await?;
    // The list goes first: a MachinePool that sees the pool ready copies it.
    if provider_ids != pool.spec.provider_id_list {
        let spec = json!({ "spec": { "providerIDList": provider_ids } });
        scope.apply(ctx, "spec", spec).await?;
    }
    let status = &mut scope.status;
    // Once provisioned, the pool stays ready while it scales: its machines'
    // readiness shows in their Nodes, as with upstream providers.
    let provisioned = status.ready || state.ready;
    status.replicas = Some(i32::try_from(provider_ids.len()).unwrap_or(i32::MAX));
    // While the pool waits, instances moving from one state to the next are
    // not worth a write each (the provider reports them afresh every call);
    // a new or gone instance is, and so is the pool becoming ready.
    if provisioned || !same_instances(&status.instances, &instances) {
        status.instances = instances;
    }
    status.ready = provisioned;
    status.initialization = provisioned.then_some(InfrastructureInitialization {
        provisioned: Some(true),
    });
    status.common.served_by = Some(served_by);
    status.infrastructure_machine_kind = pass.one_by_one.then(|| machines::KIND.to_owned());
    let up_to_date = status
        .instances
        .iter()
        .filter(|i| machines::up(i) && rollout::up_to_date(i, &pass.revision))
        .count();
    status.up_to_date_replicas = Some(i32::try_from(up_to_date).unwrap_or(i32::MAX));
    if pass.one_by_one {
        let (instances, revision) = (&status.instances, &pass.revision);
        let machines = &pass.machines;
        machines::sync(
            ctx,
            &pool,
            &machine_pool,
            &mut pass.core,
            machines,
            instances,
            revision,
        )
        .await?;
        machines::scale_down(ctx, &mut pass.core, &pool, machines, instances, &pass.plan).await?;
    }
    rolling_out(scope, pass.one_by_one, &pass.plan);
    let asked = state
        .requeue_after_seconds
        .map(|s| Duration::from_secs(u64::from(s)));
    // The count of running instances is in `status.instances`; a message
    // with it would change with every instance, and with it the condition
    // the MachinePool mirrors: a write of each for every boot.
    if !state.ready {
        return Ok(Outcome::Wait(Wait::after(
            Reason::WaitingForInstances,
            format!("waiting for {replicas} instances to run"),
            asked.unwrap_or(POLL_NOT_READY),
        )));
    }
    scope.found.done = Some((Reason::Ready, format!("{replicas} instances running")));
    Ok(asked.map_or(Outcome::Continue, Outcome::RequeueAfter))
}

/// Whether `old` and `new` list the same instances, in the same order.
fn same_instances(old: &[InstanceStatus], new: &[InstanceStatus]) -> bool {
    old.len() == new.len()
        && old
            .iter()
            .zip(new)
            .all(|(a, b)| a.id == b.id && a.provider_id == b.provider_id)
}

/// Calls the provider's delete until it says the instances are gone.
async fn delete(scope: &mut Scope<WasmMachinePool>, ctx: &Context) -> Result<Outcome, Error> {
    let Some(prepared) = scope.found.prepared.as_ref() else {
        return Ok(Outcome::Continue);
    };
    let pool = scope.object.clone();
    let version = scope
        .found
        .pool
        .as_ref()
        .and_then(|p| p.spec.template.spec.version.clone());
    let request = DeleteRequest {
        pool: provider::object_ref(&*pool),
        cluster: provider::cluster_info(&*pool, scope.cluster.as_deref(), version.as_deref()),
        config: prepared.config.clone(),
        instances: guest_io::to_instances(&scope.status.instances),
        idempotency_key: pool.uid().unwrap_or_default(),
        credentials: prepared.credentials.clone(),
    };
    let outcome = ctx
        .runtime
        .delete_pool(&pool.spec.provider, &request)
        .await
        .map_err(Error::Guest)?;
    if matches!(outcome, DeleteOutcome::Done) {
        machines::release(ctx, &machines::of_pool(ctx, &pool)).await?;
    }
    Ok(provider::deletion(outcome, "the pool's instances"))
}
