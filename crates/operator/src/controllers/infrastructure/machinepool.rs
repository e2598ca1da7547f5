//! The WasmMachinePool as the frame reconciles it: its owner MachinePool,
//! then its instances through an infrastructure-provider component (desired
//! replicas and bootstrap data in; instances, providerIDs and readiness
//! out); on deletion, the provider's delete until it is done.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt as _;
use serde_json::json;

use super::{CONTROLLER, guest_io, machines, rollout};
use crate::api::conditions::Desired;
use crate::api::provider::{
    INFRASTRUCTURE_FIELD_MANAGER, InfrastructureInitialization, InstanceStatus,
    MACHINE_POOL_FINALIZER,
};
use crate::api::{Cluster, ConditionType, MachinePool, Reason, WasmMachine, WasmMachinePool};
use crate::controllers::bootstrap::fit_for;
use crate::controllers::cache::cluster_key;
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::provider::{self, Found};
use crate::controllers::reconciler::{Phase, Reconciler, Scope};
use crate::controllers::shard::{Role, Shard};
use crate::phases;
use crate::wasm::LoadedProvider;
use crate::wasm::checks::Violation;
use crate::wasm::machine_pools::{DeleteRequest, ReconcileRequest};
use crate::wasm::types::{BootstrapData, BootstrapFormat, ClusterInfo, DeleteOutcome};
use crate::workload::ClusterKey;

/// How soon to look again at a pool waiting for bootstrap data with a
/// fresh token.
const TOKEN_RENEWAL_POLL: Duration = Duration::from_secs(2);

/// The export whose result the host checks.
const EXPORT: &str = "machine-pools.reconcile";

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

/// What one pass of [`provision`] works with, besides its scope.
struct Pass<'a> {
    machine_pool: &'a MachinePool,
    /// A provider that removes instances one by one has them as Machines:
    /// those whose WasmMachine is being deleted go first, and it is never
    /// asked for fewer instances than are up (scale-down chooses which go).
    one_by_one: bool,
    /// The pool's WasmMachines (none unless one by one).
    machines: Vec<Arc<WasmMachine>>,
    /// The pool's revision: what new instances are made from.
    revision: String,
    /// The instances, once those whose WasmMachine went were removed, each
    /// with its revision.
    recorded: Vec<InstanceStatus>,
    core: machines::CoreMachines<'a>,
    plan: rollout::Plan,
}

impl<'a> Pass<'a> {
    /// The pass, with the instances whose WasmMachine is being deleted
    /// removed by the provider.
    async fn new(
        scope: &Scope<WasmMachinePool>,
        ctx: &Context,
        prepared: &provider::Prepared,
        machine_pool: &'a MachinePool,
        cluster: &ClusterInfo,
    ) -> Result<Self, Error> {
        let pool = &*scope.object;
        let one_by_one = prepared.provider.removes_instances()
            && machines::control_plane_initialized(scope.cluster.as_deref());
        let machines = if one_by_one {
            machines::made_for(ctx, pool, machine_pool)
        } else {
            Vec::new()
        };
        let before = &scope.status.instances;
        let mut recorded =
            machines::remove_deleted(ctx, pool, prepared, cluster, &machines, before.clone())
                .await?;
        let revision = rollout::revision(&prepared.config, machine_pool);
        rollout::stamp(&mut recorded, before, &revision);
        Ok(Self {
            machine_pool,
            one_by_one,
            machines,
            revision,
            recorded,
            core: machines::CoreMachines::new(machine_pool),
            plan: rollout::Plan::default(),
        })
    }

    /// What to ask the provider for, and which instances to remove: for a
    /// provider that removes them one by one, core's Machines listed only
    /// when some instance is to go or out of date.
    async fn plan(
        &mut self,
        ctx: &Context,
        pool: &WasmMachinePool,
        replicas: u32,
    ) -> Result<(), Error> {
        let (recorded, revision) = (&self.recorded, self.revision.as_str());
        if !self.one_by_one {
            self.plan = rollout::Plan::as_asked(recorded, revision, replicas);
            return Ok(());
        }
        let key = ClusterKey::new(
            pool.namespace().unwrap_or_default(),
            self.machine_pool.spec.cluster_name.clone(),
        );
        let nodes = ctx.workload.nodes(&key).await.ok();
        let core = &mut self.core;
        let going = machines::going(ctx, core, &self.machines, false).await?;
        self.plan = rollout::plan(pool, recorded, &going, nodes.as_ref(), revision, replicas);
        if self.plan.goes > 0 || !self.plan.out_of_date.is_empty() {
            let going = machines::going(ctx, core, &self.machines, true).await?;
            self.plan = rollout::plan(pool, recorded, &going, nodes.as_ref(), revision, replicas);
        }
        Ok(())
    }
}

/// The `RollingOut` condition: whether instances not up to date remain, and
/// whether they are being replaced.
fn rolling_out(scope: &mut Scope<WasmMachinePool>, one_by_one: bool, plan: &rollout::Plan) {
    let old = plan.out_of_date.len();
    let desired = if old == 0 {
        Desired::fails(ConditionType::RollingOut, Reason::NotRollingOut, "")
    } else if one_by_one {
        Desired::holds(
            ConditionType::RollingOut,
            Reason::RollingOut,
            format!("Rolling out {old} not up-to-date replicas"),
        )
    } else {
        Desired::holds(
            ConditionType::RollingOut,
            Reason::RolloutUnsupported,
            format!(
                "{old} replicas are not up to date, and ProviderModule {:?} cannot remove chosen instances (it does not export pool-machines): they run until removed",
                scope.object.spec.provider
            ),
        )
    };
    scope.set(desired);
}

/// Why the pool cannot have new instances yet, if it cannot: no bootstrap
/// data, or data whose token is not yet confirmed for `replicas`.
async fn waiting_for_data(
    ctx: &Context,
    machine_pool: &MachinePool,
    replicas: u32,
    had: usize,
    has_data: bool,
) -> Result<Option<Outcome>, Error> {
    if !has_data && replicas > 0 {
        return Ok(Some(Outcome::Wait(Wait::on_change(
            Reason::WaitingForBootstrapData,
            format!(
                "MachinePool {:?} has no bootstrap data Secret yet",
                machine_pool.name_any()
            ),
        ))));
    }
    // New machines must not boot with a host token that expired or was
    // deleted: the bootstrap controller confirms (or renews) it as the pool
    // scales. It writes a Secret this controller does not watch, hence the
    // timer.
    let adding = usize::try_from(replicas).unwrap_or(0) > had;
    if adding && !data_fit(ctx, machine_pool).await? {
        return Ok(Some(Outcome::Wait(Wait::after(
            Reason::WaitingForBootstrapData,
            format!(
                "waiting for the bootstrap controller to confirm or renew the bootstrap token in MachinePool {:?}'s bootstrap data for {replicas} replicas",
                machine_pool.name_any()
            ),
            TOKEN_RENEWAL_POLL,
        ))));
    }
    Ok(None)
}

/// Whether `old` and `new` list the same instances, in the same order.
fn same_instances(old: &[InstanceStatus], new: &[InstanceStatus]) -> bool {
    old.len() == new.len()
        && old
            .iter()
            .zip(new)
            .all(|(a, b)| a.id == b.id && a.provider_id == b.provider_id)
}

/// The providerIDs a pool's provider reported, against what only the host
/// can see: each within the providerIDs its ProviderModule declares
/// (`capabilities.providerIDPrefix`: the provider's own word, its `owns`,
/// is asked too but is not enough), none listed by another pool of the
/// Cluster, and none a Node of the control plane reports, so that a pool
/// never claims another cloud's, another account's, another pool's or the
/// control plane's Nodes.
async fn check_provider_ids(
    ctx: &Context,
    pool: &WasmMachinePool,
    machine_pool: &MachinePool,
    provider: &LoadedProvider,
    provider_ids: &[String],
) -> Result<(), Error> {
    let refuse = |rule, id: &String| {
        let violation = Violation {
            rule,
            field: format!("providerID {id:?}"),
        };
        Error::Guest(ctx.runtime.refused(provider, EXPORT, violation))
    };
    let cluster = cluster_key(machine_pool, &machine_pool.spec.cluster_name);
    let others = ctx
        .caches
        .pools_by_cluster
        .get(ctx.caches.pools.store(), &cluster);
    for other in others
        .iter()
        .filter(|p| p.metadata.uid != machine_pool.metadata.uid)
    {
        if let Some(id) = provider_ids
            .iter()
            .find(|id| other.spec.provider_id_list.contains(id))
        {
            return Err(refuse("a providerID another pool of the Cluster lists", id));
        }
    }
    let module = ctx.caches.modules.get(None, &pool.spec.provider);
    let prefix = module
        .as_ref()
        .and_then(|m| m.spec.capabilities.as_ref())
        .and_then(|c| c.provider_id_prefix.as_deref());
    for id in provider_ids {
        match prefix {
            None => {
                return Err(refuse(
                    "a providerID from a module that declares none (capabilities.providerIDPrefix)",
                    id,
                ));
            }
            Some(prefix) if !id.starts_with(prefix) => {
                return Err(refuse(
                    "a providerID outside the module's capabilities.providerIDPrefix",
                    id,
                ));
            }
            Some(_) => {}
        }
    }
    // New ones only: a Node the pool already holds was checked when it came.
    let known = &pool.spec.provider_id_list;
    let new: Vec<&String> = provider_ids
        .iter()
        .filter(|id| !known.contains(id))
        .collect();
    if new.is_empty() {
        return Ok(());
    }
    for id in &new {
        let owned = ctx
            .runtime
            .owns(&pool.spec.provider, id)
            .await
            .map_err(Error::Guest)?;
        if !owned {
            return Err(refuse("a providerID the provider says is not its own", id));
        }
    }
    // Unreachable, the MachinePool's own matching still never takes a
    // control-plane Node; this names the provider that tried.
    let key = ClusterKey::new(
        machine_pool.namespace().unwrap_or_default(),
        machine_pool.spec.cluster_name.clone(),
    );
    if let Ok(nodes) = ctx.workload.nodes(&key).await
        && let Some(id) = new.into_iter().find(|id| nodes.of_control_plane(id))
    {
        return Err(refuse("the providerID of a control-plane Node", id));
    }
    Ok(())
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
    Ok(deletion(outcome, "the pool's instances"))
}

/// How a provider's delete call ended: done, or in progress (look again
/// when the provider says).
pub fn deletion(outcome: DeleteOutcome, what: &str) -> Outcome {
    match outcome {
        DeleteOutcome::Done => Outcome::Continue,
        DeleteOutcome::InProgress(seconds) => Outcome::Wait(Wait::after(
            Reason::WaitingForProviderDeletion,
            format!("the provider is removing {what}"),
            Duration::from_secs(u64::from(seconds.max(1))),
        )),
    }
}

/// The Secret of the pool's bootstrap data, once its MachinePool names one.
fn data_secret_name(machine_pool: &MachinePool) -> Option<&str> {
    machine_pool
        .spec
        .template
        .spec
        .bootstrap
        .data_secret_name
        .as_deref()
}

/// Whether the pool's bootstrap data may boot new machines ([`fit_for`]).
async fn data_fit(ctx: &Context, machine_pool: &MachinePool) -> Result<bool, Error> {
    let Some(name) = data_secret_name(machine_pool) else {
        return Ok(true);
    };
    let namespace = machine_pool.namespace().unwrap_or_default();
    let meta = ctx.secret_metadata(&namespace, name).await?;
    Ok(meta.is_none_or(|m| {
        fit_for(
            m.annotations(),
            machine_pool.desired_replicas(),
            k8s_openapi::jiff::Timestamp::now(),
        )
    }))
}

/// The pool's bootstrap data, from the Secret its MachinePool names.
async fn bootstrap_data(
    ctx: &Context,
    machine_pool: &MachinePool,
) -> Result<Option<BootstrapData>, Error> {
    let Some(name) = data_secret_name(machine_pool) else {
        return Ok(None);
    };
    let namespace = machine_pool.namespace().unwrap_or_default();
    let data = ctx.secret_data(&namespace, name).await?;
    let Some(value) = data.as_ref().and_then(|d| d.get("value")) else {
        return Ok(None);
    };
    let format = match data
        .as_ref()
        .and_then(|d| d.get("format"))
        .map(|f| f.0.as_slice())
    {
        Some(b"ignition") => BootstrapFormat::Ignition,
        Some(b"shell-script") => BootstrapFormat::ShellScript,
        _ => BootstrapFormat::CloudConfig,
    };
    Ok(Some(BootstrapData {
        format,
        value: value.0.clone(),
    }))
}
