//! `cluster.x-k8s.io/v1beta1` Cluster and MachinePool, the deprecated
//! version served next to v1beta2 (the stored one) for clients that still
//! speak it, and their conversion as upstream's conversion webhook does it.
//!
//! The types hold upstream's v1beta1 fields for what capwasm's v1beta2 types
//! hold; v1beta1 fields with no v1beta2 home in capwasm are left out of the
//! schema, so the API server prunes them as it prunes them from v1beta2
//! writes. [`convert`] converts one object of a `ConversionReview`.

mod cluster;
mod convert;
mod duration;
mod machinepool;

pub use cluster::{
    ApiEndpoint, Cluster, ClusterSpec, ClusterStatus, ClusterV1Beta2Status, FailureDomainSpec,
};
pub use convert::{
    BoxError, ContractVersions, ConversionError, cluster_from_v1beta1, cluster_to_v1beta1, convert,
    machine_pool_from_v1beta1, machine_pool_to_v1beta1,
};
pub use duration::{Duration, DurationError};
pub use machinepool::{
    Bootstrap, MachinePool, MachinePoolSpec, MachinePoolStatus, MachinePoolV1Beta2Status,
    MachineSpec, MachineTemplateSpec,
};

/// The v1beta1 condition (with a severity); v1beta2 keeps it in `status.deprecated.v1beta1.conditions`.
pub use crate::cluster::V1Beta1Condition as Condition;

/// This version's `apiVersion`.
pub const API_VERSION: &str = "cluster.x-k8s.io/v1beta1";
