//! MachinePool: v1beta2 ↔ v1beta1 (upstream's
//! `Convert_v1beta2_MachinePool_To_v1beta1_MachinePool`,
//! `ConvertMachinePoolHubToV1Beta1` and their inverses). `minReadySeconds`
//! moves between the machine template and the pool, the deletion timeout
//! between whole seconds and a duration, the v1beta1 counters between the
//! status and `status.deprecated.v1beta1`.

use serde::{Deserialize, Serialize};

use super::{ContractVersions, ConversionError, flag, lost, put_data, refs, restore, take_data};
use crate::cluster::{FailureFields, StatusVersion};
use crate::machinepool::{
    Bootstrap, MachineDeletionSpec, MachinePool, MachinePoolDeprecatedStatus,
    MachinePoolInitializationStatus, MachinePoolSpec, MachinePoolStatus, MachinePoolV1Beta1Status,
    MachineSpec, MachineTemplateSpec,
};
use crate::v1beta1::{self, Duration};

/// What a v1beta1 MachinePool cannot hold of its v1beta2 form, under the
/// paths v1beta2 has for it (the conversion-data annotation).
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data {
    #[serde(default, skip_serializing_if = "is_default")]
    spec: SpecData,
    #[serde(default, skip_serializing_if = "is_default")]
    status: StatusData,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecData {
    #[serde(default, skip_serializing_if = "is_default")]
    template: TemplateData,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TemplateData {
    #[serde(default, skip_serializing_if = "is_default")]
    spec: MachineSpecData,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MachineSpecData {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deletion: Option<MachineDeletionSpec>,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusData {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    initialization: Option<MachinePoolInitializationStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deprecated: Option<MachinePoolDeprecatedStatus>,
    /// v1beta1 has no `status.versions`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    versions: Vec<StatusVersion>,
}

fn is_default<T: Default + PartialEq>(data: &T) -> bool {
    *data == T::default()
}

/// The v1beta1 status fields that v1beta2 keeps in `status.deprecated.v1beta1`.
#[derive(Clone, Debug, Default, PartialEq)]
struct Deprecated {
    conditions: Vec<v1beta1::Condition>,
    failure: FailureFields,
    ready_replicas: Option<i32>,
    available_replicas: Option<i32>,
    unavailable_replicas: Option<i32>,
}

/// A v1beta1 MachinePool from a v1beta2 one; what v1beta1 cannot hold goes
/// to the conversion-data annotation.
pub fn machine_pool_to_v1beta1(
    pool: &MachinePool,
    versions: &dyn ContractVersions,
) -> Result<v1beta1::MachinePool, ConversionError> {
    let namespace = pool.metadata.namespace.as_deref();
    let spec = &pool.spec;
    let machine = &spec.template.spec;
    let config_ref = machine
        .bootstrap
        .config_ref
        .as_ref()
        .map(|r| {
            refs::to_v1beta1(
                r,
                "spec.template.spec.bootstrap.configRef",
                namespace,
                versions,
            )
        })
        .transpose()?;
    let infrastructure_ref = refs::to_v1beta1(
        &machine.infrastructure_ref,
        "spec.template.spec.infrastructureRef",
        namespace,
        versions,
    )?;
    let mut metadata = pool.metadata.clone();
    let data = Data {
        spec: SpecData {
            template: TemplateData {
                spec: MachineSpecData {
                    deletion: lost(
                        machine.deletion.as_ref(),
                        deletion_from_v1beta1(deletion_to_v1beta1(machine.deletion.as_ref()))
                            .as_ref(),
                    ),
                },
            },
        },
        status: pool.status.as_ref().map(lost_status).unwrap_or_default(),
    };
    put_data(&mut metadata, &data)?;
    Ok(v1beta1::MachinePool {
        metadata,
        spec: v1beta1::MachinePoolSpec {
            cluster_name: spec.cluster_name.clone(),
            replicas: spec.replicas,
            template: v1beta1::MachineTemplateSpec {
                metadata: spec.template.metadata.clone(),
                spec: v1beta1::MachineSpec {
                    cluster_name: machine.cluster_name.clone(),
                    bootstrap: v1beta1::Bootstrap {
                        config_ref,
                        data_secret_name: machine.bootstrap.data_secret_name.clone(),
                    },
                    infrastructure_ref,
                    version: machine.version.clone(),
                    node_deletion_timeout: deletion_to_v1beta1(machine.deletion.as_ref()),
                },
            },
            min_ready_seconds: machine.min_ready_seconds,
            provider_id_list: spec.provider_id_list.clone(),
            failure_domains: spec.failure_domains.clone(),
        },
        status: pool.status.as_ref().map(status_to_v1beta1),
    })
}

/// A v1beta2 MachinePool from a v1beta1 one, with what the conversion-data
/// annotation kept restored where it still agrees; the annotation is removed.
pub fn machine_pool_from_v1beta1(
    pool: &v1beta1::MachinePool,
) -> Result<MachinePool, ConversionError> {
    let mut metadata = pool.metadata.clone();
    let kept: Data = take_data(&mut metadata)?.unwrap_or_default();
    let namespace = metadata.namespace.as_deref();
    let spec = &pool.spec;
    let machine = &spec.template.spec;
    let config_ref = machine
        .bootstrap
        .config_ref
        .as_ref()
        .map(|r| {
            refs::from_v1beta1(
                r,
                "spec.template.spec.bootstrap.configRef",
                "MachinePool",
                namespace,
            )
        })
        .transpose()?;
    let infrastructure_ref = refs::from_v1beta1(
        &machine.infrastructure_ref,
        "spec.template.spec.infrastructureRef",
        "MachinePool",
        namespace,
    )?;
    let spec = MachinePoolSpec {
        cluster_name: spec.cluster_name.clone(),
        replicas: spec.replicas,
        template: MachineTemplateSpec {
            metadata: spec.template.metadata.clone(),
            spec: MachineSpec {
                cluster_name: machine.cluster_name.clone(),
                bootstrap: Bootstrap {
                    config_ref,
                    data_secret_name: machine.bootstrap.data_secret_name.clone(),
                },
                infrastructure_ref,
                version: machine.version.clone(),
                min_ready_seconds: spec.min_ready_seconds,
                deletion: restore(
                    kept.spec.template.spec.deletion.map(Some),
                    |deletion| deletion_to_v1beta1(deletion.as_ref()),
                    &machine.node_deletion_timeout,
                    || deletion_from_v1beta1(machine.node_deletion_timeout),
                ),
            },
        },
        provider_id_list: spec.provider_id_list.clone(),
        failure_domains: spec.failure_domains.clone(),
    };
    let status = pool
        .status
        .as_ref()
        .map(|status| status_from_v1beta1(status, kept.status));
    Ok(MachinePool {
        metadata,
        spec,
        status,
    })
}

fn status_to_v1beta1(status: &MachinePoolStatus) -> v1beta1::MachinePoolStatus {
    let (bootstrap_ready, infrastructure_ready) =
        initialization_to_v1beta1(status.initialization.as_ref());
    let deprecated = deprecated_to_v1beta1(status.deprecated.as_ref());
    let has_v1beta2 = !status.conditions.is_empty()
        || status.ready_replicas.is_some()
        || status.available_replicas.is_some()
        || status.up_to_date_replicas.is_some();
    v1beta1::MachinePoolStatus {
        node_refs: status.node_refs.clone(),
        replicas: status.replicas,
        ready_replicas: deprecated.ready_replicas,
        available_replicas: deprecated.available_replicas,
        unavailable_replicas: deprecated.unavailable_replicas,
        failure: deprecated.failure,
        phase: status.phase.clone(),
        bootstrap_ready,
        infrastructure_ready,
        observed_generation: status.observed_generation,
        conditions: deprecated.conditions,
        v1beta2: has_v1beta2.then(|| v1beta1::MachinePoolV1Beta2Status {
            conditions: status.conditions.clone(),
            ready_replicas: status.ready_replicas,
            available_replicas: status.available_replicas,
            up_to_date_replicas: status.up_to_date_replicas,
        }),
    }
}

fn status_from_v1beta1(status: &v1beta1::MachinePoolStatus, kept: StatusData) -> MachinePoolStatus {
    let held = Deprecated {
        conditions: status.conditions.clone(),
        failure: status.failure.clone(),
        ready_replicas: status.ready_replicas,
        available_replicas: status.available_replicas,
        unavailable_replicas: status.unavailable_replicas,
    };
    let v1beta2 = status.v1beta2.clone().unwrap_or_default();
    MachinePoolStatus {
        conditions: v1beta2.conditions,
        initialization: initialization_from_v1beta1(
            status.bootstrap_ready,
            status.infrastructure_ready,
            kept.initialization.as_ref(),
        ),
        node_refs: status.node_refs.clone(),
        replicas: status.replicas,
        ready_replicas: v1beta2.ready_replicas,
        available_replicas: v1beta2.available_replicas,
        up_to_date_replicas: v1beta2.up_to_date_replicas,
        versions: kept.versions,
        phase: status.phase.clone(),
        observed_generation: status.observed_generation,
        deprecated: restore(
            kept.deprecated.map(Some),
            |deprecated| deprecated_to_v1beta1(deprecated.as_ref()),
            &held,
            || deprecated_from_v1beta1(&held),
        ),
    }
}

/// The parts of `status` that converting to v1beta1 and back would not give back.
fn lost_status(status: &MachinePoolStatus) -> StatusData {
    let (bootstrap, infrastructure) = initialization_to_v1beta1(status.initialization.as_ref());
    StatusData {
        initialization: lost(
            status.initialization.as_ref(),
            initialization_from_v1beta1(bootstrap, infrastructure, None).as_ref(),
        ),
        deprecated: lost(
            status.deprecated.as_ref(),
            deprecated_from_v1beta1(&deprecated_to_v1beta1(status.deprecated.as_ref())).as_ref(),
        ),
        versions: status.versions.clone(),
    }
}

/// The deletion timeout as a duration (upstream's `ConvertFromSeconds`).
fn deletion_to_v1beta1(deletion: Option<&MachineDeletionSpec>) -> Option<Duration> {
    deletion
        .and_then(|d| d.node_deletion_timeout_seconds)
        .map(Duration::from_seconds)
}

/// The deletion timeout in whole seconds (upstream's `ConvertToSeconds`).
fn deletion_from_v1beta1(timeout: Option<Duration>) -> Option<MachineDeletionSpec> {
    timeout.map(|timeout| MachineDeletionSpec {
        node_deletion_timeout_seconds: Some(timeout.whole_seconds()),
    })
}

/// `bootstrapReady` and `infrastructureReady`.
fn initialization_to_v1beta1(
    initialization: Option<&MachinePoolInitializationStatus>,
) -> (bool, bool) {
    let initialization = initialization.cloned().unwrap_or_default();
    (
        initialization.bootstrap_data_secret_created == Some(true),
        initialization.infrastructure_provisioned == Some(true),
    )
}

fn initialization_from_v1beta1(
    bootstrap_ready: bool,
    infrastructure_ready: bool,
    kept: Option<&MachinePoolInitializationStatus>,
) -> Option<MachinePoolInitializationStatus> {
    let initialization = MachinePoolInitializationStatus {
        bootstrap_data_secret_created: flag(
            bootstrap_ready,
            kept.and_then(|k| k.bootstrap_data_secret_created),
        ),
        infrastructure_provisioned: flag(
            infrastructure_ready,
            kept.and_then(|k| k.infrastructure_provisioned),
        ),
    };
    (kept.is_some() || initialization != MachinePoolInitializationStatus::default())
        .then_some(initialization)
}

fn deprecated_to_v1beta1(deprecated: Option<&MachinePoolDeprecatedStatus>) -> Deprecated {
    deprecated
        .and_then(|d| d.v1beta1.clone())
        .map(|v| Deprecated {
            conditions: v.conditions,
            failure: v.failure,
            ready_replicas: v.ready_replicas,
            available_replicas: v.available_replicas,
            unavailable_replicas: v.unavailable_replicas,
        })
        .unwrap_or_default()
}

/// None when there is nothing to keep, as the MachinePool controller writes it.
fn deprecated_from_v1beta1(held: &Deprecated) -> Option<MachinePoolDeprecatedStatus> {
    (*held != Deprecated::default()).then(|| MachinePoolDeprecatedStatus {
        v1beta1: Some(MachinePoolV1Beta1Status {
            conditions: held.conditions.clone(),
            failure: held.failure.clone(),
            ready_replicas: held.ready_replicas,
            available_replicas: held.available_replicas,
            unavailable_replicas: held.unavailable_replicas,
        }),
    })
}
