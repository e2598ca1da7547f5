//! Platform clusters composed by the sample platform provider
//! (`sim-platform`) through the operator: node groups become pools that
//! reach Running and the cluster rolls up to Ready; a count change scales
//! its pool; a template change of one minor version is allowed and one of
//! two refused with nothing changed; a child deleted or stripped of its
//! owner reference comes back; a kind the module may not render, and
//! renders that break the host's rules, apply nothing; deletion takes the
//! CAPI Cluster first and leaves nothing behind (no object, cloud instance
//! or workload Node); a new version of the module changes what is rendered
//! without a restart. With the admission webhook `capwasm run` serves, a
//! refused change is never stored.

use capwasm::api::platform::{
    ClusterTemplateSpec, NodeGroup, PlatformClusterSpec, PlatformClusterStatus,
};
use capwasm::api::providermodule::World;
use capwasm::api::tenancy::AllowedNamespaces;
use capwasm::api::{ClusterTemplate, PlatformCluster, ProviderModule};
use capwasm::simcloud::{InstanceRecord, InstanceState};
use capwasm::testing::objects::ProviderModuleBuilder;
use capwasm::testing::{KUBEADM_JOIN_CONFIG, SIM_PLATFORM_KINDS, guest_path};
use capwasm::wasm::composition::RenderRequest;
use capwasm::wasm::{
    Capabilities, Limits, ObjectKind, ProviderSource, ProviderSpec, Runtime, RuntimeSettings,
};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Client;
use kube::api::{
    DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Api, ResourceExt as _};
use serde_json::{Value, json};
use testenv::budget::{allow_one, pod_with_budget};
use testenv::flows::{
    Apis, Modules, Objects, Scenario, create, wait_for, wait_for_event, wait_for_module,
    wait_for_pool,
};
use testenv::install::{Core, Install, RECONCILES};
use testenv::{ApiServer, Stack};

/// What the sample provider renders, by group and kind.
const KINDS: &[(&str, &str)] = SIM_PLATFORM_KINDS;

/// A namespace with a platform module of `file`, allowed `kinds`, beside
/// the kubeadm-bootstrap and sim-infrastructure modules.
struct Platform {
    client: Client,
    ns: String,
    apis: Apis,
    objects: Objects,
    modules: Modules,
    module: String,
    /// The workload server's kubeconfig Secret, renamed for each cluster.
    kubeconfig: Secret,
    /// An admin client of the workload server.
    workload: Client,
    clusters: Api<PlatformCluster>,
    templates: Api<ClusterTemplate>,
}

impl Platform {
    async fn new(prefix: &str) -> Self {
        Self::with(prefix, "sim_platform.wasm", KINDS).await
    }

    async fn with(prefix: &str, file: &str, kinds: &[(&str, &str)]) -> Self {
        let scenario = Scenario::new(prefix).await;
        let workload = scenario.env.workload().unwrap();
        let (objects, modules) = (scenario.stack.objects.clone(), scenario.modules.clone());
        Self::on(
            scenario.client,
            &scenario.ns,
            (objects, modules),
            workload,
            (file, kinds),
        )
        .await
    }

    /// The sample provider in `install`'s namespace, on its own servers.
    async fn of(install: &Install) -> Self {
        let workload = install.env.workload().unwrap();
        let parts = (install.objects.clone(), install.modules.clone());
        Self::on(
            install.client.clone(),
            &install.ns,
            parts,
            workload,
            ("sim_platform.wasm", KINDS),
        )
        .await
    }

    /// In namespace `ns` of `client`'s server, whose provider modules are
    /// `modules`; clusters of the `workload` server.
    async fn on(
        client: Client,
        ns: &str,
        (objects, modules): (Objects, Modules),
        workload: &ApiServer,
        (file, kinds): (&str, &[(&str, &str)]),
    ) -> Self {
        let module = format!("{ns}-platform");
        let api = Api::<ProviderModule>::all(client.clone());
        let built = ProviderModuleBuilder::file(&module, World::Platform, &path(file))
            .allowed_kinds(kinds)
            .build();
        api.create(&PostParams::default(), &built).await.unwrap();
        wait_for_module(&api, &module, "Ready").await;
        Self {
            apis: Apis::new(&client, ns),
            kubeconfig: workload.kubeconfig_secret(ns, "cluster").unwrap(),
            workload: workload.client().unwrap(),
            clusters: Api::namespaced(client.clone(), ns),
            templates: Api::all(client.clone()),
            client,
            ns: ns.to_owned(),
            objects,
            modules,
            module,
        }
    }

    /// Creates ClusterTemplate `<ns>-<name>` for Kubernetes `version`, with `extra` values.
    async fn template(&self, name: &str, version: &str, extra: Value) -> String {
        let objects = &self.objects;
        let mut cluster_config = objects.sim_config();
        cluster_config["controlPlaneHost"] = json!("127.0.0.1");
        let mut values = json!({
            "kubernetesVersion": version,
            "bootstrap": {
                "provider": self.modules.bootstrap,
                "config": serde_json::from_str::<Value>(KUBEADM_JOIN_CONFIG).unwrap(),
            },
            "infrastructure": {
                "provider": self.modules.infrastructure,
                "config": objects.sim_config(),
                "clusterConfig": cluster_config,
            },
        });
        if let (Some(values), Value::Object(extra)) = (values.as_object_mut(), extra) {
            values.extend(extra);
        }
        let name = format!("{}-{name}", self.ns);
        let template = ClusterTemplate::new(
            &name,
            ClusterTemplateSpec {
                provider: self.module.clone(),
                values: Some(values),
                allowed_namespaces: Some(AllowedNamespaces::named(&[&self.ns])),
                ..ClusterTemplateSpec::default()
            },
        );
        self.templates
            .create(&PostParams::default(), &template)
            .await
            .unwrap();
        name
    }

    /// Creates PlatformCluster `name` of `template` with `groups` (name,
    /// count), and its kubeconfig Secret for the shared workload server.
    async fn cluster(&self, name: &str, template: &str, groups: &[(&str, u32)]) {
        let mut kubeconfig = self.kubeconfig.clone();
        kubeconfig.metadata.name = Some(format!("{name}-kubeconfig"));
        kubeconfig
            .labels_mut()
            .insert("cluster.x-k8s.io/cluster-name".into(), name.into());
        create(&self.client, &kubeconfig).await.unwrap();
        let groups = groups
            .iter()
            .map(|(group, count)| NodeGroup {
                name: (*group).to_owned(),
                count: Some(*count),
                ..NodeGroup::default()
            })
            .collect();
        self.create(name, template, groups).await;
    }

    async fn create(&self, name: &str, template: &str, node_groups: Vec<NodeGroup>) {
        let mut cluster = PlatformCluster::new(
            name,
            PlatformClusterSpec {
                template_name: template.to_owned(),
                node_groups,
                ..PlatformClusterSpec::default()
            },
        );
        cluster.metadata.namespace = Some(self.ns.clone());
        create(&self.client, &cluster).await.unwrap();
    }

    async fn wait(
        &self,
        name: &str,
        what: &str,
        done: impl Fn(&PlatformClusterStatus) -> bool,
    ) -> PlatformCluster {
        wait_for(&self.clusters, name, what, |c| {
            c.and_then(|c| c.status.as_ref()).is_some_and(&done)
        })
        .await
        .unwrap()
    }

    async fn ready(&self, name: &str) -> PlatformCluster {
        self.wait(name, "the platform cluster is Ready", |s| {
            s.phase.as_deref() == Some("Ready")
        })
        .await
    }

    /// Waits until condition `type_` of `name` has `reason`; its message.
    async fn condition(&self, name: &str, type_: &str, reason: &str) -> String {
        let cluster = self
            .wait(name, &format!("{type_} says {reason}"), |s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == type_ && c.reason == reason)
            })
            .await;
        let status = cluster.status.unwrap_or_default();
        let condition = status.conditions.into_iter().find(|c| c.type_ == type_);
        condition.map(|c| c.message).unwrap_or_default()
    }
}

fn path(file: &str) -> String {
    guest_path(file).to_string_lossy().into_owned()
}

fn merge(patch: Value) -> Patch<Value> {
    Patch::Merge(patch)
}

#[tokio::test]
async fn two_node_groups_reach_running_and_the_cluster_rolls_up_to_ready() {
    let platform = Platform::new("pc-ready").await;
    let template = platform
        .template("v31", "v1.31.2", json!({"encryptionKey": true}))
        .await;
    platform
        .cluster("c", &template, &[("md", 2), ("gpu", 1)])
        .await;

    let pools = &platform.apis.pools;
    wait_for_pool(pools, "c-md", "Running", 2).await;
    wait_for_pool(pools, "c-gpu", "Running", 1).await;
    let cluster = platform.ready("c").await;
    let status = cluster.status.unwrap();
    let groups: Vec<(&str, u32, u32)> = status
        .node_groups
        .iter()
        .map(|g| (g.name.as_str(), g.desired, g.ready))
        .collect();
    assert_eq!(groups, [("md", 2, 2), ("gpu", 1, 1)]);
    assert_eq!(status.node_count, Some(3));
    assert_eq!(status.applied_template.as_deref(), Some(template.as_str()));
    let conditions: Vec<(&str, &str)> = status
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    for expected in [
        ("Ready", "True"),
        ("Composed", "True"),
        ("TemplateAccepted", "True"),
        ("NodesReady", "True"),
    ] {
        assert!(
            conditions.contains(&expected),
            "{expected:?} in {conditions:?}"
        );
    }
    // Every child carries the cluster's label and owner reference.
    let pool = pools.get("c-md").await.unwrap();
    assert_eq!(pool.labels()["platform.capwasm.dev/cluster"], "c");
    assert!(
        pool.owner_references()
            .iter()
            .any(|o| o.kind == "PlatformCluster")
    );
    // The generated key exists, 32 random bytes as base64, never seen by the provider.
    let secrets = Api::<Secret>::namespaced(platform.client.clone(), &platform.ns);
    let key = secrets.get("c-encryption").await.unwrap().data.unwrap()["key"]
        .0
        .clone();
    assert_eq!(key.len(), 44);

    // A count change scales its pool.
    let groups =
        json!({"spec": {"nodeGroups": [{"name": "md", "count": 3}, {"name": "gpu", "count": 1}]}});
    platform
        .clusters
        .patch("c", &PatchParams::default(), &merge(groups))
        .await
        .unwrap();
    wait_for_pool(pools, "c-md", "Running", 3).await;
    // The roll-up follows the pool's status, so it is waited for.
    platform
        .wait("c", "the group counts three ready", |s| {
            s.phase.as_deref() == Some("Ready")
                && s.node_groups.first().is_some_and(|g| g.ready == 3)
        })
        .await;
    // The key was generated once.
    let again = secrets.get("c-encryption").await.unwrap().data.unwrap()["key"]
        .0
        .clone();
    assert_eq!(again, key);
}

#[tokio::test]
async fn one_minor_version_up_is_applied_and_two_are_refused_with_nothing_changed() {
    let platform = Platform::new("pc-upgrade").await;
    let v30 = platform.template("v30", "v1.30.4", json!({})).await;
    let v31 = platform.template("v31", "v1.31.2", json!({})).await;
    let v33 = platform.template("v33", "v1.33.0", json!({})).await;
    platform.cluster("c", &v30, &[("md", 1)]).await;
    let pools = &platform.apis.pools;
    let pool = |p: capwasm::api::MachinePool| p.spec.template.spec.version.unwrap_or_default();
    wait_for_pool(pools, "c-md", "Running", 1).await;
    assert_eq!(pool(pools.get("c-md").await.unwrap()), "v1.30.4");

    let to = |template: &str| merge(json!({"spec": {"templateName": template}}));
    platform
        .clusters
        .patch("c", &PatchParams::default(), &to(&v33))
        .await
        .unwrap();
    let message = platform
        .condition("c", "TemplateAccepted", "TemplateChangeRefused")
        .await;
    assert!(
        message.contains("v1.30.4 to v1.33.0 is more than one minor version at once"),
        "{message}"
    );
    let reason = wait_for_event(&platform.client, &platform.ns, "c", "TemplateChangeRefused").await;
    assert!(reason.contains("more than one minor"), "{reason}");
    let cluster = platform.clusters.get("c").await.unwrap();
    assert_eq!(
        cluster.status.unwrap().applied_template.as_deref(),
        Some(v30.as_str())
    );
    assert_eq!(
        pool(pools.get("c-md").await.unwrap()),
        "v1.30.4",
        "nothing changed"
    );

    platform
        .clusters
        .patch("c", &PatchParams::default(), &to(&v31))
        .await
        .unwrap();
    wait_for(pools, "c-md", "the pool runs v1.31.2", |p| {
        p.is_some_and(|p| p.spec.template.spec.version.as_deref() == Some("v1.31.2"))
    })
    .await;
    let accepted = platform
        .condition("c", "TemplateAccepted", "TemplateAccepted")
        .await;
    assert!(accepted.contains("changed from"), "{accepted}");
}

#[tokio::test]
async fn a_new_version_rolls_the_nodes_and_the_cluster_is_upgrading_until_the_rollout_ends() {
    let platform = Platform::new("pc-mixed").await;
    let v30 = platform.template("v30", "v1.30.4", json!({})).await;
    let v31 = platform.template("v31", "v1.31.2", json!({})).await;
    platform.cluster("c", &v30, &[("md", 1)]).await;
    let pools = &platform.apis.pools;
    wait_for_pool(pools, "c-md", "Running", 1).await;
    let kubelets = |status: &PlatformClusterStatus| -> Vec<String> {
        let mut versions: Vec<String> = status
            .nodes
            .iter()
            .map(|n| n.kubelet_version.clone())
            .collect();
        versions.sort();
        versions.dedup();
        versions
    };
    let ready = platform
        .wait("c", "Ready on one v1.30.4 node", |s| {
            s.phase.as_deref() == Some("Ready") && s.nodes.len() == 1
        })
        .await;
    let status = ready.status.unwrap_or_default();
    assert_eq!(kubelets(&status), ["v1.30.4"]);
    // A Pod whose budget holds the old Node's drain up: the rollout cannot
    // end until the test lets it.
    let old = status.nodes[0].name.clone();
    let app = format!("{}-web", platform.ns);
    let (_, budgets, budget) = pod_with_budget(&platform.workload, &old, &app).await;

    // One minor up and one more node: the pool rolls its instances, the new
    // ones booting v1.31.2 before the old one is drained.
    let change = json!({"spec": {"templateName": v31, "nodeGroups": [{"name": "md", "count": 2}]}});
    platform
        .clusters
        .patch("c", &PatchParams::default(), &merge(change))
        .await
        .unwrap();
    let upgrading = platform
        .wait("c", "Upgrading", |s| {
            s.phase.as_deref() == Some("Upgrading")
        })
        .await;
    let status = upgrading.status.unwrap_or_default();
    assert_eq!(
        status.message.as_deref(),
        Some("nodes run v1.30.4, v1.31.2"),
        "{status:?}"
    );
    assert_eq!(kubelets(&status), ["v1.30.4", "v1.31.2"]);

    // The drain may finish: the old Node goes, and with it the upgrade.
    allow_one(&budgets, &budget).await;
    let done = platform
        .wait("c", "Ready on two v1.31.2 nodes", |s| {
            s.phase.as_deref() == Some("Ready") && s.nodes.len() == 2
        })
        .await;
    let status = done.status.unwrap_or_default();
    assert_eq!(kubelets(&status), ["v1.31.2"], "{status:?}");
    assert!(status.nodes.iter().all(|n| n.name != old), "{status:?}");
}

#[tokio::test]
async fn a_child_deleted_or_stripped_of_its_owner_comes_back() {
    let platform = Platform::new("pc-heal").await;
    let template = platform.template("v31", "v1.31.2", json!({})).await;
    platform.cluster("c", &template, &[("md", 1)]).await;
    let configs = &platform.apis.configs;
    wait_for(configs, "c-md", "the bootstrap config exists", |c| {
        c.is_some()
    })
    .await;
    platform.ready("c").await;

    let uid = configs.get("c-md").await.unwrap().uid();
    configs
        .delete("c-md", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(configs, "c-md", "the bootstrap config is back", |c| {
        c.is_some_and(|c| c.uid() != uid && c.metadata.deletion_timestamp.is_none())
    })
    .await;

    // As a restore from backup leaves it: no owner reference.
    let infra = &platform.apis.infra_clusters;
    let stripped = json!({"metadata": {"ownerReferences": null}});
    infra
        .patch("c", &PatchParams::default(), &merge(stripped))
        .await
        .unwrap();
    wait_for(
        infra,
        "c",
        "the WasmCluster is owned by its platform cluster again",
        |c| {
            c.is_some_and(|c| {
                c.owner_references()
                    .iter()
                    .any(|o| o.kind == "PlatformCluster")
            })
        },
    )
    .await;
}

/// Deleting a platform cluster takes its CAPI Cluster first, and with it
/// the pool, the pool's cloud instance and its workload Node; only once that
/// Cluster is gone is the rest of what was rendered (the generated Secret)
/// deleted; then nothing is left: no Kubernetes object, no instance in the
/// simulated cloud's inventory, no Node. The order is seen through a
/// finalizer the test holds on the Secret: when its deletion is asked for,
/// the Cluster's share is already gone. Every list and read here fails the
/// test on an error rather than read as "nothing left".
#[tokio::test]
async fn deletion_takes_the_capi_cluster_first_and_leaves_nothing() {
    const HOLD: &str = "test.capwasm.dev/hold";
    let platform = Platform::new("pc-delete").await;
    let cloud = &Stack::shared().await.unwrap().cloud;
    let template = platform
        .template("v31", "v1.31.2", json!({"encryptionKey": true}))
        .await;
    platform.cluster("c", &template, &[("md", 1)]).await;
    platform.ready("c").await;
    let apis = &platform.apis;
    let secrets = Api::<Secret>::namespaced(platform.client.clone(), &platform.ns);
    let nodes = Api::<Node>::all(platform.workload.clone());

    // What there is to delete besides objects: the pool's instance and Node.
    let pool_key = format!("{}/c-md", platform.ns);
    let instances = cloud.instances_of(&pool_key);
    assert_eq!(instances.len(), 1, "the pool's instance: {instances:?}");
    let node_names: Vec<String> = apis
        .pools
        .get("c-md")
        .await
        .unwrap()
        .status
        .unwrap_or_default()
        .node_refs
        .into_iter()
        .filter_map(|r| r.name)
        .collect();
    assert_eq!(node_names, [instances[0].instance.id.clone()]);
    for name in &node_names {
        assert!(nodes.get_opt(name).await.unwrap().is_some(), "Node {name}");
    }
    let hold = json!({"metadata": {"finalizers": [HOLD]}});
    secrets
        .patch("c-encryption", &PatchParams::default(), &merge(hold))
        .await
        .unwrap();

    platform
        .clusters
        .delete("c", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = platform
        .wait("c", "it waits for the CAPI Cluster", |s| {
            s.conditions
                .iter()
                .any(|c| c.reason == "WaitingForClusterDeletion")
        })
        .await;
    assert_eq!(deleting.status.unwrap().phase.as_deref(), Some("Deleting"));
    // The Secret's deletion is asked for only after the CAPI Cluster and
    // everything it took are gone.
    wait_for(
        &secrets,
        "c-encryption",
        "the generated Secret's deletion is asked for",
        |s: Option<&Secret>| s.is_some_and(|s| s.metadata.deletion_timestamp.is_some()),
    )
    .await;
    assert!(
        apis.clusters.get_opt("c").await.unwrap().is_none(),
        "the Cluster first"
    );
    assert!(apis.pools.get_opt("c-md").await.unwrap().is_none());
    assert!(apis.configs.get_opt("c-md").await.unwrap().is_none());
    assert!(apis.infra_pools.get_opt("c-md").await.unwrap().is_none());
    assert!(apis.infra_clusters.get_opt("c").await.unwrap().is_none());
    let live: Vec<_> = cloud
        .instances_of(&pool_key)
        .into_iter()
        .filter(|i| i.instance.state != InstanceState::Terminating)
        .collect();
    assert!(
        live.is_empty(),
        "instances live after the Cluster: {live:?}"
    );
    for name in &node_names {
        assert!(
            nodes.get_opt(name).await.unwrap().is_none(),
            "Node {name} after the Cluster"
        );
    }

    let release = json!({"metadata": {"finalizers": null}});
    secrets
        .patch("c-encryption", &PatchParams::default(), &merge(release))
        .await
        .unwrap();
    wait_for(
        &platform.clusters,
        "c",
        "the platform cluster is gone",
        |c| c.is_none(),
    )
    .await;
    nothing_left(&platform, &nodes, &instances).await;
}

/// Asserts that nothing of platform cluster `c` of `platform` is left: none
/// of the objects it rendered, none of `instances` (its pool's) in the
/// simulated cloud's inventory (terminated ones leave it after the
/// termination delay), and no workload Node of theirs.
async fn nothing_left(platform: &Platform, nodes: &Api<Node>, instances: &[InstanceRecord]) {
    let apis = &platform.apis;
    assert!(apis.clusters.get_opt("c").await.unwrap().is_none());
    assert!(apis.pools.get_opt("c-md").await.unwrap().is_none());
    assert!(apis.infra_clusters.get_opt("c").await.unwrap().is_none());
    assert!(apis.configs.get_opt("c-md").await.unwrap().is_none());
    assert!(apis.infra_pools.get_opt("c-md").await.unwrap().is_none());
    let secrets = Api::<Secret>::namespaced(platform.client.clone(), &platform.ns);
    assert!(secrets.get_opt("c-encryption").await.unwrap().is_none());
    let selector = ListParams::default().labels("platform.capwasm.dev/cluster=c");
    let left = secrets.list(&selector).await.unwrap();
    assert!(left.items.is_empty(), "Secrets of c: {:?}", left.items);

    let cloud = &Stack::shared().await.unwrap().cloud;
    let ids: Vec<&str> = instances.iter().map(|i| i.instance.id.as_str()).collect();
    let listed = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        cloud.wait_for(|all| !all.iter().any(|i| ids.contains(&i.instance.id.as_str()))),
    )
    .await;
    assert!(listed.is_ok(), "instances still listed: {ids:?}");
    let provider_ids: Vec<&str> = instances
        .iter()
        .map(|i| i.instance.provider_id.as_str())
        .collect();
    let with_their_ids: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .is_some_and(|id| provider_ids.contains(&id))
        })
        .map(|n| n.name_any())
        .collect();
    assert!(with_their_ids.is_empty(), "Nodes left: {with_their_ids:?}");
}

#[tokio::test]
async fn a_new_module_version_changes_what_is_rendered_without_a_restart() {
    let platform = Platform::new("pc-swap").await;
    let template = platform.template("v31", "v1.31.2", json!({})).await;
    platform.cluster("c", &template, &[("md", 1)]).await;
    let pools = &platform.apis.pools;
    wait_for_pool(pools, "c-md", "Running", 1).await;
    platform.ready("c").await;

    let modules = Api::<ProviderModule>::all(platform.client.clone());
    let source = json!({"spec": {"source": {"file": {"path": path("sim_platform_v2.wasm")}}}});
    modules
        .patch(&platform.module, &PatchParams::default(), &merge(source))
        .await
        .unwrap();
    let label = "platform.capwasm.dev/provider-version";
    wait_for(
        pools,
        "c-md",
        "the pool carries the new version's label",
        |p| p.is_some_and(|p| p.labels().get(label).map(String::as_str) == Some("0.2.0")),
    )
    .await;
    // The pool kept running through the swap.
    let pool = pools.get("c-md").await.unwrap();
    assert_eq!(pool.status.unwrap().phase.as_deref(), Some("Running"));
    // Status is written after the objects are applied, so it is waited for.
    let cluster = platform
        .wait("c", "the new version serves the cluster", |s| {
            s.served_by.as_ref().is_some_and(|b| b.version == "0.2.0")
        })
        .await;
    assert_eq!(cluster.status.unwrap().phase.as_deref(), Some("Ready"));
}

/// A module whose allowedKinds lack Secret, asked for an encryption key (a
/// generated Secret), refuses the whole render: the cluster says which kind
/// broke the rule, and no object of the render is applied. The render is
/// not written down here: it is what the same component renders for the
/// same cluster and template in a runtime of the test's own that allows
/// every kind; each object of it, by kind and name and by the cluster's
/// label, is absent from the API server.
#[tokio::test]
async fn a_kind_outside_allowed_kinds_is_refused_and_nothing_applied() {
    let without_secrets = &KINDS[..5];
    let platform = Platform::with("pc-kinds", "sim_platform.wasm", without_secrets).await;
    let template = platform
        .template("v31", "v1.31.2", json!({"encryptionKey": true}))
        .await;
    platform.cluster("c", &template, &[("md", 1)]).await;
    let message = platform
        .condition("c", "Composed", "InvalidProviderResult")
        .await;
    assert!(message.contains("allowedKinds"), "{message}");

    let rendered = rendered(&platform, "sim_platform.wasm", "c").await;
    let allowed = |group: &str, kind: &str| without_secrets.contains(&(group, kind));
    let refused = rendered
        .iter()
        .find(|(gvk, _)| !allowed(&gvk.group, &gvk.kind))
        .map(|(gvk, _)| gvk.kind.clone())
        .expect("the render has a kind the module may not render");
    assert!(message.contains(&format!("({refused})")), "{message}");
    let labelled = ListParams::default().labels("platform.capwasm.dev/cluster=c");
    for (gvk, name) in &rendered {
        let (resource, _) = kube::discovery::pinned_kind(&platform.client, gvk)
            .await
            .unwrap();
        let api: Api<DynamicObject> =
            Api::namespaced_with(platform.client.clone(), &platform.ns, &resource);
        assert!(
            api.get_opt(name).await.unwrap().is_none(),
            "{} {name} was applied",
            gvk.kind
        );
        let of_the_cluster = api.list(&labelled).await.unwrap();
        assert!(
            of_the_cluster.items.is_empty(),
            "{} of the cluster: {:?}",
            gvk.kind,
            of_the_cluster.items
        );
    }
}

/// What `file` renders for platform cluster `name` of `platform` with its
/// template's values, in a runtime of the test's own allowing every kind
/// it may render: each object's and generated Secret's kind and name, in
/// the order rendered (the objects, then the Secrets, as the host checks
/// them).
async fn rendered(platform: &Platform, file: &str, name: &str) -> Vec<(GroupVersionKind, String)> {
    const PROVIDER: &str = "render";
    let every_kind = KINDS
        .iter()
        .map(|(group, kind)| ObjectKind {
            group: (*group).to_owned(),
            kind: (*kind).to_owned(),
        })
        .collect();
    let runtime = Runtime::new(RuntimeSettings::default(), None).unwrap();
    runtime
        .swap(ProviderSpec {
            name: PROVIDER.to_owned(),
            source: ProviderSource::File(guest_path(file)),
            sha256: None,
            limits: Limits::default(),
            capabilities: Capabilities {
                allowed_kinds: every_kind,
                ..Capabilities::default()
            },
        })
        .await
        .unwrap();
    let cluster = platform.clusters.get(name).await.unwrap();
    let template = platform
        .templates
        .get(&cluster.spec.template_name)
        .await
        .unwrap();
    let request = RenderRequest {
        cluster: serde_json::to_string(&cluster).unwrap(),
        template: serde_json::to_string(&template).unwrap(),
        values: template.spec.values.clone().unwrap_or_default().to_string(),
        observed: Vec::new(),
    };
    let composition = runtime
        .render(PROVIDER, "", &platform.ns, &request)
        .await
        .unwrap();
    let text = |object: &serde_json::Map<String, Value>, key: &str| {
        object
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut rendered: Vec<(GroupVersionKind, String)> = composition
        .objects
        .iter()
        .map(|object| {
            let api_version = text(object, "apiVersion");
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
            let name = object
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            (
                GroupVersionKind::gvk(group, version, &text(object, "kind")),
                name.to_owned(),
            )
        })
        .collect();
    rendered.extend(
        composition
            .secrets
            .iter()
            .map(|s| (GroupVersionKind::gvk("", "v1", "Secret"), s.name.clone())),
    );
    assert!(!rendered.is_empty(), "{file} renders nothing");
    rendered
}

#[tokio::test]
async fn a_bad_render_applies_nothing_and_leaves_what_runs() {
    let platform = Platform::new("pc-render").await;
    let good = platform.template("good", "v1.31.2", json!({})).await;
    platform.cluster("c", &good, &[("md", 1)]).await;
    platform.ready("c").await;
    let pools = &platform.apis.pools;
    let before = pools.get("c-md").await.unwrap().resource_version();

    let secret = |extra: Value| json!({"apiVersion": "v1", "kind": "Secret", "metadata": extra});
    let cases = [
        (
            "no-api-version",
            json!({"extraObjects": [{"kind": "Secret", "metadata": {"name": "x"}}]}),
            "objects[5].apiVersion: no apiVersion",
        ),
        (
            "namespace",
            json!({"extraObjects": [secret(json!({"name": "x", "namespace": "kube-system"}))]}),
            "in another namespace",
        ),
        (
            "name",
            json!({"extraObjects": [secret(json!({"name": "Not_A_Label"}))]}),
            "not a DNS label",
        ),
        (
            "many",
            json!({"extraObjects": [secret(json!({"name": "x"}))], "extraObjectCopies": 10000}),
            "more than 500 objects",
        ),
    ];
    for (name, values, expected) in cases {
        let template = platform.template(name, "v1.31.2", values).await;
        // Same version: the change is allowed, the render is not.
        let to = merge(json!({"spec": {"templateName": template}}));
        platform
            .clusters
            .patch("c", &PatchParams::default(), &to)
            .await
            .unwrap();
        let message = platform
            .wait("c", &format!("the {name} render is refused"), |s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Composed"
                        && c.reason == "InvalidProviderResult"
                        && c.message.contains(expected)
                })
            })
            .await;
        let status = message.status.unwrap();
        assert_eq!(
            status.applied_template.as_deref(),
            Some(good.as_str()),
            "{name}"
        );
    }
    assert_eq!(
        pools.get("c-md").await.unwrap().resource_version(),
        before,
        "nothing applied"
    );
    let secrets = Api::<Secret>::namespaced(platform.client.clone(), &platform.ns);
    assert!(secrets.get_opt("x").await.unwrap().is_none());
    let event = wait_for_event(&platform.client, &platform.ns, "c", "InvalidProviderResult").await;
    assert!(!event.is_empty());
}

#[tokio::test]
async fn a_spec_or_template_that_breaks_a_rule_gets_a_condition_naming_it() {
    let platform = Platform::new("pc-spec").await;
    let template = platform.template("v31", "v1.31.2", json!({})).await;
    let group = |count, min, max| NodeGroup {
        name: "md".into(),
        count,
        min_count: min,
        max_count: max,
        values: None,
    };
    platform
        .create("both", &template, vec![group(Some(1), Some(1), Some(2))])
        .await;
    let message = platform.condition("both", "Composed", "InvalidSpec").await;
    assert_eq!(
        message,
        "spec.nodeGroups[0]: set count, or minCount and maxCount, not both"
    );
    platform
        .create("inverted", &template, vec![group(None, Some(3), Some(1))])
        .await;
    let message = platform
        .condition("inverted", "Composed", "InvalidSpec")
        .await;
    assert_eq!(
        message,
        "spec.nodeGroups[0]: minCount (3) is greater than maxCount (1)"
    );

    platform.create("missing", "no-such-template", vec![]).await;
    let message = platform
        .condition("missing", "TemplateAccepted", "TemplateNotFound")
        .await;
    assert!(
        message.contains("\"no-such-template\" does not exist"),
        "{message}"
    );
    let cluster = platform.clusters.get("missing").await.unwrap();
    assert_eq!(cluster.status.unwrap().phase.as_deref(), Some("Failed"));

    let old = platform.template("old", "v1.30.1", json!({})).await;
    let deprecated = json!({"spec": {"deprecated": true}});
    platform
        .templates
        .patch(&old, &PatchParams::default(), &merge(deprecated))
        .await
        .unwrap();
    platform.create("late", &old, vec![]).await;
    let message = platform
        .condition("late", "TemplateAccepted", "TemplateDeprecated")
        .await;
    assert!(message.contains("deprecated"), "{message}");
    let events = [
        ("both", "InvalidSpec"),
        ("inverted", "InvalidSpec"),
        ("missing", "TemplateNotFound"),
        ("late", "TemplateDeprecated"),
    ];
    for (name, reason) in events {
        let note = wait_for_event(&platform.client, &platform.ns, name, reason).await;
        assert!(!note.is_empty(), "{name}");
    }
    // Nothing was rendered for any of them.
    let clusters = platform
        .apis
        .clusters
        .list(&kube::api::ListParams::default())
        .await
        .unwrap();
    assert!(clusters.items.is_empty());
}

/// The resourceVersion of `name` and of each of its objects, by kind and name.
async fn versions(platform: &Platform, name: &str) -> Vec<(String, String)> {
    let version = |kind: &str, meta: &kube::api::ObjectMeta| {
        let name = meta.name.clone().unwrap_or_default();
        (
            format!("{kind}/{name}"),
            meta.resource_version.clone().unwrap_or_default(),
        )
    };
    let cluster = platform.clusters.get(name).await.unwrap();
    let mut versions = vec![version("PlatformCluster", &cluster.metadata)];
    let selector = format!("platform.capwasm.dev/cluster={name}");
    let selector = kube::api::ListParams::default().labels(&selector);
    let apis = &platform.apis;
    for o in apis.clusters.list(&selector).await.unwrap() {
        versions.push(version("Cluster", &o.metadata));
    }
    for o in apis.pools.list(&selector).await.unwrap() {
        versions.push(version("MachinePool", &o.metadata));
    }
    for o in apis.configs.list(&selector).await.unwrap() {
        versions.push(version("WasmBootstrapConfig", &o.metadata));
    }
    for o in apis.infra_pools.list(&selector).await.unwrap() {
        versions.push(version("WasmMachinePool", &o.metadata));
    }
    for o in apis.infra_clusters.list(&selector).await.unwrap() {
        versions.push(version("WasmCluster", &o.metadata));
    }
    let secrets = Api::<Secret>::namespaced(platform.client.clone(), &platform.ns);
    for o in secrets.list(&selector).await.unwrap() {
        versions.push(version("Secret", &o.metadata));
    }
    versions
}

/// `capwasm run` standalone registers its admission webhook: a template
/// change the provider refuses is refused to whoever makes it, with the
/// provider's reason, and never stored; one it allows is stored and applied.
#[tokio::test]
async fn with_the_admission_webhook_a_refused_template_change_is_never_stored() {
    let install = Install::with_core("pc-admit", Core::Capwasm).await;
    let platform = Platform::of(&install).await;
    let v30 = platform.template("v30", "v1.30.4", json!({})).await;
    let v31 = platform.template("v31", "v1.31.2", json!({})).await;
    let v33 = platform.template("v33", "v1.33.0", json!({})).await;
    platform.cluster("c", &v30, &[("md", 1)]).await;
    platform
        .wait("c", "v30 is applied", |s| {
            s.applied_template.as_deref() == Some(v30.as_str())
        })
        .await;

    // Dry runs until the API server calls the webhook (it registers once
    // its server listens; the API server then learns of it).
    let to = |template: &str| merge(json!({"spec": {"templateName": template}}));
    let dry_run = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while platform
        .clusters
        .patch("c", &dry_run, &to(&v33))
        .await
        .is_ok()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the admission webhook never refused the change"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let refused = platform
        .clusters
        .patch("c", &PatchParams::default(), &to(&v33))
        .await
        .expect_err("refused on admission");
    let message = refused.to_string();
    eprintln!("refused: {message}");
    assert!(message.contains("denied the request"), "{message}");
    assert!(
        message.contains("v1.30.4 to v1.33.0 is more than one minor version at once"),
        "{message}"
    );
    let stored = platform.clusters.get("c").await.unwrap();
    assert_eq!(stored.spec.template_name, v30, "nothing was stored");

    platform
        .clusters
        .patch("c", &PatchParams::default(), &to(&v31))
        .await
        .unwrap();
    wait_for(&platform.apis.pools, "c-md", "the pool runs v1.31.2", |p| {
        p.is_some_and(|p| p.spec.template.spec.version.as_deref() == Some("v1.31.2"))
    })
    .await;

    new_clusters_breaking_the_rules_are_refused(&platform, &v30, &v31).await;
}

/// A new cluster breaking the node groups' rules, or on a deprecated
/// template (`deprecated`, made so here), is refused as it is created.
async fn new_clusters_breaking_the_rules_are_refused(
    platform: &Platform,
    deprecated: &str,
    current: &str,
) {
    let both = NodeGroup {
        name: "md".into(),
        count: Some(1),
        min_count: Some(1),
        max_count: Some(2),
        values: None,
    };
    let mut bad = PlatformCluster::new(
        "bad",
        PlatformClusterSpec {
            template_name: current.to_owned(),
            node_groups: vec![both],
            ..PlatformClusterSpec::default()
        },
    );
    bad.metadata.namespace = Some(platform.ns.clone());
    let refused = platform
        .clusters
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("refused on admission");
    assert!(
        refused
            .to_string()
            .contains("spec.nodeGroups[0]: set count, or minCount and maxCount, not both"),
        "{refused}"
    );
    let deprecation = json!({"spec": {"deprecated": true}});
    platform
        .templates
        .patch(deprecated, &PatchParams::default(), &merge(deprecation))
        .await
        .unwrap();
    bad.spec.node_groups.clear();
    bad.spec.template_name = deprecated.to_owned();
    let refused = platform
        .clusters
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("refused on admission");
    assert!(refused.to_string().contains("is deprecated"), "{refused}");
    assert!(platform.clusters.get_opt("bad").await.unwrap().is_none());
}

#[tokio::test]
async fn an_operator_restart_writes_nothing_for_a_platform_cluster_at_rest() {
    let log = format!("info,{RECONCILES}=debug");
    let mut install = Install::sharded("pc-restart", 1, &log).await;
    let platform = Platform::of(&install).await;
    let template = platform
        .template("v31", "v1.31.2", json!({"encryptionKey": true}))
        .await;
    platform.cluster("c", &template, &[("md", 2)]).await;
    platform.ready("c").await;
    // At rest: every object as its controllers leave it, twice in a row.
    let mut before = versions(&platform, "c").await;
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let now = versions(&platform, "c").await;
        if now == before {
            break;
        }
        before = now;
    }
    assert_eq!(before.len(), 7, "{before:?}");

    let status = |c: PlatformCluster| serde_json::to_string_pretty(&c.status).unwrap_or_default();
    let at_rest = status(platform.clusters.get("c").await.unwrap());
    install.restart_operator().await;
    // The new process reconciles the platform cluster from cold caches.
    let reconciled = format!(
        "object=PlatformCluster.v1alpha1.platform.capwasm.dev/c.{} ",
        install.ns
    );
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while install
        .operator
        .log_lines(|l| l.contains("reconciling") && l.contains(&reconciled))
        .is_empty()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new operator never reconciled {reconciled}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let after = status(platform.clusters.get("c").await.unwrap());
    assert_eq!(
        versions(&platform, "c").await,
        before,
        "nothing was written; the status at rest {at_rest}\nand after {after}"
    );
}

#[tokio::test]
async fn a_phase_past_the_template_s_timeout_is_unhealthy_with_the_reason() {
    let platform = Platform::new("pc-timeout").await;
    // Nothing answers on port 9: the pool's machines never come up.
    let mut config = platform.objects.sim_config();
    config["endpoint"] = json!("http://127.0.0.1:9");
    let infrastructure = json!({"infrastructure": {
        "provider": platform.modules.infrastructure,
        "config": config,
    }});
    let template = platform.template("slow", "v1.31.2", infrastructure).await;
    let timeout = json!({"spec": {"phaseTimeoutSeconds": 3}});
    platform
        .templates
        .patch(&template, &PatchParams::default(), &merge(timeout))
        .await
        .unwrap();
    platform.cluster("c", &template, &[("md", 1)]).await;

    // On a loaded machine the 3s can pass while the cluster's own infrastructure
    // is still coming up; the timed-out condition then follows the phase on.
    let expected = "Reconciling for longer than the template's 3s: nodes provisioning: md 0/1";
    let cluster = platform
        .wait("c", expected, |s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.reason == "PhaseTimedOut" && c.message == expected)
        })
        .await;
    let status = cluster.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Unhealthy"));
    assert_eq!(status.reported_phase.as_deref(), Some("Reconciling"));
}

#[tokio::test]
async fn a_paused_cluster_is_left_alone_until_unpaused_and_bounds_become_annotations() {
    let platform = Platform::new("pc-paused").await;
    let template = platform.template("v31", "v1.31.2", json!({})).await;
    let group = NodeGroup {
        name: "auto".into(),
        min_count: Some(1),
        max_count: Some(3),
        ..NodeGroup::default()
    };
    let mut cluster = PlatformCluster::new(
        "c",
        PlatformClusterSpec {
            template_name: template,
            node_groups: vec![group],
            paused: true,
            ..PlatformClusterSpec::default()
        },
    );
    cluster.metadata.namespace = Some(platform.ns.clone());
    create(&platform.client, &cluster).await.unwrap();
    let message = platform.condition("c", "Paused", "Paused").await;
    assert_eq!(message, "PlatformCluster spec.paused is set to true");
    let pools = &platform.apis.pools;
    assert!(
        pools.get_opt("c-auto").await.unwrap().is_none(),
        "nothing rendered while paused"
    );

    let unpause = json!({"spec": {"paused": false}});
    platform
        .clusters
        .patch("c", &PatchParams::default(), &merge(unpause))
        .await
        .unwrap();
    let pool = wait_for(pools, "c-auto", "the pool exists", |p| p.is_some())
        .await
        .unwrap();
    assert_eq!(pool.spec.replicas, Some(1));
    let annotations = pool.annotations();
    let bound = |key: &str| {
        annotations
            .get(&format!(
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-{key}-size"
            ))
            .cloned()
    };
    assert_eq!(
        (bound("min"), bound("max")),
        (Some("1".into()), Some("3".into()))
    );
}

/// The creation record (`platform.capwasm.dev/created-for`) of `meta`.
fn created_for(meta: &kube::api::ObjectMeta) -> Option<String> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get("platform.capwasm.dev/created-for"))
        .cloned()
}

/// A team's own Cluster, pool and Secret, named as a platform cluster's
/// would be, are never adopted, changed or deleted: the platform cluster
/// says whose they are and applies nothing, and its deletion leaves them.
#[tokio::test]
async fn a_team_s_objects_of_the_same_names_survive_a_platform_cluster_and_its_deletion() {
    let platform = Platform::new("pc-team").await;
    let apis = &platform.apis;
    // The team's: a paused Cluster "c" and its pool "c-md" (no controller
    // changes them while paused), and a Secret "c-encryption".
    let mut team_cluster =
        capwasm::testing::objects::ClusterBuilder::new(&platform.ns, "c").build();
    team_cluster.spec.paused = Some(true);
    create(&platform.client, &team_cluster).await.unwrap();
    let team_pool = capwasm::testing::objects::MachinePoolBuilder::new(&platform.ns, "c-md", "c")
        .replicas(1)
        .build();
    create(&platform.client, &team_pool).await.unwrap();
    let mut team_secret = Secret::default();
    team_secret.metadata.name = Some("c-encryption".into());
    team_secret.metadata.namespace = Some(platform.ns.clone());
    team_secret.string_data = Some([("key".to_owned(), "the team's own key".to_owned())].into());
    create(&platform.client, &team_secret).await.unwrap();
    let secrets = Api::<Secret>::namespaced(platform.client.clone(), &platform.ns);
    let secret_before = secrets.get("c-encryption").await.unwrap();

    let template = platform
        .template("v31", "v1.31.2", json!({"encryptionKey": true}))
        .await;
    platform.cluster("c", &template, &[("md", 1)]).await;
    let message = platform.condition("c", "Composed", "ObjectNotOwned").await;
    assert!(
        message.contains(
            "Cluster.cluster.x-k8s.io \"c\" exists and was not created for this platform cluster"
        ) && message.contains("capwasm did not create it"),
        "{message}"
    );
    let event = wait_for_event(&platform.client, &platform.ns, "c", "ObjectNotOwned").await;
    assert!(event.contains("nothing was applied"), "{event}");
    // A few more refused reconciles (it backs off), then: nothing written.
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert!(
        apis.infra_clusters.get_opt("c").await.unwrap().is_none(),
        "nothing applied"
    );
    assert!(
        apis.configs.get_opt("c-md").await.unwrap().is_none(),
        "nothing applied"
    );
    for meta in [
        apis.clusters.get("c").await.unwrap().metadata,
        apis.pools.get("c-md").await.unwrap().metadata,
    ] {
        assert_eq!(created_for(&meta), None, "{meta:?}");
        assert!(
            !meta
                .labels
                .unwrap_or_default()
                .contains_key("platform.capwasm.dev/cluster")
        );
        assert!(
            !meta
                .owner_references
                .unwrap_or_default()
                .iter()
                .any(|o| o.kind == "PlatformCluster"),
            "not adopted"
        );
    }
    let secret_after = secrets.get("c-encryption").await.unwrap();
    assert_eq!(
        secret_after.metadata.resource_version, secret_before.metadata.resource_version,
        "the team's Secret is exactly as it was"
    );

    platform
        .clusters
        .delete("c", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &platform.clusters,
        "c",
        "the platform cluster is gone",
        |c| c.is_none(),
    )
    .await;
    assert!(
        apis.clusters.get_opt("c").await.unwrap().is_some(),
        "the team's Cluster stays"
    );
    assert!(
        apis.pools.get_opt("c-md").await.unwrap().is_some(),
        "the team's pool stays"
    );
    let kept = secrets.get("c-encryption").await.unwrap();
    assert_eq!(
        kept.metadata.resource_version,
        secret_before.metadata.resource_version
    );
}

/// Two platform clusters whose objects' names collide (`a` with group
/// `b-c`, `a-b` with group `c`: both render pool `a-b-c`): the object stays
/// with the cluster it was created for, the other applies nothing, and
/// both say so; nothing flips between them.
#[tokio::test]
async fn colliding_platform_clusters_both_report_it_and_nothing_flips() {
    let platform = Platform::new("pc-collide").await;
    let template = platform.template("v31", "v1.31.2", json!({})).await;
    platform.cluster("a", &template, &[("b-c", 1)]).await;
    platform.ready("a").await;
    let pools = &platform.apis.pools;
    let pool = pools.get("a-b-c").await.unwrap();
    assert_eq!(created_for(&pool.metadata).as_deref(), Some("a"));

    platform.cluster("a-b", &template, &[("c", 1)]).await;
    let message = platform
        .condition("a-b", "Composed", "ObjectNotOwned")
        .await;
    assert!(
        message.contains("MachinePool.cluster.x-k8s.io \"a-b-c\" exists")
            && message.contains("created for platform cluster \"a\""),
        "{message}"
    );
    let contested = wait_for_event(&platform.client, &platform.ns, "a", "ObjectContested").await;
    assert!(
        contested.contains(
            "platform cluster \"a-b\" renders MachinePool.cluster.x-k8s.io \"a-b-c\" too"
        ),
        "{contested}"
    );
    // Several of a-b's reconciles later (it backs off): the pool is a's,
    // as it was, and a-b applied nothing at all.
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    let after = pools.get("a-b-c").await.unwrap();
    assert_eq!(created_for(&after.metadata).as_deref(), Some("a"));
    let owners: Vec<String> = after
        .owner_references()
        .iter()
        .filter(|o| o.kind == "PlatformCluster")
        .map(|o| o.name.clone())
        .collect();
    assert_eq!(owners, ["a"], "of the platform clusters, only a owns it");
    assert_eq!(after.labels()["platform.capwasm.dev/cluster"], "a");
    assert!(
        platform
            .apis
            .clusters
            .get_opt("a-b")
            .await
            .unwrap()
            .is_none()
    );
    let a = platform.clusters.get("a").await.unwrap();
    assert_eq!(a.status.unwrap().phase.as_deref(), Some("Ready"));
    let failing = platform.clusters.get("a-b").await.unwrap();
    let status = failing.status.unwrap_or_default();
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Composed" && c.reason == "ObjectNotOwned"),
        "{status:?}"
    );
}

/// A platform component that echoes what it observes (sim-platform with
/// `echoObserved`: every observed Secret into a ConfigMap and into a
/// condition) shows the Secrets of its cluster, never their data: not the
/// generated key, and not a kubeconfig someone labelled for the cluster.
#[tokio::test]
async fn a_provider_echoing_what_it_observes_never_shows_key_bytes_or_a_kubeconfig() {
    let mut kinds = KINDS.to_vec();
    kinds.push(("", "ConfigMap"));
    let platform = Platform::with("pc-echo", "sim_platform.wasm", &kinds).await;
    let template = platform
        .template(
            "v31",
            "v1.31.2",
            json!({"encryptionKey": true, "echoObserved": true}),
        )
        .await;
    platform.cluster("c", &template, &[("md", 1)]).await;
    // The kubeconfig, labelled for the platform cluster by someone: still
    // not the cluster's to read, since the host did not create it.
    let label = json!({"metadata": {"labels": {"platform.capwasm.dev/cluster": "c"}}});
    let secrets = Api::<Secret>::namespaced(platform.client.clone(), &platform.ns);
    secrets
        .patch("c-kubeconfig", &PatchParams::default(), &merge(label))
        .await
        .unwrap();
    platform.ready("c").await;
    let key = secrets.get("c-encryption").await.unwrap().data.unwrap()["key"]
        .0
        .clone();
    let key = String::from_utf8(key).unwrap();
    let kubeconfig = secrets.get("c-kubeconfig").await.unwrap().data.unwrap()["value"]
        .0
        .clone();
    let kubeconfig = String::from_utf8_lossy(&kubeconfig).into_owned();
    // A line of the kubeconfig that only it has: its client key data.
    let credential = kubeconfig
        .lines()
        .find(|l| l.contains("client-key-data") || l.contains("token"))
        .map(|l| l.rsplit(':').next().unwrap_or_default().trim().to_owned())
        .unwrap();
    assert!(credential.len() > 20, "{credential}");

    let configs = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
        platform.client.clone(),
        &platform.ns,
    );
    let echo = wait_for(
        &configs,
        "c-echo",
        "the echo ConfigMap shows the key's Secret",
        |c| {
            c.and_then(|c| c.data.as_ref())
                .and_then(|d| d.get("observed"))
                .is_some_and(|o| o.contains("c-encryption"))
        },
    )
    .await
    .unwrap();
    let echoed = echo.data.unwrap()["observed"].clone();
    let cluster = platform
        .wait("c", "the echo condition shows the key's Secret", |s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Echo" && c.message.contains("c-encryption"))
        })
        .await;
    let status = serde_json::to_string(&cluster.status).unwrap();
    let annotations = serde_json::to_string(&echo.metadata.annotations).unwrap();
    for (place, text) in [
        ("ConfigMap", &echoed),
        ("status", &status),
        ("annotations", &annotations),
    ] {
        assert!(
            !text.contains(&key),
            "the key's bytes in the {place}: {text}"
        );
        assert!(
            !text.contains(&credential),
            "the kubeconfig in the {place}: {text}"
        );
        assert!(
            !text.contains("c-kubeconfig"),
            "the kubeconfig Secret in the {place}: {text}"
        );
    }
}
