//! One pass of the pool's provisioning: its WasmMachines, its instances
//! with their revisions, and the plan of what to ask and what to remove.

use std::sync::Arc;

use kube::ResourceExt as _;

use super::super::{machines, rollout};
use crate::api::conditions::Desired;
use crate::api::provider::InstanceStatus;
use crate::api::{ConditionType, MachinePool, Reason, WasmMachine, WasmMachinePool};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::provider::{self};
use crate::controllers::reconciler::Scope;
use crate::wasm::types::ClusterInfo;
use crate::workload::ClusterKey;

/// What one pass of [`provision`] works with, besides its scope.
pub(super) struct Pass<'a> {
    machine_pool: &'a MachinePool,
    /// A provider that removes instances one by one has them as Machines:
    /// those whose WasmMachine is being deleted go first, and it is never
    /// asked for fewer instances than are up (scale-down chooses which go).
    pub(super) one_by_one: bool,
    /// The pool's WasmMachines (none unless one by one).
    pub(super) machines: Vec<Arc<WasmMachine>>,
    /// The pool's revision: what new instances are made from.
    pub(super) revision: String,
    /// The instances, once those whose WasmMachine went were removed, each
    /// with its revision.
    pub(super) recorded: Vec<InstanceStatus>,
    pub(super) core: machines::CoreMachines<'a>,
    pub(super) plan: rollout::Plan,
}

impl<'a> Pass<'a> {
    /// The pass, with the instances whose WasmMachine is being deleted
    /// removed by the provider.
    pub(super) async fn new(
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
    pub(super) async fn plan(
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
        // What goes on a plain scale-down needs neither the Nodes nor core's
        // Machines; a rollout, or anything to remove, needs both.
        let core = &mut self.core;
        let going = machines::going(ctx, core, &self.machines, false).await?;
        self.plan = rollout::plan(pool, recorded, &going, None, revision, replicas);
        if self.plan.goes > 0 || !self.plan.out_of_date.is_empty() {
            let key = ClusterKey::new(
                pool.namespace().unwrap_or_default(),
                self.machine_pool.spec.cluster_name.clone(),
            );
            let nodes = ctx.workload.nodes(&key).await.ok();
            let going = machines::going(ctx, core, &self.machines, true).await?;
            self.plan = rollout::plan(pool, recorded, &going, nodes.as_ref(), revision, replicas);
        }
        Ok(())
    }
}

/// The `RollingOut` condition: whether instances not up to date remain, and
/// whether they are being replaced.
pub(super) fn rolling_out(
    scope: &mut Scope<WasmMachinePool>,
    one_by_one: bool,
    plan: &rollout::Plan,
) {
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
