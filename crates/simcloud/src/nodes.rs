//! The simulated kubelets: a Ready Node in the workload cluster for every
//! running instance, removed once the instance stops running.
//!
//! Level-triggered: after every change to the cloud, the running instances
//! are compared with the Nodes registered so far, so a burst of changes
//! costs one pass and a failed call is retried by the next pass.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};

use super::cloud::SimCloud;
use super::error::Error;
use super::instance_types;
use super::inventory::InstanceRecord;

/// Field manager of everything the simulated kubelets write.
const FIELD_MANAGER: &str = "capwasm-sim-kubelet";

/// Retry delays after a failed pass: doubling, capped.
const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(30);

/// Keeps the workload cluster's Nodes in step with `cloud`'s running
/// instances until the task is dropped.
pub(crate) async fn keep_in_step(cloud: SimCloud, client: kube::Client) {
    let nodes: Api<Node> = Api::all(client);
    let mut changes = cloud.subscribe();
    let mut registered = BTreeSet::new();
    let mut retry = FIRST_RETRY;
    loop {
        changes.mark_unchanged();
        let desired: BTreeMap<String, Registration> = cloud
            .running(|record| (record.instance.id.clone(), Registration::of(record)))
            .into_iter()
            .collect();
        let clean = sync(&nodes, &desired, &mut registered).await;
        if clean {
            retry = FIRST_RETRY;
            if changes.changed().await.is_err() {
                return;
            }
        } else {
            tokio::select! {
                () = tokio::time::sleep(retry) => {}
                notified = changes.changed() => if notified.is_err() { return },
            }
            retry = (retry * 2).min(MAX_RETRY);
        }
    }
}

/// One pass: deletes the Nodes of instances no longer running and registers
/// those of new ones. Whether every call succeeded.
async fn sync(
    nodes: &Api<Node>,
    desired: &BTreeMap<String, Registration>,
    registered: &mut BTreeSet<String>,
) -> bool {
    let mut clean = true;
    let gone: Vec<String> = registered
        .iter()
        .filter(|name| !desired.contains_key(*name))
        .cloned()
        .collect();
    for name in gone {
        match delete(nodes, &name).await {
            Ok(()) => {
                registered.remove(&name);
                tracing::info!(
                    node = name,
                    "deleted the Node of an instance that stopped running"
                );
            }
            Err(error) => {
                clean = false;
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "Node not deleted; retrying"
                );
            }
        }
    }
    for (name, registration) in desired {
        if registered.contains(name) {
            continue;
        }
        match register(nodes, name, registration).await {
            Ok(()) => {
                registered.insert(name.clone());
                tracing::info!(node = name, "registered the Node of a running instance");
            }
            Err(error) => {
                clean = false;
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "Node not registered; retrying"
                );
            }
        }
    }
    clean
}

async fn register(nodes: &Api<Node>, name: &str, registration: &Registration) -> Result<(), Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    nodes
        .patch(name, &params, &Patch::Apply(&registration.node))
        .await
        .map_err(|source| Error::RegisterNode {
            node: name.to_owned(),
            source,
        })?;
    nodes
        .patch_status(name, &params, &Patch::Apply(&registration.status))
        .await
        .map_err(|source| Error::MarkNodeReady {
            node: name.to_owned(),
            source,
        })?;
    Ok(())
}

async fn delete(nodes: &Api<Node>, name: &str) -> Result<(), Error> {
    match nodes.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(source) => Err(Error::DeleteNode {
            node: name.to_owned(),
            source,
        }),
    }
}

/// What a kubelet on an instance writes: the Node, then its status.
struct Registration {
    node: Node,
    status: Node,
}

impl Registration {
    fn of(record: &InstanceRecord) -> Self {
        Self {
            node: node(record),
            status: ready_status(record),
        }
    }
}

/// The Node a kubelet on `record` registers: named after the instance, with
/// its providerID, its labels, and the well-known labels a kubelet and cloud
/// provider add unless the labels already set them.
fn node(record: &InstanceRecord) -> Node {
    let instance = &record.instance;
    let mut labels = record.node_labels.clone();
    let well_known = [
        ("kubernetes.io/hostname", Some(&instance.id)),
        ("topology.kubernetes.io/region", Some(&record.region)),
        (
            "topology.kubernetes.io/zone",
            instance.failure_domain.as_ref(),
        ),
        (
            "node.kubernetes.io/instance-type",
            record.instance_type.as_ref(),
        ),
    ];
    for (key, value) in well_known {
        if let Some(value) = value {
            labels
                .entry(key.to_owned())
                .or_insert_with(|| value.clone());
        }
    }
    Node {
        metadata: ObjectMeta {
            name: Some(instance.id.clone()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(instance.provider_id.clone()),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

/// The conditions a healthy kubelet posts: Ready, and no pressure of
/// memory, disk or process ids (Cluster API's Machine reads all four).
fn kubelet_conditions(now: &Time) -> Vec<NodeCondition> {
    [
        (
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
        ),
        (
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        (
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        (
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
    ]
    .into_iter()
    .map(|(type_, status, reason, message)| NodeCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(now.clone()),
    })
    .collect()
}

/// The status a kubelet on `record` posts: its addresses, its version when
/// the image has one, and a healthy kubelet's conditions.
fn ready_status(record: &InstanceRecord) -> Node {
    let instance = &record.instance;
    let now = Time(Timestamp::now());
    let addresses = instance
        .addresses
        .iter()
        .map(|a| NodeAddress {
            type_: "InternalIP".to_owned(),
            address: a.address.clone(),
        })
        .chain([NodeAddress {
            type_: "Hostname".to_owned(),
            address: instance.id.clone(),
        }])
        .collect();
    let shape = instance_types::of(record.instance_type.as_deref());
    let capacity: Option<BTreeMap<_, _>> = shape.as_ref().map(|shape| {
        let quantities = shape.capacity.iter();
        quantities
            .map(|(name, q)| (name.clone(), Quantity(q.clone())))
            .collect()
    });
    let architecture = shape.map_or_else(|| "amd64".to_owned(), |shape| shape.architecture);
    Node {
        metadata: ObjectMeta {
            name: Some(instance.id.clone()),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(NodeStatus {
            addresses: Some(addresses),
            allocatable: capacity.clone(),
            capacity,
            conditions: Some(kubelet_conditions(&now)),
            node_info: record.kubernetes_version.as_ref().map(|version| {
                // A kubelet reports its version with the v.
                let version = format!("v{}", version.strip_prefix('v').unwrap_or(version));
                NodeSystemInfo {
                    kubelet_version: version.clone(),
                    kube_proxy_version: version,
                    operating_system: "linux".to_owned(),
                    architecture,
                    ..NodeSystemInfo::default()
                }
            }),
            ..NodeStatus::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::api::{Address, AddressType, BootstrapFormat, Instance, InstanceState};
    use super::*;

    fn record() -> InstanceRecord {
        InstanceRecord {
            region: "local-1".into(),
            request_token: "t-0".into(),
            instance: Instance {
                id: "i-1".into(),
                provider_id: "sim://local-1/i-1".into(),
                pool: "ns/p".into(),
                state: InstanceState::Running,
                failure_domain: Some("zone-a".into()),
                addresses: vec![Address {
                    kind: AddressType::InternalIp,
                    address: "10.0.0.1".into(),
                }],
            },
            bootstrap_format: BootstrapFormat::CloudConfig,
            bootstrap_data: b"#cloud-config\n".as_slice().into(),
            join_failure: None,
            node_labels: BTreeMap::from([
                ("tier".to_owned(), "web".to_owned()),
                ("topology.kubernetes.io/zone".to_owned(), "mine".to_owned()),
            ]),
            instance_type: None,
            kubernetes_version: Some("1.31.2".into()),
        }
    }

    #[test]
    fn node_carries_provider_id_and_labels_with_the_pools_labels_winning() {
        let node = node(&record());
        assert_eq!(node.metadata.name.as_deref(), Some("i-1"));
        assert_eq!(
            node.spec.and_then(|s| s.provider_id).as_deref(),
            Some("sim://local-1/i-1")
        );
        let labels = node.metadata.labels.unwrap_or_default();
        assert_eq!(labels["tier"], "web");
        assert_eq!(labels["topology.kubernetes.io/zone"], "mine");
        assert_eq!(labels["topology.kubernetes.io/region"], "local-1");
        assert_eq!(labels["kubernetes.io/hostname"], "i-1");
        assert!(!labels.contains_key("node.kubernetes.io/instance-type"));
        assert!(node.status.is_none(), "status goes through its subresource");
    }

    #[test]
    fn ready_status_has_only_status_ready_and_no_pressure() {
        let status = ready_status(&record());
        assert!(status.spec.is_none());
        assert!(status.metadata.labels.is_none());
        let status = status.status.unwrap_or_default();
        let conditions = status.conditions.unwrap_or_default();
        let posted: Vec<_> = conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(
            posted,
            [
                ("Ready", "True"),
                ("MemoryPressure", "False"),
                ("DiskPressure", "False"),
                ("PIDPressure", "False")
            ]
        );
        assert_eq!(status.addresses.map(|a| a.len()), Some(2));
        let info = status.node_info.unwrap_or_default();
        assert_eq!(info.kubelet_version, "v1.31.2");
    }

    #[test]
    fn ready_status_without_a_version_posts_no_node_info() {
        let mut record = record();
        record.kubernetes_version = None;
        let status = ready_status(&record).status.unwrap_or_default();
        assert!(status.node_info.is_none());
    }
}
