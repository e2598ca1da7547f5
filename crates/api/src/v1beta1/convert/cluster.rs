//! Cluster: v1beta2 ↔ v1beta1 (upstream's `Convert_v1beta2_Cluster_To_v1beta1_Cluster`,
//! `ConvertClusterHubToV1Beta1` and their inverses).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use serde::{Deserialize, Serialize};

use super::{ContractVersions, ConversionError, flag, lost, put_data, refs, restore, take_data};
use crate::cluster::{
    Cluster, ClusterDeprecatedStatus, ClusterInitializationStatus, ClusterSpec, ClusterStatus,
    ClusterV1Beta1Status, FailureDomain, FailureFields,
};
use crate::v1beta1;
use crate::{ApiEndpoint, ContractVersionedObjectReference};

/// What a v1beta1 Cluster cannot hold of its v1beta2 form, under the paths
/// v1beta2 has for it (the conversion-data annotation).
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data {
    #[serde(default, skip_serializing_if = "is_default")]
    status: StatusData,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusData {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    initialization: Option<ClusterInitializationStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure_domains: Option<Vec<FailureDomain>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deprecated: Option<ClusterDeprecatedStatus>,
}

fn is_default(data: &StatusData) -> bool {
    *data == StatusData::default()
}

/// A v1beta1 Cluster from a v1beta2 one; what v1beta1 cannot hold goes to
/// the conversion-data annotation.
pub fn cluster_to_v1beta1(
    cluster: &Cluster,
    versions: &dyn ContractVersions,
) -> Result<v1beta1::Cluster, ConversionError> {
    let namespace = cluster.metadata.namespace.as_deref();
    let reference = |r: Option<&ContractVersionedObjectReference>, field: &str| {
        r.map(|r| refs::to_v1beta1(r, field, namespace, versions))
            .transpose()
    };
    let spec = &cluster.spec;
    let mut metadata = cluster.metadata.clone();
    let data = Data {
        status: cluster.status.as_ref().map(lost_status).unwrap_or_default(),
    };
    put_data(&mut metadata, &data)?;
    Ok(v1beta1::Cluster {
        metadata,
        spec: v1beta1::ClusterSpec {
            paused: spec.paused,
            cluster_network: spec.cluster_network.clone(),
            control_plane_endpoint: spec.control_plane_endpoint.as_ref().map(|e| {
                v1beta1::ApiEndpoint {
                    host: e.host.clone(),
                    port: e.port,
                }
            }),
            control_plane_ref: reference(spec.control_plane_ref.as_ref(), "spec.controlPlaneRef")?,
            infrastructure_ref: reference(
                spec.infrastructure_ref.as_ref(),
                "spec.infrastructureRef",
            )?,
        },
        status: cluster.status.as_ref().map(status_to_v1beta1),
    })
}

/// A v1beta2 Cluster from a v1beta1 one, with what the conversion-data
/// annotation kept restored where it still agrees; the annotation is removed.
pub fn cluster_from_v1beta1(cluster: &v1beta1::Cluster) -> Result<Cluster, ConversionError> {
    let mut metadata = cluster.metadata.clone();
    let kept: Data = take_data(&mut metadata)?.unwrap_or_default();
    let namespace = metadata.namespace.as_deref();
    let reference = |r: Option<&ObjectReference>, field: &str| {
        r.map(|r| refs::from_v1beta1(r, field, "Cluster", namespace))
            .transpose()
    };
    let spec = &cluster.spec;
    let spec = ClusterSpec {
        paused: spec.paused,
        cluster_network: spec.cluster_network.clone(),
        control_plane_endpoint: spec.control_plane_endpoint.as_ref().map(|e| ApiEndpoint {
            host: e.host.clone(),
            port: e.port,
        }),
        control_plane_ref: reference(spec.control_plane_ref.as_ref(), "spec.controlPlaneRef")?,
        infrastructure_ref: reference(spec.infrastructure_ref.as_ref(), "spec.infrastructureRef")?,
    };
    let status = cluster
        .status
        .as_ref()
        .map(|status| status_from_v1beta1(status, kept.status));
    Ok(Cluster {
        metadata,
        spec,
        status,
    })
}

fn status_to_v1beta1(status: &ClusterStatus) -> v1beta1::ClusterStatus {
    let (infrastructure_ready, control_plane_ready) =
        initialization_to_v1beta1(status.initialization.as_ref());
    let (conditions, failure) = deprecated_to_v1beta1(status.deprecated.as_ref());
    let v1beta2 = (!status.conditions.is_empty() || status.workers.is_some()).then(|| {
        v1beta1::ClusterV1Beta2Status {
            conditions: status.conditions.clone(),
            workers: status.workers.clone(),
        }
    });
    v1beta1::ClusterStatus {
        failure_domains: failure_domains_to_v1beta1(&status.failure_domains),
        failure,
        phase: status.phase.clone(),
        infrastructure_ready,
        control_plane_ready,
        conditions,
        observed_generation: status.observed_generation,
        v1beta2,
    }
}

fn status_from_v1beta1(status: &v1beta1::ClusterStatus, kept: StatusData) -> ClusterStatus {
    let held_deprecated = (status.conditions.clone(), status.failure.clone());
    ClusterStatus {
        conditions: status
            .v1beta2
            .as_ref()
            .map(|v| v.conditions.clone())
            .unwrap_or_default(),
        initialization: initialization_from_v1beta1(
            status.infrastructure_ready,
            status.control_plane_ready,
            kept.initialization.as_ref(),
        ),
        failure_domains: restore(
            kept.failure_domains,
            |domains| failure_domains_to_v1beta1(domains),
            &status.failure_domains,
            || failure_domains_from_v1beta1(&status.failure_domains),
        ),
        workers: status.v1beta2.as_ref().and_then(|v| v.workers.clone()),
        phase: status.phase.clone(),
        observed_generation: status.observed_generation,
        deprecated: restore(
            kept.deprecated.map(Some),
            |deprecated| deprecated_to_v1beta1(deprecated.as_ref()),
            &held_deprecated,
            || deprecated_from_v1beta1(&held_deprecated.0, &held_deprecated.1),
        ),
    }
}

/// The parts of `status` that converting to v1beta1 and back would not give back.
fn lost_status(status: &ClusterStatus) -> StatusData {
    let (infrastructure, control_plane) = initialization_to_v1beta1(status.initialization.as_ref());
    let domains = failure_domains_to_v1beta1(&status.failure_domains);
    let (conditions, failure) = deprecated_to_v1beta1(status.deprecated.as_ref());
    StatusData {
        initialization: lost(
            status.initialization.as_ref(),
            initialization_from_v1beta1(infrastructure, control_plane, None).as_ref(),
        ),
        failure_domains: lost(
            Some(&status.failure_domains),
            Some(&failure_domains_from_v1beta1(&domains)),
        ),
        deprecated: lost(
            status.deprecated.as_ref(),
            deprecated_from_v1beta1(&conditions, &failure).as_ref(),
        ),
    }
}

/// `infrastructureReady` and `controlPlaneReady`.
fn initialization_to_v1beta1(initialization: Option<&ClusterInitializationStatus>) -> (bool, bool) {
    let initialization = initialization.cloned().unwrap_or_default();
    (
        initialization.infrastructure_provisioned == Some(true),
        initialization.control_plane_initialized == Some(true),
    )
}

fn initialization_from_v1beta1(
    infrastructure_ready: bool,
    control_plane_ready: bool,
    kept: Option<&ClusterInitializationStatus>,
) -> Option<ClusterInitializationStatus> {
    let initialization = ClusterInitializationStatus {
        infrastructure_provisioned: flag(
            infrastructure_ready,
            kept.and_then(|k| k.infrastructure_provisioned),
        ),
        control_plane_initialized: flag(
            control_plane_ready,
            kept.and_then(|k| k.control_plane_initialized),
        ),
    };
    (kept.is_some() || initialization != ClusterInitializationStatus::default())
        .then_some(initialization)
}

fn failure_domains_to_v1beta1(
    domains: &[FailureDomain],
) -> BTreeMap<String, v1beta1::FailureDomainSpec> {
    domains
        .iter()
        .map(|domain| {
            let spec = v1beta1::FailureDomainSpec {
                control_plane: domain.control_plane,
                attributes: domain.attributes.clone(),
            };
            (domain.name.clone(), spec)
        })
        .collect()
}

/// Sorted by name, as the Cluster controller writes them.
fn failure_domains_from_v1beta1(
    domains: &BTreeMap<String, v1beta1::FailureDomainSpec>,
) -> Vec<FailureDomain> {
    domains
        .iter()
        .map(|(name, spec)| FailureDomain {
            name: name.clone(),
            control_plane: spec.control_plane,
            attributes: spec.attributes.clone(),
        })
        .collect()
}

/// v1beta1 `conditions` and the failure fields.
fn deprecated_to_v1beta1(
    deprecated: Option<&ClusterDeprecatedStatus>,
) -> (Vec<v1beta1::Condition>, FailureFields) {
    deprecated
        .and_then(|d| d.v1beta1.clone())
        .map(|v| (v.conditions, v.failure))
        .unwrap_or_default()
}

/// None when there is nothing to keep, as upstream.
fn deprecated_from_v1beta1(
    conditions: &[v1beta1::Condition],
    failure: &FailureFields,
) -> Option<ClusterDeprecatedStatus> {
    (!conditions.is_empty() || *failure != FailureFields::default()).then(|| {
        ClusterDeprecatedStatus {
            v1beta1: Some(ClusterV1Beta1Status {
                conditions: conditions.to_vec(),
                failure: failure.clone(),
            }),
        }
    })
}
