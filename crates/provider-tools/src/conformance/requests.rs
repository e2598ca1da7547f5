//! Requests into providers, as the controllers build them: valid values
//! by default, each changed by the scenario that needs something else.

use crate::wasm::bootstrap::GenerateRequest;
use crate::wasm::clusters::ClusterRequest;
use crate::wasm::control_planes::{ClusterCertificates, ControlPlaneRequest};
use crate::wasm::machine_pools::{DeleteRequest, ReconcileRequest};
use crate::wasm::node_shapes::DescribeRequest;
use crate::wasm::pool_machines::RemoveRequest;
use crate::wasm::types::{ApiEndpoint, BootstrapData, BootstrapFormat, ClusterInfo, ObjectRef};

/// An object in namespace `default` with a UID derived from its name.
pub fn object(name: &str) -> ObjectRef {
    ObjectRef {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("00000000-0000-4000-8000-{:012x}", name.len()),
    }
}

/// Cluster `demo` with endpoint 127.0.0.1:6443 and Kubernetes v1.36.3.
pub fn cluster() -> ClusterInfo {
    ClusterInfo {
        name: "demo".into(),
        namespace: "default".into(),
        control_plane_endpoint: Some(ApiEndpoint {
            host: "127.0.0.1".into(),
            port: 6443,
        }),
        kubernetes_version: Some("v1.36.3".into()),
    }
}

/// `bootstrap.generate` for pool `pool-a` with `config`.
pub fn generate(config: &str) -> GenerateRequest {
    let object = object("pool-a-bootstrap");
    GenerateRequest {
        idempotency_key: object.uid.clone(),
        config_object: object,
        cluster: cluster(),
        config: config.into(),
        owner_name: "pool-a".into(),
        credentials: Vec::new(),
    }
}

/// `machine-pools.reconcile` of `pool-a` to `replicas` with `config` and a small cloud-config.
pub fn reconcile_pool(config: &str, replicas: u32) -> ReconcileRequest {
    let pool = object("pool-a");
    ReconcileRequest {
        idempotency_key: pool.uid.clone(),
        pool,
        cluster: cluster(),
        config: config.into(),
        replicas,
        bootstrap_data: Some(BootstrapData {
            format: BootstrapFormat::CloudConfig,
            value: b"#cloud-config\n".to_vec(),
        }),
        instances: Vec::new(),
        credentials: Vec::new(),
    }
}

/// `control-planes.reconcile` (or `delete`) of control plane `cp-a` at
/// `version` with `replicas` and `config`.
pub fn control_plane(config: &str, version: &str, replicas: u32) -> ControlPlaneRequest {
    let control_plane = object("cp-a");
    ControlPlaneRequest {
        idempotency_key: control_plane.uid.clone(),
        control_plane,
        cluster: cluster(),
        version: version.into(),
        replicas,
        config: config.into(),
        credentials: Vec::new(),
        // No namespace: a host that keeps no certificates.
        certificates: ClusterCertificates {
            namespace: String::new(),
            ca: String::new(),
            etcd: String::new(),
            front_proxy: String::new(),
            service_account: String::new(),
            ca_certificate: String::new(),
        },
    }
}

/// `machine-pools.delete` of `pool-a` with `config`.
pub fn delete_pool(config: &str) -> DeleteRequest {
    let pool = object("pool-a");
    DeleteRequest {
        idempotency_key: pool.uid.clone(),
        pool,
        cluster: cluster(),
        config: config.into(),
        instances: Vec::new(),
        credentials: Vec::new(),
    }
}

/// `pool-machines.remove` of `remove` from `pool-a` with `config`, whose
/// instances the host recorded as `instances`.
pub fn remove_instances(
    config: &str,
    remove: Vec<String>,
    instances: Vec<crate::wasm::types::Instance>,
) -> RemoveRequest {
    let pool = object("pool-a");
    RemoveRequest {
        idempotency_key: pool.uid.clone(),
        pool,
        cluster: cluster(),
        config: config.into(),
        remove,
        instances,
        credentials: Vec::new(),
    }
}

/// `node-shapes.describe` of `pool-a` with `config`.
pub fn describe_nodes(config: &str) -> DescribeRequest {
    DescribeRequest {
        pool: object("pool-a"),
        config: config.into(),
        credentials: Vec::new(),
    }
}

/// `clusters.reconcile` / `clusters.delete` of cluster `demo` with `config`.
pub fn cluster_request(config: &str) -> ClusterRequest {
    let object = object("demo");
    ClusterRequest {
        idempotency_key: object.uid.clone(),
        cluster_object: object,
        cluster: cluster(),
        config: config.into(),
        credentials: Vec::new(),
    }
}
