//! What one MachinePool reconcile works on: the pool as read, its Cluster,
//! the status as the phases leave it, and what each phase found.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;
use kube::{Resource as _, ResourceExt as _};

use crate::api::conditions::{self, Desired};
use crate::api::machinepool::{FIELD_MANAGER, MachinePoolStatus, MachinePoolV1Beta1Status};
use crate::api::{Cluster, ConditionType, ContractVersionedObjectReference, MachinePool};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::external::Resolved;
use crate::workload::ClusterKey;

/// The state of one reconcile.
pub struct Scope<'a> {
    /// The pool as read.
    pub pool: &'a MachinePool,
    /// Its Cluster.
    pub cluster: Cluster,
    /// The status being computed.
    pub status: MachinePoolStatus,
    /// When the reconcile started.
    pub now: Time,
    /// The bootstrap data Secret to record in spec (bootstrap phase).
    pub data_secret_name: Option<String>,
    /// The providerID list to record in spec (infrastructure phase).
    pub provider_id_list: Option<Vec<String>>,
    /// The bootstrap data exists (bootstrap phase).
    pub bootstrap_ready: bool,
    /// The infrastructure object is provisioned (infrastructure phase).
    pub infrastructure_ready: bool,
}

impl<'a> Scope<'a> {
    /// A scope for `pool` of `cluster`, starting from its current status.
    pub fn new(pool: &'a MachinePool, cluster: Cluster) -> Self {
        Self {
            pool,
            cluster,
            status: pool.status.clone().unwrap_or_default(),
            now: Time(Timestamp::now()),
            data_secret_name: None,
            provider_id_list: None,
            bootstrap_ready: false,
            infrastructure_ready: false,
        }
    }

    /// Sets a condition.
    pub fn set(&mut self, desired: Desired) {
        conditions::set(
            &mut self.status.conditions,
            desired,
            self.pool.metadata.generation,
            &self.now,
        );
    }

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
        self.provider_id_list
            .as_deref()
            .unwrap_or(&self.pool.spec.provider_id_list)
    }

    /// The pool's namespace.
    pub fn namespace(&self) -> String {
        self.pool.namespace().unwrap_or_default()
    }

    /// The Cluster, as the workload-cluster access knows it.
    pub fn cluster_key(&self) -> ClusterKey {
        ClusterKey::new(self.namespace(), self.pool.spec.cluster_name.clone())
    }

    /// The pool as the controller of the objects it references.
    pub fn controller_reference(&self) -> OwnerReference {
        self.pool.controller_owner_ref(&()).unwrap_or_default()
    }

    /// Sets condition `type_` to fail with `error`'s reason and returns the error.
    pub fn failed(&mut self, type_: ConditionType, error: Error) -> Error {
        self.set(Desired::fails(
            type_,
            error.reason(),
            crate::report::error_chain(&error),
        ));
        error
    }

    /// The referenced object, resolved, watched and adopted (the pool as its
    /// controller, the cluster-name label).
    pub async fn adopted(
        &self,
        ctx: &Context,
        reference: &ContractVersionedObjectReference,
    ) -> Result<(Resolved, DynamicObject), Error> {
        let resolved = self.resolve(ctx, reference).await?;
        let error = |source| Error::Reference {
            reference: reference.to_string(),
            source,
        };
        let object = ctx
            .external
            .get(&resolved, &self.namespace(), &reference.name)
            .await
            .map_err(error)?;
        ctx.external
            .adopt(
                &resolved,
                &object,
                self.controller_reference(),
                &self.pool.spec.cluster_name,
                FIELD_MANAGER,
            )
            .await
            .map_err(error)?;
        Ok((resolved, object))
    }

    /// Resolves `reference` and starts watching its kind.
    pub async fn resolve(
        &self,
        ctx: &Context,
        reference: &ContractVersionedObjectReference,
    ) -> Result<Resolved, Error> {
        let resolved =
            ctx.external
                .resolve(reference)
                .await
                .map_err(|source| Error::Reference {
                    reference: reference.to_string(),
                    source,
                })?;
        ctx.pool_watches.ensure(&resolved.resource);
        Ok(resolved)
    }
}
