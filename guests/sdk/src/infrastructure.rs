//! Writing an infrastructure provider (WIT world `infrastructure-provider`).

pub use crate::bindings::infrastructure::exports::capwasm::provider::clusters::{
    ClusterRequest, ClusterState, FailureDomain,
};
pub use crate::bindings::infrastructure::exports::capwasm::provider::machine_pools::{
    DeleteRequest as PoolDeleteRequest, PoolState, ReconcileRequest as PoolReconcileRequest,
};
pub use crate::bindings::infrastructure::exports::capwasm::provider::node_shapes::{
    DescribeRequest as NodeDescribeRequest, NodeShape,
};
pub use crate::bindings::infrastructure::exports::capwasm::provider::pool_machines::RemoveRequest as PoolRemoveRequest;

use crate::prelude::*;
use crate::types::{DeleteOutcome, Instance, ProviderError};

/// An infrastructure provider. Implement it on a unit struct and export it
/// with [`export_infrastructure_provider!`](crate::export_infrastructure_provider).
///
/// Every call runs in a fresh instance: keep no state between calls. What
/// must survive (instance ids, request tokens) goes into the returned
/// instances, which the host hands back on the next call.
pub trait InfrastructureProvider {
    /// A JSON Schema document (draft 2020-12) for `spec.config`, shared by
    /// the provider's cluster and machine pool objects.
    fn config_schema() -> String;

    /// Brings a machine pool towards `request.replicas` instances. Must be
    /// safe to repeat after a crash at any point: use
    /// `request.idempotency_key` to make cloud calls idempotent.
    fn reconcile_machine_pool(request: PoolReconcileRequest) -> Result<PoolState, ProviderError>;

    /// Removes every instance of a machine pool; returns
    /// [`DeleteOutcome::InProgress`] until they are gone.
    fn delete_machine_pool(request: PoolDeleteRequest) -> Result<DeleteOutcome, ProviderError>;

    /// Starts removing exactly the instances `request.remove` names (each
    /// one of `request.instances`) and returns the pool with them
    /// terminating or gone. The host calls it when their Machines are
    /// deleted, after draining their Nodes; it never asks `reconcile` for
    /// fewer instances than the pool has, so every scale-down comes here.
    /// Must be safe to repeat: an instance the cloud no longer lists is
    /// removed already.
    fn remove_instances(request: PoolRemoveRequest) -> Result<PoolState, ProviderError>;

    /// Whether a Node's providerID belongs to an instance of this provider.
    fn owns(provider_id: &str) -> bool;

    /// The providerID a Node running `instance` reports. By default the one
    /// the instance was recorded with.
    fn provider_id(config: &str, instance: Instance) -> Result<String, ProviderError> {
        let _ = config;
        if instance.provider_id.is_empty() {
            Err(ProviderError::terminal(
                "UnknownProviderId",
                format!("instance {} has no providerID", instance.id),
            ))
        } else {
            Ok(instance.provider_id)
        }
    }

    /// What a node of a pool with `request.config` offers (capacity,
    /// architecture, operating system), for scaling a pool up from zero.
    /// By default the provider does not say: a terminal error, and the
    /// host reports the pool's capacity as unknown.
    fn describe_nodes(request: NodeDescribeRequest) -> Result<NodeShape, ProviderError> {
        let _ = request;
        Err(ProviderError::terminal(
            "NodeShapesUnknown",
            "this provider does not describe the nodes of its pools",
        ))
    }

    /// Brings the cluster infrastructure to what the config asks for. By
    /// default the provider manages no cluster infrastructure: the cluster
    /// is ready at once, with the control-plane endpoint the Cluster names.
    fn reconcile_cluster(request: ClusterRequest) -> Result<ClusterState, ProviderError> {
        Ok(ClusterState {
            control_plane_endpoint: request.cluster.control_plane_endpoint,
            failure_domains: Vec::new(),
            ready: true,
            requeue_after_seconds: None,
        })
    }

    /// Removes the cluster infrastructure. By default there is none.
    fn delete_cluster(request: ClusterRequest) -> Result<DeleteOutcome, ProviderError> {
        let _ = request;
        Ok(DeleteOutcome::Done)
    }
}
