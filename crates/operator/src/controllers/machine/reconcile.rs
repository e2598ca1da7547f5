//! The Machine as the frame reconciles it: its Cluster from the cache, the
//! finalizer with the cluster-name label, then the infrastructure and node
//! phases; on deletion, the drain, the InfraMachine, then the Node.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt as _;

use super::{CONTROLLER, Found, delete, drain, infrastructure, node, summary};
use crate::api::machine::{FIELD_MANAGER, FINALIZER};
use crate::api::{Cluster, ConditionType, Machine, labels};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::finalizer::Required;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::{Phase, Reconciler, Scope, cluster_named};
use crate::controllers::shard::{Role, Shard};
use crate::phases;

impl Reconciler for Machine {
    type Found = Found;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    const SUMMARY: ConditionType = ConditionType::Ready;
    const PHASES: &'static [Phase<Self>] = phases![Machine: infrastructure::run, node::run];
    const DELETE_PHASES: &'static [Phase<Self>] =
        phases![Machine: drain::run, delete::infrastructure, delete::node];

    fn role(&self, shard: Shard) -> Role {
        shard.role(self)
    }

    /// A Machine being deleted goes without its Cluster too (upstream's):
    /// there is then no Node to drain or delete.
    fn cluster(&self, ctx: &Context) -> Result<Option<Arc<Cluster>>, Error> {
        match cluster_named(ctx, self.namespace().as_deref(), &self.spec.cluster_name) {
            Err(Error::ClusterNotFound(_)) if self.metadata.deletion_timestamp.is_some() => {
                Ok(None)
            }
            found => found,
        }
    }

    /// The cluster-name label; a pool's Machine has its pool as controller.
    fn required(scope: &Scope<Self>) -> Required {
        Required {
            labels: BTreeMap::from([(
                labels::CLUSTER_NAME.to_owned(),
                scope.object.spec.cluster_name.clone(),
            )]),
            owner: None,
        }
    }

    fn summarize(scope: &mut Scope<Self>, _: &Context, _: &[Result<Outcome, Error>]) {
        summary::summarize(scope);
    }
}
