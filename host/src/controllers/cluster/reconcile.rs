//! The Cluster reconcile: finalizer, pause, infrastructure, control plane,
//! workers summary, phase — and one status write.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource as _, ResourceExt as _};
use serde_json::{Value, json};

use super::phase::{self, Observed};
use super::{CONTROLLER, delete};
use crate::api::cluster::{
    ClusterDeprecatedStatus, ClusterInitializationStatus, ClusterStatus, FIELD_MANAGER, FINALIZER,
    FailureDomain, FailureFields, WorkersStatus,
};
use crate::api::conditions::{self, Desired};
use crate::api::{
    ApiEndpoint, CLUSTER_API_VERSION, Cluster, ConditionStatus, ConditionType,
    ContractVersionedObjectReference, MachinePool, Reason, labels,
};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::external::{self, ReferenceError, Resolved};
use crate::controllers::outcome::{self, Outcome, Wait};
use crate::controllers::write;

/// How soon to look for a kubeconfig Secret that is not there yet (Secrets
/// are watched too; this catches one created without the cluster label).
const KUBECONFIG_POLL: Duration = Duration::from_secs(30);

pub async fn reconcile(cluster: Arc<Cluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile(CONTROLLER);
    let deleting = cluster.meta().deletion_timestamp.is_some();
    if !deleting && !cluster.finalizers().iter().any(|f| f == FINALIZER) {
        write::fields(
            &ctx,
            CONTROLLER,
            FIELD_MANAGER,
            &*cluster,
            "metadata",
            json!({ "metadata": { "finalizers": [FINALIZER] } }),
        )
        .await?;
    }
    let before = cluster.status.clone().unwrap_or_default();
    let mut scope = Scope {
        cluster: &cluster,
        status: before.clone(),
        now: Time(Timestamp::now()),
        endpoint: None,
    };

    if let Some(why) = crate::controllers::paused::why(&*cluster, &cluster) {
        scope.set(Desired::holds(ConditionType::Paused, Reason::Paused, why));
        finish(&ctx, &scope, &before, true).await?;
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
                ctx.workload.forget(&crate::workload::ClusterKey::new(
                    scope.namespace(),
                    cluster.name_any(),
                ));
                ctx.publish(
                    &cluster.object_ref(&()),
                    Reason::DeletionCompleted,
                    format!("Cluster {} has been deleted", cluster.name_any()),
                )
                .await;
                return write::remove_finalizer(&ctx, CONTROLLER, &*cluster, FINALIZER)
                    .await
                    .map(|()| Action::await_change());
            }
            result => vec![result.map(|o| o.unwrap_or(Outcome::Continue))],
        }
    } else {
        vec![
            infrastructure(&mut scope, &ctx).await,
            control_plane(&mut scope, &ctx).await,
        ]
    };
    scope.status.workers = workers(&cluster, &ctx).await?;

    if let Some(endpoint) = scope.endpoint.take() {
        write::fields(
            &ctx,
            CONTROLLER,
            FIELD_MANAGER,
            &*cluster,
            "spec",
            json!({ "spec": { "controlPlaneEndpoint": { "host": endpoint.host, "port": endpoint.port } } }),
        )
        .await?;
    }
    let failed = results.iter().any(Result::is_err);
    summarize(&mut scope, deleting);
    finish(&ctx, &scope, &before, !failed).await?;

    let mut outcomes = Vec::new();
    for result in results {
        outcomes.push(result?);
    }
    ctx.succeeded(&cluster.uid().unwrap_or_default());
    Ok(outcome::action(&outcomes))
}

#[allow(clippy::needless_pass_by_value)] // kube-runtime's error_policy signature
pub fn error_policy(cluster: Arc<Cluster>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.error_action(CONTROLLER, &cluster.uid().unwrap_or_default(), error)
}

/// The Cluster being reconciled and what the phases decided.
pub struct Scope<'a> {
    /// The object as read.
    pub cluster: &'a Cluster,
    /// Its status as the phases leave it.
    pub status: ClusterStatus,
    /// When this reconcile started (for condition transitions).
    pub now: Time,
    /// An endpoint to copy into spec (set by the infrastructure or control-plane phase).
    pub endpoint: Option<ApiEndpoint>,
}

impl Scope<'_> {
    /// Sets a condition.
    pub fn set(&mut self, desired: Desired) {
        conditions::set(
            &mut self.status.conditions,
            desired,
            self.cluster.metadata.generation,
            &self.now,
        );
    }

    fn initialization(&mut self) -> &mut ClusterInitializationStatus {
        self.status
            .initialization
            .get_or_insert_with(Default::default)
    }

    fn namespace(&self) -> String {
        self.cluster.namespace().unwrap_or_default()
    }

    /// The Cluster as a (non-controller) owner, upstream's choice without a topology.
    pub fn owner_reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: CLUSTER_API_VERSION.into(),
            kind: "Cluster".into(),
            name: self.cluster.name_any(),
            uid: self.cluster.uid().unwrap_or_default(),
            block_owner_deletion: Some(true),
            controller: None,
        }
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
        ctx.cluster_watches.ensure(&resolved.resource);
        Ok(resolved)
    }
}

/// The referenced object, adopted (owner reference and cluster label), or
/// `None` if it does not exist.
async fn adopted(
    scope: &Scope<'_>,
    ctx: &Context,
    resolved: &Resolved,
    name: &str,
) -> Result<Option<DynamicObject>, Error> {
    let reference = format!("{} {name:?}", resolved.resource.kind);
    let object = match ctx.external.get(resolved, &scope.namespace(), name).await {
        Ok(object) => object,
        Err(ReferenceError::NotFound { .. }) => return Ok(None),
        Err(source) => return Err(Error::Reference { reference, source }),
    };
    ctx.external
        .adopt(
            resolved,
            &object,
            scope.owner_reference(),
            &scope.cluster.name_any(),
            FIELD_MANAGER,
        )
        .await
        .map_err(|source| Error::Reference { reference, source })?;
    Ok(Some(object))
}

async fn infrastructure(scope: &mut Scope<'_>, ctx: &Context) -> Result<Outcome, Error> {
    let provisioned = scope.cluster.infrastructure_provisioned();
    let Some(reference) = scope.cluster.spec.infrastructure_ref.clone() else {
        scope.initialization().infrastructure_provisioned = Some(true);
        scope.set(Desired::holds(
            ConditionType::InfrastructureReady,
            Reason::Ready,
            "the Cluster has no infrastructureRef",
        ));
        return Ok(Outcome::Continue);
    };
    let resolved = scope.resolve(ctx, &reference).await?;
    let Some(object) = adopted(scope, ctx, &resolved, &reference.name).await? else {
        if provisioned {
            let error = Error::InfrastructureDeleted(reference.to_string());
            scope.set(Desired::fails(
                ConditionType::InfrastructureReady,
                Reason::InfrastructureDeleted,
                error.to_string(),
            ));
            return Err(error);
        }
        let message = format!("{reference} does not exist");
        scope.set(Desired::fails(
            ConditionType::InfrastructureReady,
            Reason::ReferenceNotFound,
            message.clone(),
        ));
        return Ok(Outcome::Wait(Wait::on_change(
            Reason::ReferenceNotFound,
            message,
        )));
    };
    let ready = external::contract_flag(&object, resolved.contract, "provisioned", "ready");
    if let Some((reason, message)) = external::failure(&object) {
        scope.status.deprecated = Some(ClusterDeprecatedStatus {
            v1beta1: Some(FailureFields {
                failure_reason: Some(reason),
                failure_message: Some(format!(
                    "Failure detected from referenced resource {} with name {:?}: {message}",
                    resolved.resource.api_version, reference.name
                )),
            }),
        });
    }
    scope.set(mirrored(
        &object,
        ConditionType::InfrastructureReady,
        ready || provisioned,
        &reference,
    ));
    if !ready && !provisioned {
        return Ok(Outcome::Wait(Wait::on_change(
            Reason::WaitingForInfrastructure,
            format!("waiting for {reference} to be provisioned"),
        )));
    }
    if scope.cluster.endpoint().is_none()
        && let Some(endpoint) = endpoint_of(&object)
    {
        scope.endpoint = Some(endpoint);
    }
    scope.status.failure_domains = failure_domains(&object);
    if !provisioned {
        ctx.publish(
            &scope.cluster.object_ref(&()),
            Reason::Ready,
            format!("{reference} is provisioned"),
        )
        .await;
    }
    // Sticky: a provisioned cluster stays provisioned even if its infrastructure regresses.
    scope.initialization().infrastructure_provisioned = Some(true);
    Ok(Outcome::Continue)
}

async fn control_plane(scope: &mut Scope<'_>, ctx: &Context) -> Result<Outcome, Error> {
    let initialized = scope
        .status
        .initialization
        .as_ref()
        .and_then(|i| i.control_plane_initialized)
        == Some(true);
    let Some(reference) = scope.cluster.spec.control_plane_ref.clone() else {
        // No control-plane provider: the control plane is there once its
        // kubeconfig Secret is, as an externally managed control plane; one
        // is generated from the Cluster's CA if there is none.
        let name = format!("{}-kubeconfig", scope.cluster.name_any());
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &scope.namespace());
        let found = secrets.get_opt(&name).await.map_err(|source| Error::Get {
            kind: "Secret",
            name: name.clone(),
            source,
        })?;
        match found {
            Some(existing) => rotate_kubeconfig(scope, ctx, &secrets, &existing).await?,
            None if generate_kubeconfig(scope, ctx, &secrets, &name).await? => {}
            None => {
                let message = format!(
                    "waiting for the kubeconfig Secret {name:?}, or for a control-plane endpoint and the CA Secret \"{}-ca\" to generate it",
                    scope.cluster.name_any()
                );
                scope.set(Desired::fails(
                    ConditionType::ControlPlaneInitialized,
                    Reason::KubeconfigSecretNotFound,
                    message.clone(),
                ));
                return Ok(Outcome::Wait(Wait::after(
                    Reason::KubeconfigSecretNotFound,
                    message,
                    KUBECONFIG_POLL,
                )));
            }
        }
        if !initialized {
            scope.initialization().control_plane_initialized = Some(true);
            scope.set(Desired::holds(
                ConditionType::ControlPlaneInitialized,
                Reason::Ready,
                format!("kubeconfig Secret {name:?} exists"),
            ));
        }
        return Ok(Outcome::Continue);
    };
    let resolved = scope.resolve(ctx, &reference).await?;
    let Some(object) = adopted(scope, ctx, &resolved, &reference.name).await? else {
        let message = format!("{reference} does not exist");
        scope.set(Desired::fails(
            ConditionType::ControlPlaneInitialized,
            Reason::ReferenceNotFound,
            message.clone(),
        ));
        return Ok(Outcome::Wait(Wait::on_change(
            Reason::ReferenceNotFound,
            message,
        )));
    };
    let ready = external::contract_flag(
        &object,
        resolved.contract,
        "controlPlaneInitialized",
        "initialized",
    );
    scope.set(mirrored(
        &object,
        ConditionType::ControlPlaneInitialized,
        ready || initialized,
        &reference,
    ));
    // As upstream: the control plane's endpoint counts once it is initialized.
    if (ready || initialized)
        && scope.cluster.endpoint().is_none()
        && scope.endpoint.is_none()
        && let Some(endpoint) = endpoint_of(&object)
    {
        scope.endpoint = Some(endpoint);
    }
    if ready {
        scope.initialization().control_plane_initialized = Some(true);
    }
    Ok(Outcome::Continue)
}

/// A kubeconfig for the Cluster made from its CA Secret, as upstream does
/// for a Cluster without a control-plane provider; `None` while the
/// endpoint or the CA Secret is not there.
async fn kubeconfig_from_ca(
    scope: &Scope<'_>,
    secrets: &Api<Secret>,
) -> Result<Option<String>, Error> {
    let Some(endpoint) = scope
        .cluster
        .endpoint()
        .cloned()
        .or_else(|| scope.endpoint.clone())
    else {
        return Ok(None);
    };
    let cluster = scope.cluster.name_any();
    let ca_name = format!("{cluster}-ca");
    let Some(ca) = secrets
        .get_opt(&ca_name)
        .await
        .map_err(|source| Error::Get {
            kind: "Secret",
            name: ca_name.clone(),
            source,
        })?
    else {
        return Ok(None);
    };
    super::kubeconfig::generate(&cluster, &endpoint, &ca)
        .map(Some)
        .map_err(Error::Kubeconfig)
}

/// Creates kubeconfig Secret `name` from the Cluster's CA; false when it
/// cannot be made yet.
async fn generate_kubeconfig(
    scope: &Scope<'_>,
    ctx: &Context,
    secrets: &Api<Secret>,
    name: &str,
) -> Result<bool, Error> {
    let Some(yaml) = kubeconfig_from_ca(scope, secrets).await? else {
        return Ok(false);
    };
    let cluster = scope.cluster.name_any();
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(scope.namespace()),
            labels: Some(BTreeMap::from([(labels::CLUSTER_NAME.to_owned(), cluster)])),
            owner_references: scope.cluster.controller_owner_ref(&()).map(|o| vec![o]),
            ..kube::api::ObjectMeta::default()
        },
        type_: Some("cluster.x-k8s.io/secret".to_owned()),
        data: Some(super::kubeconfig::secret_data(yaml)),
        ..Secret::default()
    };
    match secrets
        .create(&kube::api::PostParams::default(), &secret)
        .await
    {
        Ok(_) => {
            ctx.metrics.write(CONTROLLER, "kubeconfig");
            Ok(true)
        }
        // Made by someone else meanwhile: theirs stands.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(true),
        Err(source) => Err(Error::Write {
            what: "Secret",
            name: name.to_owned(),
            source,
        }),
    }
}

/// Makes the kubeconfig in `existing` anew from the Cluster's CA when its
/// client certificate expires within [`super::kubeconfig::RENEW_BEFORE`]
/// (upstream rotates any kubeconfig it can; one without a client
/// certificate, or without a CA to sign a new one, is left as it is).
async fn rotate_kubeconfig(
    scope: &Scope<'_>,
    ctx: &Context,
    secrets: &Api<Secret>,
    existing: &Secret,
) -> Result<(), Error> {
    let Some(expiry) = super::kubeconfig::client_certificate_expiry(existing) else {
        return Ok(());
    };
    let renew_from = expiry
        .checked_sub(super::kubeconfig::RENEW_BEFORE)
        .unwrap_or(expiry);
    if Timestamp::now() < renew_from {
        return Ok(());
    }
    let Some(yaml) = kubeconfig_from_ca(scope, secrets).await? else {
        return Ok(());
    };
    let name = existing.name_any();
    let patch = json!({ "data": super::kubeconfig::secret_data(yaml) });
    secrets
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|source| Error::Write {
            what: "Secret",
            name: name.clone(),
            source,
        })?;
    ctx.metrics.write(CONTROLLER, "kubeconfig");
    ctx.publish(
        &scope.cluster.object_ref(&()),
        Reason::KubeconfigRotated,
        format!("kubeconfig Secret {name:?} made anew: its client certificate expires at {expiry}"),
    )
    .await;
    Ok(())
}

/// Our condition from the referenced object's `Ready` condition when it has
/// one, else from `holds`.
fn mirrored(
    object: &DynamicObject,
    type_: ConditionType,
    holds: bool,
    reference: &ContractVersionedObjectReference,
) -> Desired {
    let status = ConditionStatus::from_bool(holds);
    let message = external::ready_condition(object)
        .map(|c| c.message)
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| {
            if holds {
                format!("{reference} is ready")
            } else {
                format!("waiting for {reference}")
            }
        });
    Desired {
        type_,
        status,
        reason: match (holds, type_) {
            (true, _) => Reason::Ready,
            (false, ConditionType::ControlPlaneInitialized) => Reason::WaitingForControlPlane,
            (false, _) => Reason::WaitingForInfrastructure,
        },
        message,
    }
}

fn endpoint_of(object: &DynamicObject) -> Option<ApiEndpoint> {
    let endpoint = external::spec_field(object, &["controlPlaneEndpoint"])?;
    let endpoint = ApiEndpoint {
        host: endpoint.get("host")?.as_str()?.to_owned(),
        port: i32::try_from(endpoint.get("port")?.as_i64()?).ok()?,
    };
    endpoint.is_valid().then_some(endpoint)
}

/// The infrastructure's failure domains: the v1beta2 list, or the v1beta1
/// map of name → {controlPlane, attributes}; none if missing.
fn failure_domains(object: &DynamicObject) -> Vec<FailureDomain> {
    let Some(domains) = external::status_field(object, &["failureDomains"]) else {
        return Vec::new();
    };
    let parse = |name: String, value: &Value| FailureDomain {
        name,
        control_plane: value.get("controlPlane").and_then(Value::as_bool),
        attributes: value
            .get("attributes")
            .and_then(Value::as_object)
            .map(|a| {
                a.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect::<BTreeMap<_, _>>()
            })
            .unwrap_or_default(),
    };
    match domains {
        Value::Array(list) => list
            .iter()
            .filter_map(|d| Some(parse(d.get("name")?.as_str()?.to_owned(), d)))
            .collect(),
        Value::Object(map) => map.iter().map(|(name, d)| parse(name.clone(), d)).collect(),
        _ => Vec::new(),
    }
}

/// The replica counts of the Cluster's MachinePools, summed.
async fn workers(cluster: &Cluster, ctx: &Context) -> Result<Option<WorkersStatus>, Error> {
    let pools: Api<MachinePool> =
        Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    let selector = format!("{}={}", labels::CLUSTER_NAME, cluster.name_any());
    let pools = pools
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| Error::Get {
            kind: "MachinePool",
            name: selector,
            source,
        })?;
    if pools.items.is_empty() {
        return Ok(None);
    }
    let sum =
        |f: &dyn Fn(&MachinePool) -> Option<i32>| Some(pools.items.iter().filter_map(f).sum());
    Ok(Some(WorkersStatus {
        desired_replicas: sum(&|p| p.spec.replicas),
        replicas: sum(&|p| p.status.as_ref()?.replicas),
        ready_replicas: sum(&|p| p.status.as_ref()?.ready_replicas),
        available_replicas: sum(&|p| p.status.as_ref()?.available_replicas),
    }))
}

/// Phase and the `Available` summary.
fn summarize(scope: &mut Scope<'_>, deleting: bool) {
    let init = scope.status.initialization.clone().unwrap_or_default();
    let cluster = scope.cluster;
    let observed = Observed {
        deleting,
        has_refs: cluster.spec.infrastructure_ref.is_some()
            || cluster.spec.control_plane_ref.is_some(),
        infrastructure_provisioned: init.infrastructure_provisioned == Some(true),
        endpoint_valid: cluster.endpoint().is_some() || scope.endpoint.is_some(),
    };
    scope.status.phase = Some(phase::phase(observed).as_str().into());
    let missing: Vec<&str> = [
        (!observed.infrastructure_provisioned).then_some("infrastructure not provisioned"),
        (!observed.endpoint_valid).then_some("no control-plane endpoint"),
        (init.control_plane_initialized != Some(true)).then_some("control plane not initialized"),
        deleting.then_some("being deleted"),
    ]
    .into_iter()
    .flatten()
    .collect();
    scope.set(if missing.is_empty() {
        Desired::holds(ConditionType::Available, Reason::Ready, "")
    } else {
        Desired::fails(
            ConditionType::Available,
            Reason::NotReady,
            missing.join(", "),
        )
    });
}

/// Writes the status if it changed (advancing `observedGeneration` only if
/// no phase failed) and announces what changed.
async fn finish(
    ctx: &Context,
    scope: &Scope<'_>,
    before: &ClusterStatus,
    succeeded: bool,
) -> Result<(), Error> {
    let mut status = scope.status.clone();
    if succeeded {
        status.observed_generation = scope.cluster.metadata.generation;
    }
    if status == *before {
        return Ok(());
    }
    write::status(ctx, CONTROLLER, FIELD_MANAGER, scope.cluster, &status).await?;
    let object = scope.cluster.object_ref(&());
    ctx.announce(&object, &before.conditions, &status.conditions)
        .await;
    if status.phase != before.phase
        && let Some(phase) = &status.phase
    {
        ctx.publish(&object, Reason::PhaseChanged, format!("Cluster is {phase}"))
            .await;
    }
    Ok(())
}
