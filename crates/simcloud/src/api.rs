//! The HTTP API's JSON shapes, exactly as the sim-infrastructure and
//! sim-control-plane guests send and read them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// An instance as the API reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    /// The cloud's id, such as `i-3fa2c1000001`; also the Node's name.
    pub id: String,
    /// `sim://<region>/<id>`.
    #[serde(rename = "providerID")]
    pub provider_id: String,
    /// The pool it belongs to, `<namespace>/<name>`.
    pub pool: String,
    /// Where it is in its life.
    pub state: InstanceState,
    /// The failure domain it was placed in, if one was asked for.
    pub failure_domain: Option<String>,
    /// Its network addresses.
    pub addresses: Vec<Address>,
}

/// Where an instance is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceState {
    /// Booting; becomes `running` or `failed` after the boot delay.
    Pending,
    /// Booted with usable bootstrap data: its node joined.
    Running,
    /// Booted, but its bootstrap data could not make it join.
    Failed,
    /// Being shut down; listed until the termination delay has passed.
    Terminating,
}

/// One network address of an instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Address {
    /// What kind of address it is.
    #[serde(rename = "type")]
    pub kind: AddressType,
    /// The address itself.
    pub address: String,
}

/// The kinds of address the cloud hands out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AddressType {
    /// A private IPv4 address in 10.0.0.0/8.
    #[serde(rename = "InternalIP")]
    InternalIp,
}

/// How a machine interprets its bootstrap data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootstrapFormat {
    /// cloud-init user data, starting with `#cloud-config`.
    CloudConfig,
    /// An Ignition config (JSON).
    Ignition,
    /// A script run at first boot, starting with `#!`.
    ShellScript,
}

/// Body of `POST /v1/regions/{region}/instances`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateInstance {
    /// Makes the create idempotent: a token held by a listed instance
    /// returns that instance instead of creating another.
    pub request_token: String,
    /// The pool, `<namespace>/<name>`.
    pub pool: String,
    /// Base64 of the bootstrap data.
    pub bootstrap_data: String,
    /// How the bootstrap data is interpreted.
    pub bootstrap_format: BootstrapFormat,
    /// The failure domain to place the instance in.
    #[serde(default)]
    pub failure_domain: Option<String>,
    /// Labels its Node registers with.
    #[serde(default)]
    pub node_labels: BTreeMap<String, String>,
    /// The instance type, one of [`crate::instance_types`]; the cloud
    /// records any name, and a Node of an unknown type reports no capacity.
    #[serde(default)]
    pub instance_type: Option<String>,
    /// The Kubernetes version of the machine image, as `v1.31.2`: what its
    /// kubelet reports. Where a real cloud picks an image by version, this
    /// cloud boots one image and takes the version as given.
    #[serde(default)]
    pub kubernetes_version: Option<String>,
}

/// Body of `GET /v1/regions/{region}/instances`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceList {
    /// The instances, oldest first.
    pub instances: Vec<Instance>,
}

/// Body of `PUT /v1/control-planes/{name}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PutControlPlane {
    /// The Kubernetes version to run, `vX.Y.Z` (a pre-release or build
    /// suffix allowed, as Kubernetes versions have). Never a lower minor
    /// than a replica runs.
    pub version: String,
    /// How many replicas to run, 1 to 9.
    pub replicas: u32,
    /// Names the object the control plane is for: the first PUT records
    /// it, and a PUT with another key for the same name is refused (409),
    /// so that two objects never share one control plane.
    pub idempotency_key: String,
}

/// A hosted control plane as the API reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlane {
    /// Its name, as in the path.
    pub name: String,
    /// The version asked for.
    pub version: String,
    /// Replicas that exist, whatever their state.
    pub replicas: u32,
    /// Replicas whose components run.
    pub ready_replicas: u32,
    /// Replicas serving the API.
    pub available_replicas: u32,
    /// Replicas at the version asked for.
    pub up_to_date_replicas: u32,
    /// A replica has run once: the cluster can be joined. Stays true.
    pub initialized: bool,
    /// The oldest version among the replicas, once initialized.
    pub oldest_version: Option<String>,
    /// Where its API server answers.
    pub endpoint: Option<ControlPlaneEndpoint>,
}

/// Where a control plane's API server answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlPlaneEndpoint {
    /// An IP address: `127.0.0.1`, the API servers are local.
    pub host: String,
    /// The loopback port the control plane holds from its creation on.
    pub port: u16,
}

/// Body of every error response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// A short CamelCase code, such as `InstanceLimitExceeded`.
    pub code: String,
    /// What went wrong, for people.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_encodes_the_shape_the_guest_decodes() {
        let instance = Instance {
            id: "i-1".into(),
            provider_id: "sim://local-1/i-1".into(),
            pool: "ns/p".into(),
            state: InstanceState::Running,
            failure_domain: None,
            addresses: vec![Address {
                kind: AddressType::InternalIp,
                address: "10.0.0.1".into(),
            }],
        };
        assert_eq!(
            serde_json::to_value(&instance).expect("encodes"),
            serde_json::json!({
                "id": "i-1", "providerID": "sim://local-1/i-1", "pool": "ns/p", "state": "running",
                "failureDomain": null, "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            })
        );
    }

    #[test]
    fn create_instance_decodes_the_body_the_guest_sends() {
        let body = serde_json::json!({
            "requestToken": "key-0", "pool": "ns/p", "bootstrapData": "I2Nsb3VkLWNvbmZpZwo=",
            "bootstrapFormat": "cloud-config", "failureDomain": null,
            "nodeLabels": {"tier": "web"}, "instanceType": "small",
            "kubernetesVersion": "v1.31.2",
        });
        let create: CreateInstance = serde_json::from_value(body).expect("decodes");
        assert_eq!(create.bootstrap_format, BootstrapFormat::CloudConfig);
        assert_eq!(create.node_labels["tier"], "web");
        assert_eq!(create.instance_type.as_deref(), Some("small"));
        assert_eq!(create.kubernetes_version.as_deref(), Some("v1.31.2"));
    }

    #[test]
    fn control_plane_encodes_the_shape_the_guest_decodes() {
        let plane = ControlPlane {
            name: "ns/cp".into(),
            version: "v1.36.3".into(),
            replicas: 3,
            ready_replicas: 2,
            available_replicas: 2,
            up_to_date_replicas: 1,
            initialized: true,
            oldest_version: Some("v1.35.0".into()),
            endpoint: Some(ControlPlaneEndpoint {
                host: "127.0.0.1".into(),
                port: 40123,
            }),
        };
        assert_eq!(
            serde_json::to_value(&plane).expect("encodes"),
            serde_json::json!({
                "name": "ns/cp", "version": "v1.36.3", "replicas": 3, "readyReplicas": 2,
                "availableReplicas": 2, "upToDateReplicas": 1, "initialized": true,
                "oldestVersion": "v1.35.0", "endpoint": {"host": "127.0.0.1", "port": 40123},
            })
        );
    }

    #[test]
    fn put_control_plane_decodes_the_body_the_guest_sends_and_refuses_unknown_fields() {
        let body =
            serde_json::json!({"version": "v1.36.3", "replicas": 1, "idempotencyKey": "uid-1"});
        let put: PutControlPlane = serde_json::from_value(body).expect("decodes");
        assert_eq!(
            (
                put.version.as_str(),
                put.replicas,
                put.idempotency_key.as_str()
            ),
            ("v1.36.3", 1, "uid-1")
        );
        let extra = serde_json::json!({"version": "v1.36.3", "replicas": 1, "idempotencyKey": "k", "etcd": {}});
        assert!(serde_json::from_value::<PutControlPlane>(extra).is_err());
    }

    #[test]
    fn create_instance_is_refused_when_a_field_is_unknown() {
        let body = serde_json::json!({
            "requestToken": "t", "pool": "ns/p", "bootstrapData": "", "bootstrapFormat": "ignition",
            "userData": "x",
        });
        assert!(serde_json::from_value::<CreateInstance>(body).is_err());
    }
}
