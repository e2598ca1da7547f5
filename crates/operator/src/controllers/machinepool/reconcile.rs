//! The MachinePool as the frame reconciles it: its Cluster from the cache,
//! the finalizer with the cluster-name label and the Cluster as owner, then
//! the bootstrap, infrastructure and node phases and the spec fields they
//! copied; on deletion, the referenced objects and then the Nodes.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt as _;

use super::scope::Found;
use super::{CONTROLLER, bootstrap, delete, infrastructure, machines, noderefs, spec, summary};
use crate::api::machinepool::{FIELD_MANAGER, FINALIZER};
use crate::api::{CLUSTER_API_VERSION, Cluster, ConditionType, MachinePool, labels};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::finalizer::Required;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::{Phase, Reconciler, Scope, cluster_named};
use crate::controllers::shard::{Role, Shard};
use crate::phases;

impl Reconciler for MachinePool {
    type Found = Found;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    const SUMMARY: ConditionType = ConditionType::Available;
    const PHASES: &'static [Phase<Self>] = phases![MachinePool:
        bootstrap::run,
        infrastructure::run,
        noderefs::run,
        machines::run,
        spec::run,
    ];
    const DELETE_PHASES: &'static [Phase<Self>] =
        phases![MachinePool: delete::references, delete::nodes];

    fn role(&self, shard: Shard) -> Role {
        shard.role(self)
    }

    fn cluster(&self, ctx: &Context) -> Result<Option<Arc<Cluster>>, Error> {
        cluster_named(ctx, self.namespace().as_deref(), &self.spec.cluster_name)
    }

    /// The cluster-name label, and the Cluster as (non-controller) owner.
    fn required(scope: &Scope<Self>) -> Required {
        let pool = &scope.object;
        Required {
            labels: BTreeMap::from([(
                labels::CLUSTER_NAME.to_owned(),
                pool.spec.cluster_name.clone(),
            )]),
            owner: scope.cluster.as_ref().map(|cluster| OwnerReference {
                api_version: CLUSTER_API_VERSION.into(),
                kind: "Cluster".into(),
                name: cluster.name_any(),
                uid: cluster.uid().unwrap_or_default(),
                ..OwnerReference::default()
            }),
        }
    }

    fn summarize(scope: &mut Scope<Self>, _: &Context, _: &[Result<Outcome, Error>]) {
        summary::summarize(scope);
    }
}
