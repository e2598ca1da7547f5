//! The MachinePool reconcile skeleton: Cluster, metadata (finalizer, label,
//! owner) in one apply, pause, the phases — all of them, even after one
//! fails, as upstream — then spec and status, each written once and only
//! when changed.
//!
//! A reconcile that writes the pool's metadata or spec leaves its status to
//! the reconcile that write brings (upstream returns after adding its
//! finalizer for the same reason): the status is then computed from what the
//! write changed, and written once instead of twice.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::runtime::controller::Action;
use kube::{Api, Resource as _, ResourceExt as _};
use serde_json::json;

use super::phase::{self, Observed, Phase};
use super::scope::Scope;
use super::{CONTROLLER, bootstrap, delete, infrastructure, noderefs};
use crate::api::conditions::{self, Desired};
use crate::api::machinepool::{
    FIELD_MANAGER, FINALIZER, MachinePoolInitializationStatus, MachinePoolStatus,
};
use crate::api::{
    CLUSTER_API_VERSION, Cluster, ConditionType, MachinePool, Reason, annotations, labels,
};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::{self, Outcome};
use crate::controllers::write;

pub async fn reconcile(pool: Arc<MachinePool>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile(CONTROLLER);
    let cluster_name = pool.spec.cluster_name.clone();
    let cluster =
        Api::<Cluster>::namespaced(ctx.client.clone(), &pool.namespace().unwrap_or_default())
            .get_opt(&cluster_name)
            .await
            .map_err(|source| Error::Get {
                kind: "Cluster",
                name: cluster_name.clone(),
                source,
            })?;
    let Some(cluster) = cluster else {
        // No finalizer either: nothing was done for a pool without a Cluster (upstream).
        let error = Error::ClusterNotFound(cluster_name);
        let mut status = pool.status.clone().unwrap_or_default();
        conditions::set(
            &mut status.conditions,
            Desired::fails(ConditionType::Available, error.reason(), error.to_string()),
            pool.metadata.generation,
            &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ),
        );
        write_status(&ctx, &pool, status).await?;
        return Err(error);
    };
    let deleting = pool.meta().deletion_timestamp.is_some();
    let wrote_metadata = !deleting && ensure_metadata(&pool, &cluster, &ctx).await?;
    let mut scope = Scope::new(&pool, cluster);

    if let Some(why) = crate::controllers::paused::why(&*pool, &scope.cluster) {
        scope.set(Desired::holds(ConditionType::Paused, Reason::Paused, why));
        write_status(&ctx, &pool, scope.status).await?;
        return Ok(Action::await_change());
    }
    scope.set(Desired::fails(ConditionType::Paused, Reason::NotPaused, ""));
    if !deleting {
        scope.set(Desired::fails(
            ConditionType::Deleting,
            Reason::NotDeleting,
            "",
        ));
    }

    let results = if deleting {
        match delete::run(&mut scope, &ctx).await {
            Ok(None) => {
                write::remove_finalizer(&ctx, CONTROLLER, &*pool, FINALIZER).await?;
                ctx.succeeded(&pool.uid().unwrap_or_default());
                return Ok(Action::await_change());
            }
            result => vec![result.map(|o| o.unwrap_or(Outcome::Continue))],
        }
    } else {
        vec![
            bootstrap::run(&mut scope, &ctx).await,
            infrastructure::run(&mut scope, &ctx).await,
            noderefs::run(&mut scope, &ctx).await,
        ]
    };
    let failed = results.iter().any(Result::is_err);

    if !deleting && (apply_spec(&scope, &ctx).await? || wrote_metadata) {
        return Ok(Action::await_change());
    }
    summarize(&mut scope, deleting);
    let mut status = scope.status;
    // The phases create the v1beta1 part on first use; none at all when nothing is in it.
    if status.deprecated.as_ref().is_some_and(|d| {
        d.v1beta1
            .as_ref()
            .is_none_or(|v| *v == crate::api::machinepool::MachinePoolV1Beta1Status::default())
    }) {
        status.deprecated = None;
    }
    if !failed {
        status.observed_generation = pool.metadata.generation;
    }
    write_status(&ctx, &pool, status).await?;

    let mut outcomes = Vec::with_capacity(results.len());
    for result in results {
        outcomes.push(result?);
    }
    ctx.succeeded(&pool.uid().unwrap_or_default());
    Ok(outcome::action(&outcomes))
}

#[allow(clippy::needless_pass_by_value)] // kube-runtime's error_policy signature
pub fn error_policy(pool: Arc<MachinePool>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.error_action(CONTROLLER, &pool.uid().unwrap_or_default(), error)
}

/// Finalizer, cluster-name label and the Cluster as (non-controller) owner
/// — replacing a reference to an earlier Cluster of the same name — in one
/// write, and only if one of them is missing. Whether it wrote.
async fn ensure_metadata(
    pool: &MachinePool,
    cluster: &Cluster,
    ctx: &Context,
) -> Result<bool, Error> {
    let owner = OwnerReference {
        api_version: CLUSTER_API_VERSION.into(),
        kind: "Cluster".into(),
        name: cluster.name_any(),
        uid: cluster.uid().unwrap_or_default(),
        ..OwnerReference::default()
    };
    let mut finalizers = pool.finalizers().to_vec();
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.into());
    }
    let same_cluster = |r: &OwnerReference| {
        r.kind == owner.kind
            && r.name == owner.name
            && r.api_version.split('/').next() == Some(crate::api::CLUSTER_API_GROUP)
    };
    let mut owners: Vec<OwnerReference> = pool
        .owner_references()
        .iter()
        .filter(|r| !same_cluster(r) || r.uid == owner.uid)
        .cloned()
        .collect();
    if !owners.iter().any(|r| r.uid == owner.uid) {
        owners.push(owner);
    }
    let labelled = pool.labels().get(labels::CLUSTER_NAME) == Some(&pool.spec.cluster_name);
    if labelled && finalizers == pool.finalizers() && owners == pool.owner_references() {
        return Ok(false);
    }
    let metadata = json!({
        "finalizers": finalizers,
        "labels": { labels::CLUSTER_NAME: pool.spec.cluster_name },
        "ownerReferences": owners,
    });
    write::metadata(ctx, CONTROLLER, pool, metadata)
        .await
        .map(|()| true)
}

/// Records what the bootstrap and infrastructure phases copied, in one apply
/// of every spec field this controller owns (an apply drops what it omits).
/// Whether it wrote.
async fn apply_spec(scope: &Scope<'_>, ctx: &Context) -> Result<bool, Error> {
    let pool = scope.pool;
    let current = &pool.spec;
    let secret_changed = scope.data_secret_name.as_ref().is_some_and(|name| {
        current.template.spec.bootstrap.data_secret_name.as_ref() != Some(name)
    });
    if !secret_changed && scope.provider_id_list.is_none() {
        return Ok(false);
    }
    let mut spec = json!({ "providerIDList": scope.provider_ids() });
    // Only with a configRef is dataSecretName ours; otherwise the user's.
    if current.template.spec.bootstrap.config_ref.is_some()
        && let Some(name) = scope.data_secret_name.as_ref().or(current
            .template
            .spec
            .bootstrap
            .data_secret_name
            .as_ref())
    {
        spec["template"] = json!({ "spec": { "bootstrap": { "dataSecretName": name } } });
    }
    write::fields(
        ctx,
        CONTROLLER,
        FIELD_MANAGER,
        pool,
        "spec",
        json!({ "spec": spec }),
    )
    .await
    .map(|()| true)
}

/// Milestones, phase, up-to-date count and the `Available` summary.
fn summarize(scope: &mut Scope<'_>, deleting: bool) {
    let pool = scope.pool;
    let (bootstrap_ready, infrastructure_ready) =
        (scope.bootstrap_ready, scope.infrastructure_ready);
    if !deleting {
        scope.status.initialization = Some(MachinePoolInitializationStatus {
            bootstrap_data_secret_created: Some(bootstrap_ready),
            infrastructure_provisioned: Some(infrastructure_ready),
        });
    }
    let init = scope.status.initialization.clone().unwrap_or_default();
    let ready = scope
        .status
        .deprecated
        .as_ref()
        .and_then(|d| d.v1beta1.as_ref())
        .and_then(|v| v.ready_replicas)
        .unwrap_or(0);
    let observed = Observed {
        deleting,
        bootstrap_ready: init.bootstrap_data_secret_created == Some(true),
        infrastructure_ready: init.infrastructure_provisioned == Some(true),
        has_node_refs: !scope.status.node_refs.is_empty(),
        desired: pool.spec.replicas,
        ready,
        externally_scaled: pool
            .annotations()
            .get(annotations::REPLICAS_MANAGED_BY)
            .is_some_and(|v| v != "false"),
        previous: scope.status.phase.as_deref().and_then(Phase::parse),
    };
    let phase = phase::phase(observed);
    scope.status.phase = Some(phase.as_str().into());
    scope.status.up_to_date_replicas = scope.status.replicas;
    let available = scope.status.available_replicas.unwrap_or(0);
    let summary = match phase {
        Phase::Deleting => {
            Desired::fails(ConditionType::Available, Reason::NotReady, "being deleted")
        }
        _ if observed.infrastructure_ready && Some(available) == pool.spec.replicas => {
            Desired::holds(ConditionType::Available, Reason::Ready, "")
        }
        _ => Desired::fails(
            ConditionType::Available,
            Reason::NotReady,
            format!(
                "{available} of {} replicas available",
                pool.desired_replicas()
            ),
        ),
    };
    scope.set(summary);
}

/// Writes `status` if it differs from the pool's, announcing what changed.
async fn write_status(
    ctx: &Context,
    pool: &MachinePool,
    status: MachinePoolStatus,
) -> Result<(), Error> {
    let before = pool.status.clone().unwrap_or_default();
    if status == before {
        return Ok(());
    }
    write::status(ctx, CONTROLLER, FIELD_MANAGER, pool, &status).await?;
    let object = pool.object_ref(&());
    ctx.announce(&object, &before.conditions, &status.conditions)
        .await;
    if status.phase != before.phase
        && let Some(phase) = &status.phase
    {
        ctx.publish(
            &object,
            Reason::PhaseChanged,
            format!("MachinePool is {phase}"),
        )
        .await;
    }
    Ok(())
}
