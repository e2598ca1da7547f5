//! The Cluster's infrastructure phase: adopt the infrastructure object,
//! follow its readiness (sticky once provisioned, as upstream), and take its
//! endpoint and failure domains; then record the endpoint in spec.

use std::collections::BTreeMap;

use kube::ResourceExt as _;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use crate::api::cluster::{
    ClusterDeprecatedStatus, ClusterInitializationStatus, FIELD_MANAGER, FailureDomain,
    FailureFields,
};
use crate::api::conditions::Desired;
use crate::api::{ApiEndpoint, CLUSTER_API_VERSION, Cluster, ConditionType, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::external::Adopter;
use crate::controllers::external::{self, Mirror, ReferenceError};
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::reconciler::Scope;

pub async fn run(scope: &mut Scope<Cluster>, ctx: &Context) -> Result<Outcome, Error> {
    let provisioned = scope.object.infrastructure_provisioned();
    let Some(reference) = scope.object.spec.infrastructure_ref.clone() else {
        initialization(scope).infrastructure_provisioned = Some(true);
        scope.set(Desired::holds(
            ConditionType::InfrastructureReady,
            Reason::Ready,
            "the Cluster has no infrastructureRef",
        ));
        return Ok(Outcome::Continue);
    };
    let (resolved, object) = match scope.adopt(ctx, &reference).await {
        Ok(found) => found,
        Err(Error::Reference {
            source: ReferenceError::NotFound { .. },
            ..
        }) if provisioned => {
            let error = Error::InfrastructureDeleted(reference.to_string());
            return Err(scope.failed(ConditionType::InfrastructureReady, error));
        }
        Err(Error::Reference {
            source: ReferenceError::NotFound { .. },
            ..
        }) => {
            let message = format!("{reference} does not exist");
            return Ok(scope.waits(Desired::fails(
                ConditionType::InfrastructureReady,
                Reason::ReferenceNotFound,
                message,
            )));
        }
        Err(error) => return Err(error),
    };
    let ready = external::contract_flag(&object, resolved.contract, "provisioned", "ready");
    if let Some((reason, message)) = external::failure(&object) {
        // Only the failure fields: v1beta1 conditions a client wrote stay.
        scope
            .status
            .deprecated
            .get_or_insert_with(ClusterDeprecatedStatus::default)
            .v1beta1
            .get_or_insert_with(Default::default)
            .failure = FailureFields {
            failure_reason: Some(reason),
            failure_message: Some(format!(
                "Failure detected from referenced resource {} with name {:?}: {message}",
                resolved.resource.api_version, reference.name
            )),
        };
    }
    scope.set(
        Mirror {
            type_: ConditionType::InfrastructureReady,
            ready: Reason::Ready,
            waiting: Reason::WaitingForInfrastructure,
        }
        .of(&object, ready || provisioned, &reference),
    );
    if !ready && !provisioned {
        return Ok(Outcome::Wait(Wait::on_change(
            Reason::WaitingForInfrastructure,
            format!("waiting for {reference} to be provisioned"),
        )));
    }
    if scope.object.endpoint().is_none()
        && let Some(endpoint) = endpoint_of(&object)
    {
        scope.found.endpoint = Some(endpoint);
    }
    scope.status.failure_domains = failure_domains(&object);
    if !provisioned {
        ctx.publish(
            &scope.reference(),
            Reason::Ready,
            format!("{reference} is provisioned"),
        )
        .await;
    }
    // Sticky: a provisioned cluster stays provisioned even if its infrastructure regresses.
    initialization(scope).infrastructure_provisioned = Some(true);
    Ok(Outcome::Continue)
}

/// Records the endpoint a phase found in spec.
pub async fn record_endpoint(scope: &mut Scope<Cluster>, ctx: &Context) -> Result<Outcome, Error> {
    let Some(endpoint) = scope.found.endpoint.clone() else {
        return Ok(Outcome::Continue);
    };
    let spec = json!({ "spec": { "controlPlaneEndpoint": { "host": endpoint.host, "port": endpoint.port } } });
    scope.apply(ctx, "spec", spec).await?;
    Ok(Outcome::Continue)
}

impl Scope<Cluster> {
    /// The referenced object, adopted: the Cluster as a (non-controller)
    /// owner without blocking its deletion, upstream's choice without a
    /// topology, and the cluster-name label.
    pub async fn adopt(
        &mut self,
        ctx: &Context,
        reference: &crate::api::ContractVersionedObjectReference,
    ) -> Result<(external::Resolved, std::sync::Arc<DynamicObject>), Error> {
        let name = self.object.name_any();
        let adopter = Adopter {
            owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: CLUSTER_API_VERSION.into(),
                kind: "Cluster".into(),
                name: name.clone(),
                uid: self.object.uid().unwrap_or_default(),
                block_owner_deletion: None,
                controller: None,
            },
            cluster: &name,
            manager: FIELD_MANAGER,
        };
        self.adopted(ctx, reference, adopter).await
    }
}

/// The status's milestones, created on first use.
pub fn initialization(scope: &mut Scope<Cluster>) -> &mut ClusterInitializationStatus {
    scope
        .status
        .initialization
        .get_or_insert_with(Default::default)
}

/// A valid `spec.controlPlaneEndpoint` of a referenced object.
pub fn endpoint_of(object: &DynamicObject) -> Option<ApiEndpoint> {
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
