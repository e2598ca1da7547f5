//! Round trips over generated objects in both directions (as upstream's fuzz
//! conversion tests), worked examples, and every refusal; the shared lookup
//! of contract versions here.

mod examples;
mod generate;
mod refusals;
mod round_trips;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition as MetaCondition, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::jiff::Timestamp;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::cluster::{
    ClusterDeprecatedStatus, ClusterInitializationStatus, ClusterNetwork, ClusterSpec,
    ClusterStatus, ClusterV1Beta1Status, FailureDomain, FailureFields, NetworkRanges,
    StatusVersion, WorkersStatus,
};
use crate::machinepool::{
    Bootstrap, MachineDeletionSpec, MachinePoolDeprecatedStatus, MachinePoolInitializationStatus,
    MachinePoolSpec, MachinePoolStatus, MachinePoolV1Beta1Status, MachineSpec, MachineTemplateSpec,
    TemplateMetadata,
};
use crate::v1beta1::{self, Duration};
use crate::{ApiEndpoint, ContractVersionedObjectReference};

/// Referenced kinds and the version their CRD's contract label picks (upstream's test kinds).
const KINDS: [(&str, &str, &str); 4] = [
    (
        "controlplane.cluster.x-k8s.io",
        "v1beta4",
        "KubeadmControlPlane",
    ),
    (
        "controlplane.cluster.x-k8s.io",
        "v1beta7",
        "AWSManagedControlPlane",
    ),
    ("infrastructure.cluster.x-k8s.io", "v1alpha1", "WasmCluster"),
    (
        "infrastructure.cluster.x-k8s.io",
        "v1alpha1",
        "WasmMachinePool",
    ),
];

fn versions(reference: &ContractVersionedObjectReference) -> Result<String, BoxError> {
    KINDS
        .iter()
        .find(|(group, _, kind)| *group == reference.api_group && *kind == reference.kind)
        .map(|(_, version, _)| (*version).to_owned())
        .ok_or_else(|| "no CustomResourceDefinition serves the kind".into())
}

fn to_value<T: Serialize>(object: &T) -> Value {
    serde_json::to_value(object).unwrap()
}
