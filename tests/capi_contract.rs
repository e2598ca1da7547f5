//! Upstream Cluster API's MachinePool and Cluster controller behaviour, as
//! numbered given→expect checks (numbered as in §5 of the project's notes
//! on upstream, capi-behavior.md, kept outside this repository), against
//! generic provider kinds the test plays itself: it writes their status the
//! way a bootstrap or infrastructure provider would, and Nodes in the
//! workload cluster the way a kubelet would.
//!
//! Each test's doc comment states the checks it covers, in full, and where
//! upstream implements them (v1.14, `core/reconcilers/machinepool/` and
//! `core/reconcilers/cluster/`), so that a test can be judged from this
//! file. capwasm writes upstream's v1beta2 status: condition types are the
//! v1beta2 names (`BootstrapConfigReady` for v1beta1's `BootstrapReady`),
//! readiness is `status.initialization.*`, and the node-based counters and
//! failure fields of v1beta1 sit under `status.deprecated.v1beta1`. Where
//! capwasm differs from upstream on purpose, the test says so and checks
//! what capwasm does.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use capwasm::api::{ContractVersionedObjectReference, MachinePool};
use capwasm::testing::objects::{ClusterBuilder, MachinePoolBuilder};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Secret, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch,
    PatchParams, PostParams,
};
use kube::{Api, Client};
use serde_json::{Value, json};
use testenv::flows::{self, Apis, condition, create, wait_for, wait_for_event};
use testenv::{Stack, TestEnv};

const BOOTSTRAP: &str = "bootstrap.test.capwasm.dev";
const INFRASTRUCTURE: &str = "infrastructure.test.capwasm.dev";

/// A namespace with the test kinds installed, a Cluster `c1` (no
/// infrastructure, an endpoint, a kubeconfig for the workload server) and
/// the shared operator running.
struct World {
    client: Client,
    workload: Client,
    ns: String,
    apis: Apis,
}

impl World {
    async fn new(prefix: &str) -> Self {
        let env = TestEnv::shared().await.unwrap();
        Stack::shared().await.unwrap();
        let client = env.management().client().unwrap();
        let fixtures =
            std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/contract"));
        testenv::install_crds(&client, &[fixtures]).await.unwrap();
        let ns = env.management().create_namespace(prefix).await.unwrap();
        let workload = env.workload().unwrap();
        create(&client, &workload.kubeconfig_secret(&ns, "c1").unwrap())
            .await
            .unwrap();
        create(
            &client,
            &ClusterBuilder::new(&ns, "c1")
                .no_infrastructure()
                .endpoint("127.0.0.1", 6443)
                .build(),
        )
        .await
        .unwrap();
        let apis = Apis::new(&client, &ns);
        Self {
            workload: workload.client().unwrap(),
            client,
            ns,
            apis,
        }
    }

    fn resource(group: &str, kind: &str) -> ApiResource {
        let gvk = GroupVersionKind::gvk(group, "v1alpha1", kind);
        ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()))
    }

    fn api(&self, group: &str, kind: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.ns, &Self::resource(group, kind))
    }

    /// Creates `kind` `name` with `spec`, and sets its `status` as its provider would.
    async fn provider_object(
        &self,
        group: &str,
        kind: &str,
        name: &str,
        spec: Value,
        status: Value,
    ) {
        let api = self.api(group, kind);
        let mut object = DynamicObject::new(name, &Self::resource(group, kind)).within(&self.ns);
        object.data = json!({ "spec": spec });
        api.create(&PostParams::default(), &object).await.unwrap();
        self.set_status(group, kind, name, status).await;
    }

    async fn set_status(&self, group: &str, kind: &str, name: &str, status: Value) {
        self.api(group, kind)
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .unwrap();
    }

    /// A pool of `c1` whose bootstrap and infrastructure objects are the test kinds of its own name.
    fn pool(&self, name: &str, bootstrap_kind: &str) -> MachinePoolBuilder {
        MachinePoolBuilder::new(&self.ns, name, "c1")
            .config_ref(ContractVersionedObjectReference::new(
                BOOTSTRAP,
                bootstrap_kind,
                name,
            ))
            .infrastructure_ref(ContractVersionedObjectReference::new(
                INFRASTRUCTURE,
                "TestMachinePool",
                name,
            ))
    }

    /// Pool `name` of `replicas` whose bootstrap data is ready, and its
    /// TestMachinePool with `spec` and `status`.
    async fn ready_pool(&self, name: &str, replicas: i32, spec: Value, status: Value) {
        let ready =
            json!({ "initialization": { "dataSecretCreated": true }, "dataSecretName": "data" });
        self.provider_object(BOOTSTRAP, "TestBootstrapConfig", name, json!({}), ready)
            .await;
        self.provider_object(INFRASTRUCTURE, "TestMachinePool", name, spec, status)
            .await;
        create(
            &self.client,
            &self
                .pool(name, "TestBootstrapConfig")
                .replicas(replicas)
                .build(),
        )
        .await
        .unwrap();
    }

    /// Sets pool `name`'s providerID list and replica count as its infrastructure provider would.
    async fn provide(&self, name: &str, ids: &[&str]) {
        self.api(INFRASTRUCTURE, "TestMachinePool")
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "providerIDList": ids } })),
            )
            .await
            .unwrap();
        self.set_status(
            INFRASTRUCTURE,
            "TestMachinePool",
            name,
            json!({ "replicas": ids.len() }),
        )
        .await;
    }

    /// Scales pool `name` through its scale subresource.
    async fn scale(&self, name: &str, replicas: i32) {
        flows::scale(&self.apis.pools, name, replicas)
            .await
            .unwrap();
    }

    /// Waits until pool `name` is Running.
    async fn running(&self, name: &str) -> MachinePool {
        self.pool_until(name, "Running", |p| {
            status_of(p).phase.as_deref() == Some("Running")
        })
        .await
    }

    /// Waits until `done` holds for pool `name`'s status.
    async fn pool_until(
        &self,
        name: &str,
        what: &str,
        done: impl Fn(&MachinePool) -> bool,
    ) -> MachinePool {
        wait_for(&self.apis.pools, name, what, |p: Option<&MachinePool>| {
            p.is_some_and(&done)
        })
        .await
        .unwrap()
    }

    /// A Node named `name` with `provider_id`, Ready, in the workload
    /// cluster, as written.
    async fn node(&self, name: &str, provider_id: &str, taint: bool) -> Node {
        let nodes: Api<Node> = Api::all(self.workload.clone());
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(provider_id.into()),
                taints: taint.then(|| {
                    vec![Taint {
                        key: "node.cluster.x-k8s.io/uninitialized".into(),
                        effect: "NoSchedule".into(),
                        ..Taint::default()
                    }]
                }),
                ..NodeSpec::default()
            }),
            status: None,
        };
        nodes.create(&PostParams::default(), &node).await.unwrap();
        let ready = NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(Time(k8s_openapi::jiff::Timestamp::now())),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        };
        nodes
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": ready })),
            )
            .await
            .unwrap()
    }
}

fn status_of(pool: &MachinePool) -> capwasm::api::MachinePoolStatus {
    pool.status.clone().unwrap_or_default()
}

fn has_condition(pool: &MachinePool, type_: &str, status: &str, reason: &str) -> bool {
    condition(&status_of(pool).conditions, type_)
        .is_some_and(|(s, r, _)| s == status && r == reason)
}

/// The pool's node-based counters (v1beta1's `readyReplicas`,
/// `availableReplicas`, `unavailableReplicas`; omitted when zero, as
/// upstream's `omitempty` integers).
fn node_counts(pool: &MachinePool) -> (i32, i32, i32) {
    let v1beta1 = status_of(pool)
        .deprecated
        .and_then(|d| d.v1beta1)
        .unwrap_or_default();
    (
        v1beta1.ready_replicas.unwrap_or(0),
        v1beta1.available_replicas.unwrap_or(0),
        v1beta1.unavailable_replicas.unwrap_or(0),
    )
}

/// The pool's `status.initialization` milestones: (bootstrap data Secret
/// created, infrastructure provisioned).
fn milestones(pool: &MachinePool) -> (Option<bool>, Option<bool>) {
    let init = status_of(pool).initialization.unwrap_or_default();
    (
        init.bootstrap_data_secret_created,
        init.infrastructure_provisioned,
    )
}

/// Check 1: given a MachinePool without the finalizer, not being deleted,
/// expect finalizer `machinepool.cluster.x-k8s.io` appended and the
/// finalizers it had kept. (Upstream then ends that reconcile and runs the
/// phases on the next; that early return is not visible from outside.)
///
/// Check 3: on any reconcile, expect label
/// `cluster.x-k8s.io/cluster-name=<spec.clusterName>` and a non-controller
/// owner reference to the Cluster by name and UID; a stale reference with
/// the same name and an old UID is replaced, not kept beside the new one.
///
/// Upstream: `Reconcile` in `machinepool_controller.go` (the finalizer
/// first, then the cluster-name label and the Cluster as owner).
#[tokio::test]
async fn check_01_03_finalizer_label_and_owner_are_added_keeping_others_and_replacing_a_stale_owner()
 {
    let world = World::new("c01").await;
    let mut pool = world.pool("p", "TestBootstrapConfig").build();
    pool.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    pool.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "cluster.x-k8s.io/v1beta2".into(),
        kind: "Cluster".into(),
        name: "c1".into(),
        uid: "00000000-0000-0000-0000-0000000000aa".into(),
        ..OwnerReference::default()
    }]);
    create(&world.client, &pool).await.unwrap();
    let cluster_uid = world
        .apis
        .clusters
        .get("c1")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let pool = world
        .pool_until(
            "p",
            "the pool has our finalizer and the Cluster as owner",
            |p| {
                p.metadata
                    .finalizers
                    .as_ref()
                    .is_some_and(|f| f.iter().any(|f| f == "machinepool.cluster.x-k8s.io"))
                    && p.metadata
                        .owner_references
                        .as_ref()
                        .is_some_and(|o| o.iter().any(|o| o.uid == cluster_uid))
            },
        )
        .await;
    let finalizers = pool.metadata.finalizers.unwrap();
    assert!(
        finalizers.contains(&"example.com/keep".to_owned()),
        "{finalizers:?}"
    );
    let owners: Vec<_> = pool
        .metadata
        .owner_references
        .unwrap()
        .into_iter()
        .filter(|o| o.kind == "Cluster")
        .collect();
    assert_eq!(
        owners.len(),
        1,
        "the stale reference is replaced, not kept beside the new one: {owners:?}"
    );
    assert_eq!(owners[0].controller, None);
    assert_eq!(
        pool.metadata.labels.unwrap()["cluster.x-k8s.io/cluster-name"],
        "c1"
    );
}

/// Check 8: given a configRef to a config whose `status.ready` is false,
/// expect bootstrap not ready (`status.initialization.bootstrapDataSecretCreated`
/// false), condition `BootstrapConfigReady` False/`WaitingForDataSecret`, and
/// `spec.template.spec.bootstrap.dataSecretName` untouched.
///
/// Check 9: given the config ready with `status.dataSecretName: x`, expect
/// `spec.template.spec.bootstrap.dataSecretName = x`, bootstrap ready, and
/// the config controlled by the MachinePool (controller owner reference)
/// and labelled `cluster.x-k8s.io/cluster-name`.
///
/// Check 15: given a config whose CRD carries the v1beta2 contract label,
/// with `status.initialization.dataSecretCreated: true` and no
/// `status.ready`, expect it treated as ready.
///
/// Upstream: the bootstrap phase and `reconcileExternal` in
/// `machinepool_controller_phases.go` (readiness by the contract version
/// read from the CRD's `cluster.x-k8s.io/<contract>` label).
#[tokio::test]
async fn check_08_09_15_bootstrap_readiness_is_read_by_contract_version() {
    let world = World::new("c08").await;
    // v1beta1 contract: status.ready, not ready yet.
    world
        .provider_object(
            BOOTSTRAP,
            "TestV1Beta1BootstrapConfig",
            "p1",
            json!({}),
            json!({ "ready": false }),
        )
        .await;
    create(
        &world.client,
        &world.pool("p1", "TestV1Beta1BootstrapConfig").build(),
    )
    .await
    .unwrap();
    let waiting = world
        .pool_until(
            "p1",
            "BootstrapConfigReady False/WaitingForDataSecret",
            |p| has_condition(p, "BootstrapConfigReady", "False", "WaitingForDataSecret"),
        )
        .await;
    assert_eq!(waiting.spec.template.spec.bootstrap.data_secret_name, None);
    assert_eq!(milestones(&waiting).0, Some(false), "bootstrap not ready");

    // v1beta2 contract: initialization.dataSecretCreated, no status.ready at all.
    world
        .provider_object(
            BOOTSTRAP,
            "TestBootstrapConfig",
            "p2",
            json!({}),
            json!({ "initialization": { "dataSecretCreated": true }, "dataSecretName": "p2-data" }),
        )
        .await;
    create(
        &world.client,
        &world.pool("p2", "TestBootstrapConfig").build(),
    )
    .await
    .unwrap();
    let ready = world
        .pool_until("p2", "the data Secret name is copied", |p| {
            p.spec.template.spec.bootstrap.data_secret_name.as_deref() == Some("p2-data")
                && status_of(p)
                    .initialization
                    .is_some_and(|i| i.bootstrap_data_secret_created == Some(true))
        })
        .await;
    assert!(has_condition(
        &ready,
        "BootstrapConfigReady",
        "True",
        "DataSecretAvailable"
    ));
    // The config is now controlled by its pool and labelled with the cluster.
    let config = world
        .api(BOOTSTRAP, "TestBootstrapConfig")
        .get("p2")
        .await
        .unwrap();
    let owner = &config.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("MachinePool", "p2", Some(true))
    );
    assert_eq!(
        config.metadata.labels.unwrap()["cluster.x-k8s.io/cluster-name"],
        "c1"
    );
}

/// Check 10: given a config that is ready but has no
/// `status.dataSecretName`, expect a reconcile error.
///
/// Check 14: given a config already controlled by another owner, expect a
/// reconcile error (the controller owner reference cannot be set).
///
/// A reconcile error shows as the condition naming the cause and
/// `status.observedGeneration` never set (check 7).
///
/// Upstream: the bootstrap phase and `reconcileExternal` in
/// `machinepool_controller_phases.go`.
#[tokio::test]
async fn check_10_14_a_ready_config_without_secret_and_a_config_owned_by_another_are_errors() {
    let world = World::new("c10").await;
    world
        .provider_object(
            BOOTSTRAP,
            "TestBootstrapConfig",
            "p1",
            json!({}),
            json!({ "initialization": { "dataSecretCreated": true } }),
        )
        .await;
    create(
        &world.client,
        &world.pool("p1", "TestBootstrapConfig").build(),
    )
    .await
    .unwrap();
    let missing = world
        .pool_until(
            "p1",
            "BootstrapConfigReady names the missing dataSecretName",
            |p| {
                condition(&status_of(p).conditions, "BootstrapConfigReady")
                    .is_some_and(|(s, _, m)| s == "False" && m.contains("dataSecretName"))
            },
        )
        .await;
    assert_eq!(missing.spec.template.spec.bootstrap.data_secret_name, None);
    assert_eq!(
        status_of(&missing).observed_generation,
        None,
        "an error holds it back"
    );

    let api = world.api(BOOTSTRAP, "TestBootstrapConfig");
    let mut owned = DynamicObject::new("p2", &World::resource(BOOTSTRAP, "TestBootstrapConfig"))
        .within(&world.ns);
    owned.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "example.com/v1".into(),
        kind: "Other".into(),
        name: "someone".into(),
        uid: "00000000-0000-0000-0000-0000000000bb".into(),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    owned.data = json!({ "spec": {} });
    api.create(&PostParams::default(), &owned).await.unwrap();
    create(
        &world.client,
        &world.pool("p2", "TestBootstrapConfig").build(),
    )
    .await
    .unwrap();
    let refused = world
        .pool_until(
            "p2",
            "BootstrapConfigReady False/ReferenceOwnedByOther",
            |p| has_condition(p, "BootstrapConfigReady", "False", "ReferenceOwnedByOther"),
        )
        .await;
    let (_, _, message) =
        condition(&status_of(&refused).conditions, "BootstrapConfigReady").unwrap();
    assert!(
        message.contains("Other") && message.contains("someone"),
        "{message}"
    );
    assert_eq!(
        status_of(&refused).observed_generation,
        None,
        "an error holds it back"
    );
}

/// Check 16: given the infrastructure object's `status.ready` false, expect
/// infrastructure not ready (`status.initialization.infrastructureProvisioned`
/// false) and neither its `spec.providerIDList` nor its `status.replicas`
/// copied.
///
/// Check 18: given it ready with an empty providerIDList and
/// `status.replicas: 3`, expect the list not copied: the pool waits for it.
/// (Upstream copies `status.replicas` before it looks at the list, and so
/// does capwasm.)
///
/// Check 17: given it ready with `spec.providerIDList: [a, b]` and
/// `status.replicas: 2`, expect the pool's `spec.providerIDList = [a, b]`
/// and `status.replicas = 2`, and, the list having changed, the ready and
/// available counts reset to 0 (unavailable = replicas) until Nodes are
/// matched.
///
/// Upstream: the infrastructure phase in `machinepool_controller_phases.go`.
#[tokio::test]
async fn check_16_17_18_infrastructure_fields_are_copied_only_once_ready_and_listed() {
    let world = World::new("c16").await;
    world
        .ready_pool(
            "p",
            2,
            json!({ "providerIDList": ["t://a"] }),
            json!({ "ready": false, "replicas": 1 }),
        )
        .await;
    let not_ready = world
        .pool_until("p", "InfrastructureReady False", |p| {
            has_condition(
                p,
                "InfrastructureReady",
                "False",
                "WaitingForInfrastructure",
            )
        })
        .await;
    assert!(not_ready.spec.provider_id_list.is_empty());
    assert_eq!(status_of(&not_ready).replicas, None);
    assert_eq!(milestones(&not_ready).1, Some(false));
    assert_eq!(status_of(&not_ready).phase.as_deref(), Some("Provisioning"));

    // Ready, but replicas without a list: wait, copy nothing.
    let infra_api = world.api(INFRASTRUCTURE, "TestMachinePool");
    infra_api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "providerIDList": [] } })),
        )
        .await
        .unwrap();
    world
        .set_status(
            INFRASTRUCTURE,
            "TestMachinePool",
            "p",
            json!({ "ready": true, "replicas": 3 }),
        )
        .await;
    let waiting = world
        .pool_until("p", "InfrastructureReady True", |p| {
            has_condition(p, "InfrastructureReady", "True", "Ready")
        })
        .await;
    assert!(waiting.spec.provider_id_list.is_empty());
    assert_eq!(status_of(&waiting).replicas, Some(3));

    infra_api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "providerIDList": ["t://a", "t://b"] } })),
        )
        .await
        .unwrap();
    world
        .set_status(
            INFRASTRUCTURE,
            "TestMachinePool",
            "p",
            json!({ "ready": true, "replicas": 2 }),
        )
        .await;
    let copied = world
        .pool_until("p", "the list and replicas are copied", |p| {
            p.spec.provider_id_list == ["t://a", "t://b"] && status_of(p).replicas == Some(2)
        })
        .await;
    assert_eq!(
        node_counts(&copied),
        (0, 0, 2),
        "ready, available, unavailable"
    );
    // No Node has these IDs: nothing is referenced (check 30).
    assert!(status_of(&copied).node_refs.is_empty());
    assert_eq!(status_of(&copied).phase.as_deref(), Some("ScalingUp"));
}

/// Check 24: given an infrastructure object with a `Ready` condition, expect
/// `InfrastructureReady` to mirror it. capwasm mirrors its status (through
/// the contract's readiness field) and its message; the reason stays one of
/// capwasm's own closed set (`Ready`), as every condition reason it writes.
///
/// Check 25: given providerIDList `[p1, p2]` and Nodes with exactly those
/// providerIDs, Ready, expect `status.nodeRefs` `[node(p1), node(p2)]` in
/// list order with their UIDs, ready 2 and available 2, `ReplicasReady`
/// True, and with `spec.replicas` 2 the phase `Running`.
///
/// Check 32: expect the referenced Nodes annotated `cluster-name`,
/// `cluster-namespace`, `owner-kind=MachinePool` and `owner-name`, and rid of
/// the taint `node.cluster.x-k8s.io/uninitialized:NoSchedule`; a Node
/// already so is not written; Node labels are left alone.
///
/// Upstream: `reconcileNodeRefs` in `machinepool_controller_noderef.go`
/// (check 24: the infrastructure phase in `machinepool_controller_phases.go`).
#[tokio::test]
async fn check_24_25_32_nodes_are_referenced_in_list_order_marked_and_mirrored() {
    let world = World::new("c25").await;
    let ns = world.ns.clone();
    let (a, b) = (format!("t://{ns}/a"), format!("t://{ns}/b"));
    // Check 32: a tainted Node loses the taint and gets the annotations; a
    // Node annotated already is not written.
    let node_b = world.node(&format!("{ns}-b"), &b, true).await;
    world.node(&format!("{ns}-a"), &a, false).await;
    let marked_already = json!({ "metadata": { "annotations": {
        "cluster.x-k8s.io/cluster-name": "c1",
        "cluster.x-k8s.io/cluster-namespace": ns,
        "cluster.x-k8s.io/owner-kind": "MachinePool",
        "cluster.x-k8s.io/owner-name": "p",
    } } });
    let nodes: Api<Node> = Api::all(world.workload.clone());
    let node_a = nodes
        .patch(
            &format!("{ns}-a"),
            &PatchParams::default(),
            &Patch::Merge(marked_already),
        )
        .await
        .unwrap();
    let ready = json!({ "type": "Ready", "status": "True", "reason": "Ready", "message": "both machines up",
        "lastTransitionTime": "2026-01-01T00:00:00Z" });
    let status = json!({ "ready": true, "replicas": 2, "conditions": [ready] });
    world
        .ready_pool("p", 2, json!({ "providerIDList": [a, b] }), status)
        .await;
    // Check 25: both Nodes referenced in list order, with their UIDs; Running.
    let running = world.running("p").await;
    let refs: Vec<_> = status_of(&running)
        .node_refs
        .into_iter()
        .map(|r| (r.name.unwrap(), r.uid.unwrap()))
        .collect();
    let expected: Vec<_> = [node_a.clone(), node_b]
        .into_iter()
        .map(|n| (n.metadata.name.unwrap(), n.metadata.uid.unwrap()))
        .collect();
    assert_eq!(refs, expected);
    assert_eq!(
        node_counts(&running),
        (2, 2, 0),
        "ready, available, unavailable"
    );
    assert!(has_condition(&running, "ReplicasReady", "True", "Ready"));
    // Check 24: the infrastructure's Ready condition is mirrored.
    let mirrored = condition(&status_of(&running).conditions, "InfrastructureReady").unwrap();
    assert_eq!(
        mirrored,
        ("True".into(), "Ready".into(), "both machines up".into())
    );
    let marked = wait_for(
        &nodes,
        &format!("{ns}-b"),
        "the Node is marked as the pool's",
        |n: Option<&Node>| {
            n.is_some_and(|n| {
                let owner = n
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("cluster.x-k8s.io/owner-name").cloned());
                owner.as_deref() == Some("p")
                    && n.spec
                        .as_ref()
                        .and_then(|s| s.taints.as_ref())
                        .is_none_or(|t| {
                            t.iter()
                                .all(|t| t.key != "node.cluster.x-k8s.io/uninitialized")
                        })
            })
        },
    )
    .await
    .unwrap();
    let annotations: BTreeMap<String, String> = marked.metadata.annotations.unwrap();
    assert_eq!(annotations["cluster.x-k8s.io/cluster-name"], "c1");
    assert_eq!(annotations["cluster.x-k8s.io/cluster-namespace"], ns);
    assert_eq!(annotations["cluster.x-k8s.io/owner-kind"], "MachinePool");
    assert!(
        marked.metadata.labels.unwrap_or_default().is_empty(),
        "no labels added"
    );
    // Nodes are marked in list order, a before b: a has been looked at by now.
    let unwritten = nodes.get(&format!("{ns}-a")).await.unwrap();
    assert_eq!(
        unwritten.metadata.resource_version, node_a.metadata.resource_version,
        "a Node already marked is not written"
    );
}

/// Check 21: given the infrastructure object reporting
/// `status.failureReason`/`failureMessage: boom`, expect the pool's failure
/// fields set to its reason and "Failure detected from referenced resource
/// <resource> with name "<name>": boom". Upstream v1.10 also sets phase
/// `Failed` and never clears the fields, even after the provider recovers
/// (issue #7332); v1.14 dropped `Failed` and moved the fields under
/// `status.deprecated.v1beta1`. capwasm writes them there, keeps the phase,
/// and clears them once the provider clears its own rather than keep them
/// for ever: the test checks that too.
///
/// Check 22: given readiness flipping back to false, expect infrastructure
/// not ready again (not sticky) and the phase no longer `Running` or
/// `Scaling*`.
///
/// Upstream: `reconcileExternal` and the infrastructure phase in
/// `machinepool_controller_phases.go`; the phase in `reconcilePhase`.
#[tokio::test]
async fn check_21_22_infrastructure_failures_are_mirrored_and_readiness_is_not_sticky() {
    let world = World::new("c21").await;
    let id = format!("t://{}/a", world.ns);
    world.node(&format!("{}-a", world.ns), &id, false).await;
    world
        .ready_pool(
            "p",
            1,
            json!({ "providerIDList": [id] }),
            json!({ "ready": true, "replicas": 1 }),
        )
        .await;
    world.running("p").await;
    // Check 21: a reported failure is mirrored with upstream's message.
    world
        .set_status(
            INFRASTRUCTURE,
            "TestMachinePool",
            "p",
            json!({ "failureReason": "Boom", "failureMessage": "boom" }),
        )
        .await;
    let failed = world
        .pool_until("p", "the failure is mirrored", |p| {
            status_of(p)
                .deprecated
                .and_then(|d| d.v1beta1)
                .and_then(|v| v.failure.failure_message)
                .is_some_and(|m| m.ends_with(": boom"))
        })
        .await;
    let failure = status_of(&failed)
        .deprecated
        .unwrap()
        .v1beta1
        .unwrap()
        .failure;
    assert_eq!(failure.failure_reason.as_deref(), Some("Boom"));
    let expected = format!(
        "Failure detected from referenced resource {INFRASTRUCTURE}/v1alpha1 with name \"p\": boom"
    );
    assert_eq!(failure.failure_message.as_deref(), Some(expected.as_str()));
    assert_eq!(status_of(&failed).phase.as_deref(), Some("Running"));
    // Check 22: readiness is not sticky: the pool leaves Running. The
    // provider clears its failure at the same time.
    world
        .set_status(
            INFRASTRUCTURE,
            "TestMachinePool",
            "p",
            json!({ "ready": false, "failureReason": null, "failureMessage": null }),
        )
        .await;
    let regressed = world
        .pool_until("p", "the pool leaves Running", |p| {
            status_of(p).phase.as_deref() == Some("Provisioned")
        })
        .await;
    assert!(has_condition(
        &regressed,
        "InfrastructureReady",
        "False",
        "WaitingForInfrastructure"
    ));
    assert_eq!(milestones(&regressed).1, Some(false));
    let cleared = status_of(&regressed)
        .deprecated
        .and_then(|d| d.v1beta1)
        .unwrap_or_default()
        .failure;
    assert_eq!(
        (cleared.failure_reason, cleared.failure_message),
        (None, None),
        "cleared with the provider's"
    );
}

/// Check 19: given the infrastructure ready with an empty providerIDList,
/// `status.replicas` 0 and `spec.replicas` 0, expect the empty list copied,
/// ready, available and unavailable 0, and the phase `Running` (upstream
/// also schedules no requeue; that is not visible from outside and is not
/// checked here).
///
/// Check 36: scaling from zero (`spec.replicas` 1, no Node ready yet), expect
/// `ScalingUp`; once the Node is Ready, `Running`.
///
/// Check 35: scaling to zero (`spec.replicas` 0, the infrastructure's list
/// empty and replicas 0, one old nodeRef), expect that Node deleted in the
/// workload cluster, `nodeRefs` empty and the phase `Running`.
///
/// Upstream: the infrastructure phase in `machinepool_controller_phases.go`,
/// `reconcileNodeRefs` in `machinepool_controller_noderef.go`, and
/// `reconcilePhase`.
#[tokio::test]
async fn check_19_35_36_scale_from_and_to_zero() {
    let world = World::new("c19").await;
    world
        .ready_pool("p", 0, json!({}), json!({ "ready": true, "replicas": 0 }))
        .await;
    // Check 19: empty list, zero replicas: Running with nothing.
    let empty = world
        .pool_until("p", "Running at zero", |p| {
            status_of(p).phase.as_deref() == Some("Running")
        })
        .await;
    assert!(status_of(&empty).node_refs.is_empty());
    assert!(empty.spec.provider_id_list.is_empty());
    assert_eq!(
        node_counts(&empty),
        (0, 0, 0),
        "ready, available, unavailable"
    );

    // Check 36: scale from zero: ScalingUp until the Node is Ready, then Running.
    world.scale("p", 1).await;
    world
        .pool_until("p", "ScalingUp", |p| {
            status_of(p).phase.as_deref() == Some("ScalingUp")
        })
        .await;
    let id = format!("t://{}/only", world.ns);
    world.provide("p", &[&id]).await;
    let node_name = format!("{}-only", world.ns);
    world.node(&node_name, &id, false).await;
    world
        .pool_until("p", "Running with the Node", |p| {
            status_of(p).phase.as_deref() == Some("Running") && status_of(p).node_refs.len() == 1
        })
        .await;

    // Check 35: scale to zero: the referenced Node is deleted, refs empty, Running.
    world.scale("p", 0).await;
    world.provide("p", &[]).await;
    world
        .pool_until("p", "Running at zero again", |p| {
            status_of(p).phase.as_deref() == Some("Running") && status_of(p).node_refs.is_empty()
        })
        .await;
    let nodes: Api<Node> = Api::all(world.workload.clone());
    wait_for(
        &nodes,
        &node_name,
        "the Node is deleted",
        |n: Option<&Node>| n.is_none(),
    )
    .await;
}

/// Check 20: given the infrastructure object deleted after the pool was
/// infrastructure-ready, expect a reconcile error, `InfrastructureReady`
/// False with the reason for it (upstream's v1beta1 reason is
/// `IncorrectExternalRef`; capwasm's v1beta2 condition says
/// `InfrastructureDeleted`), and failureReason `InvalidConfiguration`.
/// (Upstream v1.10 also sets phase `Failed`; v1.14 has no such phase.) The
/// error shows as `observedGeneration` held back on a later generation
/// (check 7).
///
/// Upstream: the infrastructure phase in `machinepool_controller_phases.go`.
#[tokio::test]
async fn check_20_infrastructure_deleted_after_ready_is_reported() {
    let world = World::new("c20").await;
    world
        .ready_pool("p", 0, json!({}), json!({ "ready": true, "replicas": 0 }))
        .await;
    world.running("p").await;
    world
        .api(INFRASTRUCTURE, "TestMachinePool")
        .delete("p", &DeleteParams::default())
        .await
        .unwrap();
    let reported = world
        .pool_until(
            "p",
            "InfrastructureReady False/InfrastructureDeleted",
            |p| has_condition(p, "InfrastructureReady", "False", "InfrastructureDeleted"),
        )
        .await;
    let failure = status_of(&reported)
        .deprecated
        .unwrap()
        .v1beta1
        .unwrap()
        .failure;
    assert_eq!(
        failure.failure_reason.as_deref(),
        Some("InvalidConfiguration")
    );
    // A new generation, reconciled while the object is still missing: an
    // error again, so not observed.
    world.scale("p", 1).await;
    let generation = world.apis.pools.get("p").await.unwrap().metadata.generation;
    // Still as deleted after being ready, as upstream keeps saying: the
    // pool's `infrastructureProvisioned` is not lost with the object.
    let failed = world
        .pool_until("p", "the new generation fails too", |p| {
            status_of(p).conditions.iter().any(|c| {
                c.type_ == "InfrastructureReady"
                    && c.status == "False"
                    && c.reason == "InfrastructureDeleted"
                    && c.observed_generation == generation
            })
        })
        .await;
    assert_eq!(
        status_of(&failed)
            .initialization
            .and_then(|i| i.infrastructure_provisioned),
        Some(true)
    );
    assert!(
        status_of(&failed).observed_generation < generation,
        "{:?} observed of {generation:?}",
        status_of(&failed).observed_generation
    );
}

/// Check 54: given a Cluster with an infrastructureRef, expect phase
/// `Provisioning`, and the infrastructure object owned by the Cluster and
/// labelled `cluster.x-k8s.io/cluster-name` (v1.14: a plain owner
/// reference, a controller reference only with a topology; PR #13332).
///
/// Check 56: given the infrastructure ready with endpoint `{h, 6443}`, expect
/// the Cluster's `spec.controlPlaneEndpoint` set to it and phase
/// `Provisioned`; a later change of the infrastructure's endpoint leaves the
/// Cluster's unchanged.
///
/// Check 57: given the infrastructure ready and then not, expect the
/// Cluster's infrastructure to stay provisioned (sticky).
///
/// Check 58: given the infrastructure's failure domains changed, expect the
/// Cluster's updated; removed, expect them reset to empty.
///
/// Upstream: `reconcileInfrastructure` and `reconcileExternal` in
/// `cluster_controller_phases.go`, the phase in `cluster_controller.go`.
#[tokio::test]
async fn check_54_56_57_58_cluster_endpoint_provisioning_and_failure_domains() {
    let world = World::new("c53").await;
    world
        .provider_object(
            INFRASTRUCTURE,
            "TestCluster",
            "c2",
            json!({ "controlPlaneEndpoint": { "host": "10.0.0.1", "port": 6443 } }),
            json!({ "initialization": { "provisioned": false } }),
        )
        .await;
    let cluster = ClusterBuilder::new(&world.ns, "c2")
        .infrastructure_ref(ContractVersionedObjectReference::new(
            INFRASTRUCTURE,
            "TestCluster",
            "c2",
        ))
        .build();
    create(&world.client, &cluster).await.unwrap();
    // Check 54: referenced, not provisioned: Provisioning, and the infrastructure is owned and labelled.
    wait_for(&world.apis.clusters, "c2", "Provisioning", |c| {
        c.and_then(|c| c.status.as_ref())
            .and_then(|s| s.phase.as_deref())
            == Some("Provisioning")
    })
    .await;
    let infra = world
        .api(INFRASTRUCTURE, "TestCluster")
        .get("c2")
        .await
        .unwrap();
    let owner = &infra.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Cluster", "c2", None)
    );
    assert_eq!(
        infra.metadata.labels.unwrap()["cluster.x-k8s.io/cluster-name"],
        "c2"
    );
    // Check 56: provisioned: the endpoint is copied and the Cluster Provisioned.
    let domains = json!([{ "name": "a", "controlPlane": true }, { "name": "b" }]);
    world
        .set_status(
            INFRASTRUCTURE,
            "TestCluster",
            "c2",
            json!({ "initialization": { "provisioned": true }, "failureDomains": domains }),
        )
        .await;
    let provisioned = flows::wait_for_cluster(&world.apis.clusters, "c2", "Provisioned").await;
    let endpoint = provisioned.spec.control_plane_endpoint.clone().unwrap();
    assert_eq!((endpoint.host.as_str(), endpoint.port), ("10.0.0.1", 6443));
    assert_eq!(failure_domains(&provisioned), ["a", "b"]);
    // Changed failure domains are taken over (check 58).
    let changed = json!({ "failureDomains": [{ "name": "b" }, { "name": "c" }] });
    world
        .set_status(INFRASTRUCTURE, "TestCluster", "c2", changed)
        .await;
    wait_for(&world.apis.clusters, "c2", "failure domains b and c", |c| {
        c.is_some_and(|c| failure_domains(c) == ["b", "c"])
    })
    .await;
    // A later endpoint change is not copied; regressed readiness does not unprovision (check 57);
    // removed failure domains are removed (check 58).
    world
        .api(INFRASTRUCTURE, "TestCluster")
        .patch(
            "c2",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "controlPlaneEndpoint": { "host": "10.9.9.9" } } })),
        )
        .await
        .unwrap();
    world
        .set_status(
            INFRASTRUCTURE,
            "TestCluster",
            "c2",
            json!({ "initialization": { "provisioned": false }, "failureDomains": null }),
        )
        .await;
    let later = wait_for(&world.apis.clusters, "c2", "failure domains reset", |c| {
        c.is_some_and(|c| c.status.is_some() && failure_domains(c).is_empty())
    })
    .await
    .unwrap();
    assert_eq!(later.spec.control_plane_endpoint.unwrap().host, "10.0.0.1");
    let status = later.status.unwrap();
    assert_eq!(
        status.initialization.unwrap().infrastructure_provisioned,
        Some(true)
    );
    assert_eq!(status.phase.as_deref(), Some("Provisioned"));
}

/// The names of `cluster`'s failure domains.
fn failure_domains(cluster: &capwasm::api::Cluster) -> Vec<&str> {
    cluster.status.as_ref().map_or_else(Vec::new, |s| {
        s.failure_domains.iter().map(|d| d.name.as_str()).collect()
    })
}

/// Check 53: given a new Cluster, expect finalizer `cluster.cluster.x-k8s.io`;
/// without references, expect the infrastructure ready at once
/// (`status.initialization.infrastructureProvisioned`) and phase `Pending`.
/// The phase rule (upstream's cluster `reconcilePhase`) then makes one with
/// a valid endpoint `Provisioned`, which the test checks with `c1`; capwasm
/// counts its control plane initialized once it has a kubeconfig (check 60).
///
/// Upstream: `Reconcile` and `reconcileInfrastructure` in
/// `cluster_controller.go` and `cluster_controller_phases.go`.
#[tokio::test]
async fn check_53_a_cluster_without_references_is_infrastructure_ready_at_once_and_pending_without_an_endpoint()
 {
    let world = World::new("c53b").await;
    create(
        &world.client,
        &ClusterBuilder::new(&world.ns, "c0")
            .no_infrastructure()
            .build(),
    )
    .await
    .unwrap();
    let finalized_and = |phase: &'static str| {
        move |c: Option<&capwasm::api::Cluster>| {
            c.is_some_and(|c| {
                c.metadata
                    .finalizers
                    .as_ref()
                    .is_some_and(|f| f.iter().any(|f| f == "cluster.cluster.x-k8s.io"))
                    && c.status.as_ref().is_some_and(|s| {
                        s.phase.as_deref() == Some(phase)
                            && s.initialization
                                .as_ref()
                                .and_then(|i| i.infrastructure_provisioned)
                                == Some(true)
                    })
            })
        }
    };
    let pending = wait_for(
        &world.apis.clusters,
        "c0",
        "the finalizer, infrastructure provisioned and Pending",
        finalized_and("Pending"),
    )
    .await
    .unwrap();
    assert_eq!(pending.endpoint(), None);

    // With an endpoint: Provisioned.
    let cluster = wait_for(
        &world.apis.clusters,
        "c1",
        "the finalizer, infrastructure provisioned and Provisioned",
        finalized_and("Provisioned"),
    )
    .await
    .unwrap();
    let status = cluster.status.unwrap();
    assert_eq!(
        condition(&status.conditions, "ControlPlaneInitialized")
            .unwrap()
            .0,
        "True"
    );
}

/// Check 13: given a `Running` pool switched to a new config that is not
/// ready, expect the old `dataSecretName` kept, bootstrap not ready, and the
/// phase still `Running`.
///
/// Check 7: given a reconcile that returns an error, expect the status still
/// written (phase, conditions) but `status.observedGeneration` not advanced
/// to the object's generation.
///
/// Upstream: the deferred status patch of `Reconcile` in
/// `machinepool_controller.go`, the bootstrap phase in
/// `machinepool_controller_phases.go`.
#[tokio::test]
async fn check_07_13_errors_hold_back_observed_generation_and_a_new_unready_config_keeps_running() {
    let world = World::new("c07").await;
    world
        .ready_pool("p", 0, json!({}), json!({ "ready": true, "replicas": 0 }))
        .await;
    let running = world.running("p").await;
    let generation = running.metadata.generation;
    assert_eq!(status_of(&running).observed_generation, generation);

    // Check 13: switched to a config that is not ready: the old Secret name stays, bootstrap is
    // not ready, the phase stays Running.
    world
        .provider_object(
            BOOTSTRAP,
            "TestBootstrapConfig",
            "p-next",
            json!({}),
            json!({ "initialization": { "dataSecretCreated": false } }),
        )
        .await;
    let switch = json!({ "spec": { "template": { "spec": { "bootstrap": { "configRef": {
        "apiGroup": BOOTSTRAP, "kind": "TestBootstrapConfig", "name": "p-next" } } } } } });
    world
        .apis
        .pools
        .patch("p", &PatchParams::default(), &Patch::Merge(switch))
        .await
        .unwrap();
    let switched = world
        .pool_until("p", "BootstrapConfigReady False", |p| {
            has_condition(p, "BootstrapConfigReady", "False", "WaitingForDataSecret")
        })
        .await;
    assert_eq!(
        switched
            .spec
            .template
            .spec
            .bootstrap
            .data_secret_name
            .as_deref(),
        Some("data")
    );
    assert_eq!(status_of(&switched).phase.as_deref(), Some("Running"));
    assert_eq!(
        status_of(&switched)
            .initialization
            .unwrap()
            .bootstrap_data_secret_created,
        Some(false)
    );

    // Check 7: a reconcile that fails still writes its conditions, but not observedGeneration.
    let dangling = json!({ "spec": { "template": { "spec": { "bootstrap": { "configRef": {
        "apiGroup": BOOTSTRAP, "kind": "TestBootstrapConfig", "name": "missing" } } } } } });
    let patched = world
        .apis
        .pools
        .patch("p", &PatchParams::default(), &Patch::Merge(dangling))
        .await
        .unwrap();
    let failed = world
        .pool_until("p", "BootstrapConfigReady False/ReferenceNotFound", |p| {
            has_condition(p, "BootstrapConfigReady", "False", "ReferenceNotFound")
        })
        .await;
    assert!(patched.metadata.generation > generation);
    assert!(status_of(&failed).observed_generation < patched.metadata.generation);
    assert_eq!(
        status_of(&failed).phase.as_deref(),
        Some("Running"),
        "a failed reconcile's status keeps its phase"
    );
}

/// Points `c1`'s kubeconfig at a loopback port nothing listens on.
async fn make_workload_unreachable(world: &World) {
    let secrets: Api<Secret> = Api::namespaced(world.client.clone(), &world.ns);
    let mut secret = secrets.get("c1-kubeconfig").await.unwrap();
    let data = secret.data.as_mut().unwrap();
    let yaml = String::from_utf8(data["value"].0.clone()).unwrap();
    let mut kubeconfig: Value = serde_yaml_ng::from_str(&yaml).unwrap();
    for cluster in kubeconfig["clusters"].as_array_mut().unwrap() {
        cluster["cluster"]["server"] = json!("https://127.0.0.1:1");
    }
    data.insert(
        "value".into(),
        ByteString(serde_yaml_ng::to_string(&kubeconfig).unwrap().into_bytes()),
    );
    secrets
        .replace("c1-kubeconfig", &PostParams::default(), &secret)
        .await
        .unwrap();
}

/// Sets pool `name`'s `nodeDeletionTimeoutSeconds`.
async fn node_deletion_timeout(world: &World, name: &str, seconds: i32) {
    world
        .apis
        .pools
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "template": { "spec": {
                "deletion": { "nodeDeletionTimeoutSeconds": seconds } } } } })),
        )
        .await
        .unwrap();
}

/// Check 49: given a deleting pool whose bootstrap config and infrastructure
/// object are gone and whose Nodes cannot be deleted (here: the workload
/// cluster is unreachable), expect an error and the pool kept, its
/// `Deleting` condition saying why.
///
/// Check 51: given `nodeDeletionTimeoutSeconds` unset or 0, expect it never
/// considered passed. The test sets 0: taken as zero seconds it would have
/// passed at the first reconcile after the deletion, which would have left
/// the Nodes and removed the finalizer at once.
///
/// Check 50: given the timeout passed (deletion requested longer ago than
/// the timeout), expect Node deletion skipped and the finalizer removed: the
/// pool goes, the unreachable cluster's Node stays.
///
/// Upstream: `reconcileDelete` in `machinepool_controller.go` (issue #10544,
/// PR #10553).
#[tokio::test]
async fn check_49_50_51_an_unreachable_workload_cluster_holds_deletion_until_the_node_deletion_timeout()
 {
    let world = World::new("c49").await;
    let ns = world.ns.clone();
    let id = format!("t://{ns}/a");
    world.node(&format!("{ns}-a"), &id, false).await;
    let status = json!({ "ready": true, "replicas": 1 });
    world
        .ready_pool("p", 1, json!({ "providerIDList": [id] }), status)
        .await;
    let running = world
        .pool_until("p", "Running with its Node", |p| {
            status_of(p).phase.as_deref() == Some("Running") && status_of(p).node_refs.len() == 1
        })
        .await;
    assert!(
        has_condition(&running, "Deleting", "False", "NotDeleting"),
        "{:?}",
        status_of(&running).conditions
    );

    // Check 51: a timeout of 0 never passes.
    node_deletion_timeout(&world, "p", 0).await;
    make_workload_unreachable(&world).await;
    world
        .apis
        .pools
        .delete("p", &DeleteParams::default())
        .await
        .unwrap();
    // Check 49: the Nodes cannot be deleted, so the pool stays, saying why.
    let waiting = world
        .pool_until("p", "Deleting True/WaitingForNodeDeletion", |p| {
            has_condition(p, "Deleting", "True", "WaitingForNodeDeletion")
        })
        .await;
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert_eq!(status_of(&waiting).phase.as_deref(), Some("Deleting"));
    for kind in ["TestBootstrapConfig", "TestMachinePool"] {
        let group = if kind == "TestMachinePool" {
            INFRASTRUCTURE
        } else {
            BOOTSTRAP
        };
        assert!(
            world.api(group, kind).get_opt("p").await.unwrap().is_none(),
            "{kind} was deleted first"
        );
    }
    // Check 50: once the timeout has passed, deletion goes on without the Nodes.
    node_deletion_timeout(&world, "p", 1).await;
    wait_for(
        &world.apis.pools,
        "p",
        "the pool is gone",
        |p: Option<&MachinePool>| p.is_none(),
    )
    .await;
    let nodes: Api<Node> = Api::all(world.workload.clone());
    assert!(
        nodes.get_opt(&format!("{ns}-a")).await.unwrap().is_some(),
        "the unreachable cluster's Node is left"
    );
}

/// Check 52: given a deleting pool without nodeRefs, expect the workload
/// cluster never contacted: with it unreachable and a node deletion
/// timeout of 0 (never passed, check 51), the pool is still deleted.
///
/// Upstream: `reconcileDelete` in `machinepool_controller.go`.
#[tokio::test]
async fn check_52_a_pool_without_node_refs_is_deleted_while_its_workload_cluster_is_unreachable() {
    let world = World::new("c52").await;
    world
        .ready_pool("p", 0, json!({}), json!({ "ready": true, "replicas": 0 }))
        .await;
    world.running("p").await;
    // A timeout of 0 never passes: only not needing the workload cluster lets deletion finish.
    node_deletion_timeout(&world, "p", 0).await;
    make_workload_unreachable(&world).await;
    world
        .apis
        .pools
        .delete("p", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &world.apis.pools,
        "p",
        "the pool is gone",
        |p: Option<&MachinePool>| p.is_none(),
    )
    .await;
}

/// Check 12: given a configRef to an object that does not exist, expect a
/// reconcile error (`observedGeneration` not set, a `ReferenceNotFound`
/// Event) and bootstrap readiness unchanged (never true). Created late and
/// ready, the config is then taken up.
///
/// Upstream: `reconcileExternal` in `machinepool_controller_phases.go`.
#[tokio::test]
async fn check_12_a_missing_config_is_an_error_that_leaves_bootstrap_readiness_alone() {
    let world = World::new("c12").await;
    create(
        &world.client,
        &world.pool("p", "TestBootstrapConfig").build(),
    )
    .await
    .unwrap();
    let missing = world
        .pool_until("p", "BootstrapConfigReady False/ReferenceNotFound", |p| {
            has_condition(p, "BootstrapConfigReady", "False", "ReferenceNotFound")
        })
        .await;
    let status = status_of(&missing);
    assert_ne!(
        status
            .initialization
            .and_then(|i| i.bootstrap_data_secret_created),
        Some(true)
    );
    assert_eq!(status.observed_generation, None, "an error holds it back");
    wait_for_event(&world.client, &world.ns, "p", "ReferenceNotFound").await;

    // Created late, and ready: the pool picks it up.
    let ready =
        json!({ "initialization": { "dataSecretCreated": true }, "dataSecretName": "data" });
    world
        .provider_object(BOOTSTRAP, "TestBootstrapConfig", "p", json!({}), ready)
        .await;
    world
        .pool_until("p", "BootstrapConfigReady True", |p| {
            has_condition(p, "BootstrapConfigReady", "True", "DataSecretAvailable")
        })
        .await;
}

/// Check 59: given a Cluster without infrastructureRef whose control plane
/// provides an endpoint, expect the endpoint copied from the control plane
/// once it is initialized (v1beta2 contract:
/// `status.initialization.controlPlaneInitialized`), not before.
///
/// Upstream: `reconcileControlPlane` in `cluster_controller_phases.go`.
#[tokio::test]
async fn check_59_the_control_planes_endpoint_is_copied_once_it_is_initialized() {
    const CONTROL_PLANE: &str = "controlplane.test.capwasm.dev";
    let world = World::new("c59").await;
    world
        .provider_object(
            CONTROL_PLANE,
            "TestControlPlane",
            "c3",
            json!({ "controlPlaneEndpoint": { "host": "10.0.0.2", "port": 6443 } }),
            json!({ "initialization": { "controlPlaneInitialized": false } }),
        )
        .await;
    let mut cluster = ClusterBuilder::new(&world.ns, "c3")
        .no_infrastructure()
        .build();
    cluster.spec.control_plane_ref = Some(ContractVersionedObjectReference::new(
        CONTROL_PLANE,
        "TestControlPlane",
        "c3",
    ));
    create(&world.client, &cluster).await.unwrap();
    let waiting = wait_for(
        &world.apis.clusters,
        "c3",
        "ControlPlaneInitialized False/WaitingForControlPlane",
        |c| {
            c.and_then(|c| c.status.as_ref()).is_some_and(|s| {
                condition(&s.conditions, "ControlPlaneInitialized")
                    .is_some_and(|(s, r, _)| s == "False" && r == "WaitingForControlPlane")
            })
        },
    )
    .await
    .unwrap();
    assert_eq!(waiting.endpoint(), None, "not copied before initialization");

    world
        .set_status(
            CONTROL_PLANE,
            "TestControlPlane",
            "c3",
            json!({ "initialization": { "controlPlaneInitialized": true } }),
        )
        .await;
    // The endpoint is a spec write; the condition follows in the next status write.
    wait_for(
        &world.apis.clusters,
        "c3",
        "the endpoint copied and ControlPlaneInitialized True",
        |c| {
            c.is_some_and(|c| {
                c.endpoint()
                    .is_some_and(|e| e.host == "10.0.0.2" && e.port == 6443)
                    && c.status.as_ref().is_some_and(|s| {
                        condition(&s.conditions, "ControlPlaneInitialized")
                            .is_some_and(|(s, _, _)| s == "True")
                    })
            })
        },
    )
    .await;
}

/// Check 60: given a Cluster without a control-plane provider, expect its
/// kubeconfig Secret `<name>-kubeconfig` generated from the CA Secret
/// `<name>-ca` (owned by the Cluster, labelled with it, type
/// `cluster.x-k8s.io/secret`) and `ControlPlaneInitialized` True; without
/// the CA, a wait (upstream requeues after 30 s). Upstream sets
/// `ControlPlaneInitialized` when a control-plane Machine gets a nodeRef;
/// capwasm has no Machines and counts the control plane initialized once the
/// kubeconfig exists. A generated kubeconfig close to expiry is made anew
/// (capwasm's own).
///
/// Upstream: `reconcileKubeconfig` and `reconcileControlPlaneInitialized` in
/// `cluster_controller_phases.go`.
#[tokio::test]
async fn check_60_a_kubeconfig_is_generated_from_the_clusters_ca() {
    let world = World::new("c60").await;
    let env = TestEnv::shared().await.unwrap();
    let workload = env.workload().unwrap();
    let port: i32 = workload.url().rsplit(':').next().unwrap().parse().unwrap();
    let cluster = |name: &str| {
        ClusterBuilder::new(&world.ns, name)
            .no_infrastructure()
            .endpoint("127.0.0.1", port)
            .build()
    };
    let initialized = |name: &'static str, status: &'static str| {
        move |c: Option<&capwasm::api::Cluster>| {
            c.and_then(|c| c.status.as_ref()).is_some_and(|s| {
                condition(&s.conditions, "ControlPlaneInitialized")
                    .is_some_and(|(s, _, m)| s == status && (s == "True" || m.contains(name)))
            })
        }
    };

    // No CA: the Cluster waits, naming the Secret it needs.
    create(&world.client, &cluster("c5")).await.unwrap();
    wait_for(
        &world.apis.clusters,
        "c5",
        "ControlPlaneInitialized False naming c5-ca",
        initialized("\"c5-ca\"", "False"),
    )
    .await;

    // With the CA: a kubeconfig that really reaches the workload API server.
    create(&world.client, &workload.ca_secret(&world.ns, "c4"))
        .await
        .unwrap();
    create(&world.client, &cluster("c4")).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(world.client.clone(), &world.ns);
    let secret = wait_for(
        &secrets,
        "c4-kubeconfig",
        "the kubeconfig Secret",
        |s: Option<&Secret>| s.is_some(),
    )
    .await
    .unwrap();
    let owner = &secret.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Cluster", "c4", Some(true))
    );
    assert_eq!(secret.type_.as_deref(), Some("cluster.x-k8s.io/secret"));
    assert_eq!(
        secret.metadata.labels.clone().unwrap()["cluster.x-k8s.io/cluster-name"],
        "c4"
    );
    let yaml = String::from_utf8(secret.data.unwrap()["value"].0.clone()).unwrap();
    authenticates(&yaml).await;
    wait_for(
        &world.apis.clusters,
        "c4",
        "ControlPlaneInitialized True",
        initialized("", "True"),
    )
    .await;

    // A client certificate that expires within half a year is made anew.
    let mut expiring = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let soon = k8s_openapi::jiff::Timestamp::now()
        .checked_add(k8s_openapi::jiff::SignedDuration::from_hours(30 * 24))
        .unwrap()
        .to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
        .date();
    let mut params = rcgen::CertificateParams::new(vec!["expiring".to_owned()]).unwrap();
    params.not_after = rcgen::date_time_ymd(
        soon.year().into(),
        soon.month().try_into().unwrap(),
        soon.day().try_into().unwrap(),
    );
    let cert = params
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let auth = expiring.auth_infos[0].auth_info.as_mut().unwrap();
    auth.client_certificate_data = Some(BASE64.encode(cert.pem()));
    let written = serde_yaml_ng::to_string(&expiring).unwrap();
    secrets
        .patch(
            "c4-kubeconfig",
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "value": BASE64.encode(&written) } })),
        )
        .await
        .unwrap();
    let rotated = wait_for(
        &secrets,
        "c4-kubeconfig",
        "the expiring kubeconfig made anew",
        |s: Option<&Secret>| {
            s.and_then(|s| s.data.as_ref())
                .is_some_and(|d| d["value"].0 != written.as_bytes())
        },
    )
    .await
    .unwrap();
    authenticates(&String::from_utf8(rotated.data.unwrap()["value"].0.clone()).unwrap()).await;
    wait_for_event(&world.client, &world.ns, "c4", "KubeconfigRotated").await;
}

/// Lists Namespaces with `kubeconfig` (YAML): it reaches the API server and
/// authenticates as an administrator.
async fn authenticates(kubeconfig: &str) {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let client = Client::try_from(config).unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    namespaces
        .list(&ListParams::default().limit(1))
        .await
        .expect("the generated kubeconfig authenticates as an administrator");
}
