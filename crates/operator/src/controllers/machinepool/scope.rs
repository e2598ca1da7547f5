//! What one MachinePool reconcile finds, phase by phase, and the helpers its
//! phases share.

use std::sync::Arc;

use kube::api::DynamicObject;

use crate::api::machinepool::{FIELD_MANAGER, MachinePoolV1Beta1Status};
use crate::api::{ContractVersionedObjectReference, MachinePool};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::external::Adopter;
use crate::controllers::external::Resolved;
use crate::controllers::reconciler::Scope;
use crate::workload::ClusterKey;

/// What the phases found.
#[derive(Default)]
pub struct Found {
    /// The bootstrap data Secret to record in spec (bootstrap phase).
    pub data_secret_name: Option<String>,
    /// The providerID list to record in spec (infrastructure phase).
    pub provider_id_list: Option<Vec<String>>,
    /// The bootstrap data exists (bootstrap phase).
    pub bootstrap_ready: bool,
    /// The infrastructure object is provisioned (infrastructure phase).
    pub infrastructure_ready: bool,
    /// The bootstrap config and infrastructure object are gone (delete phase).
    pub references_gone: bool,
    /// The infrastructure pool's kind, and the kind of its InfraMachines
    /// (`status.infrastructureMachineKind`), if it reports one.
    pub infrastructure_machines: Option<(Resolved, String)>,
    /// The infrastructure pool's `status.upToDateReplicas`, if it reports
    /// it (a pool that rolls out).
    pub up_to_date_replicas: Option<i32>,
}

impl Scope<MachinePool> {
    /// The v1beta1 part of the status, created on first use.
    pub fn v1beta1(&mut self) -> &mut MachinePoolV1Beta1Status {
        self.status
            .deprecated
            .get_or_insert_with(Default::default)
            .v1beta1
            .get_or_insert_with(Default::default)
    }

    /// The providerID list in effect: the one being copied, else spec's.
    pub fn provider_ids(&self) -> &[String] {
        self.found
            .provider_id_list
            .as_deref()
            .unwrap_or(&self.object.spec.provider_id_list)
    }

    /// The Cluster, as the workload-cluster access knows it.
    pub fn cluster_key(&self) -> ClusterKey {
        ClusterKey::new(self.namespace(), self.object.spec.cluster_name.clone())
    }

    /// The referenced object, adopted: the pool its controller, the cluster-name label.
    pub async fn adopt(
        &mut self,
        ctx: &Context,
        reference: &ContractVersionedObjectReference,
    ) -> Result<(Resolved, Arc<DynamicObject>), Error> {
        let pool = self.object.clone();
        let adopter = Adopter {
            owner: self.controller_reference(),
            cluster: &pool.spec.cluster_name,
            manager: FIELD_MANAGER,
        };
        self.adopted(ctx, reference, adopter).await
    }
}
