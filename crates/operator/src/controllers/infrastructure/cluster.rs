//! The WasmCluster as the frame reconciles it: its owner Cluster, then the
//! cluster's shared infrastructure through an infrastructure-provider
//! component (endpoint, failure domains, readiness); on deletion, the
//! provider's delete until it is done.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt as _;
use serde_json::json;

use super::{CONTROLLER_CLUSTER as CONTROLLER, guest_io};
use crate::api::provider::{
    CLUSTER_FINALIZER, INFRASTRUCTURE_FIELD_MANAGER, InfrastructureInitialization,
};
use crate::api::{ApiEndpoint, Cluster, ConditionType, Reason, WasmCluster};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::provider::{self, Found, Prepared};
use crate::controllers::reconciler::{Phase, Reconciler, Scope};
use crate::controllers::shard::{Role, Shard};
use crate::phases;
use crate::wasm::clusters::ClusterRequest;

impl Reconciler for WasmCluster {
    type Found = Found;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = INFRASTRUCTURE_FIELD_MANAGER;
    const FINALIZER: Option<&'static str> = Some(CLUSTER_FINALIZER);
    const SUMMARY: ConditionType = ConditionType::Ready;
    const PHASES: &'static [Phase<Self>] = phases![WasmCluster:
        provider::owner_cluster_exists::<WasmCluster>,
        provider::prepare::<WasmCluster>,
        provision,
    ];
    const DELETE_PHASES: &'static [Phase<Self>] =
        phases![WasmCluster: provider::prepare::<WasmCluster>, delete];

    /// The owner Cluster, from the cache.
    fn role(&self, shard: Shard) -> Role {
        shard.role(self)
    }

    fn cluster(&self, ctx: &Context) -> Result<Option<Arc<Cluster>>, Error> {
        Ok(provider::owner_cluster(self, ctx))
    }

    fn claimed(&self) -> bool {
        provider::capi_owner(self, "Cluster").is_some()
    }

    fn summarize(scope: &mut Scope<Self>, _: &Context, results: &[Result<Outcome, Error>]) {
        provider::summarize(scope, results);
    }
}

fn request(scope: &Scope<WasmCluster>, prepared: &Prepared) -> ClusterRequest {
    let object = &*scope.object;
    ClusterRequest {
        cluster_object: provider::object_ref(object),
        cluster: provider::cluster_info(object, scope.cluster.as_deref(), None),
        config: prepared.config.clone(),
        idempotency_key: object.uid().unwrap_or_default(),
        credentials: prepared.credentials.clone(),
    }
}

/// Calls the provider and records the endpoint (unless one was given),
/// failure domains and readiness it reports.
async fn provision(scope: &mut Scope<WasmCluster>, ctx: &Context) -> Result<Outcome, Error> {
    let (Some(_), Some(prepared)) = (&scope.cluster, scope.found.prepared.as_ref()) else {
        return Ok(Outcome::Continue);
    };
    let request = request(scope, prepared);
    let served_by = prepared.served_by();
    let object = scope.object.clone();
    let state = ctx
        .runtime
        .reconcile_cluster(&object.spec.provider, &request)
        .await
        .map_err(Error::Guest)?;
    let failure_domains = guest_io::failure_domains(&state.failure_domains);
    let export = "clusters.reconcile";
    provider::within_status_bound(
        ctx,
        &prepared.provider,
        export,
        "failureDomains",
        &failure_domains,
    )?;

    // The provider's endpoint, unless one was given in spec already.
    let given = object
        .spec
        .control_plane_endpoint
        .as_ref()
        .is_some_and(ApiEndpoint::is_valid);
    if !given && let Some(endpoint) = &state.control_plane_endpoint {
        let spec = json!({ "spec": { "controlPlaneEndpoint": { "host": endpoint.host, "port": endpoint.port } } });
        scope.apply(ctx, "spec", spec).await?;
    }
    let status = &mut scope.status;
    let provisioned = status.ready || state.ready;
    status.ready = provisioned;
    status.initialization = provisioned.then_some(InfrastructureInitialization {
        provisioned: Some(true),
    });
    status.failure_domains = failure_domains;
    status.common.served_by = Some(served_by);
    let asked = state
        .requeue_after_seconds
        .map(|s| Duration::from_secs(u64::from(s)));
    if !state.ready {
        let wait = Wait::on_change(
            Reason::WaitingForInfrastructure,
            "the provider is provisioning the cluster infrastructure",
        );
        return Ok(Outcome::Wait(match asked {
            Some(after) => Wait {
                retry: crate::controllers::error::Retry::After(after),
                ..wait
            },
            None => wait,
        }));
    }
    scope.found.done = Some((Reason::Ready, "cluster infrastructure provisioned".into()));
    Ok(asked.map_or(Outcome::Continue, Outcome::RequeueAfter))
}

/// Calls the provider's delete until it says the infrastructure is gone.
async fn delete(scope: &mut Scope<WasmCluster>, ctx: &Context) -> Result<Outcome, Error> {
    let Some(prepared) = scope.found.prepared.as_ref() else {
        return Ok(Outcome::Continue);
    };
    let request = request(scope, prepared);
    let outcome = ctx
        .runtime
        .delete_cluster(&scope.object.spec.provider, &request)
        .await
        .map_err(Error::Guest)?;
    Ok(provider::deletion(outcome, "the cluster infrastructure"))
}
