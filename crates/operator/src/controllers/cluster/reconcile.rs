//! The Cluster as the frame reconciles it: the finalizer, then the
//! infrastructure and control-plane phases and the endpoint they found; on
//! deletion, its MachinePools, then its control plane, then its
//! infrastructure, in upstream's order.

use std::sync::Arc;

use kube::ResourceExt as _;

use super::{CONTROLLER, control_plane, delete, infrastructure, summary};
use crate::api::cluster::{FIELD_MANAGER, FINALIZER};
use crate::api::{ApiEndpoint, Cluster, ConditionType};
use crate::controllers::cache::cluster_key;
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::{Phase, Reconciler, Scope};
use crate::controllers::shard::{Role, Shard};
use crate::phases;

/// What the phases found.
#[derive(Default)]
pub struct Found {
    /// An endpoint to copy into spec (infrastructure or control-plane phase).
    pub endpoint: Option<ApiEndpoint>,
    /// The Cluster's MachinePools are gone (delete phase).
    pub workers_gone: bool,
    /// Its control-plane and infrastructure objects are gone (delete phase).
    pub references_gone: bool,
}

impl Reconciler for Cluster {
    type Found = Found;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    const SUMMARY: ConditionType = ConditionType::Available;
    const PHASE_EVENTS: bool = true;
    const PHASES: &'static [Phase<Self>] = phases![Cluster:
        infrastructure::run,
        control_plane::run,
        infrastructure::record_endpoint,
    ];
    const DELETE_PHASES: &'static [Phase<Self>] =
        phases![Cluster: delete::workers, delete::references, delete::completed];

    /// Itself: its own `spec.paused` pauses it.
    fn role(&self, shard: Shard) -> Role {
        shard.role(self)
    }

    fn cluster(&self, ctx: &Context) -> Result<Option<Arc<Cluster>>, Error> {
        Ok(ctx
            .caches
            .clusters
            .get(self.namespace().as_deref(), &self.name_any()))
    }

    fn summarize(scope: &mut Scope<Self>, ctx: &Context, _: &[Result<Outcome, Error>]) {
        let pools = ctx.caches.pools_by_cluster.get(
            ctx.caches.pools.store(),
            &cluster_key(&*scope.object, &scope.object.name_any()),
        );
        summary::summarize(scope, &pools);
    }
}
