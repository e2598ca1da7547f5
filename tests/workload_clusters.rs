//! Workload-cluster access against real API servers: clients built from
//! kubeconfig Secrets, the watched Node cache and its events, providerID
//! lookups, refused and broken kubeconfigs, unreachable clusters, Secret
//! rotation to another server, `forget`, one HTTP/2 connection per
//! cluster, and the bounds on what a workload server can make the operator
//! read: a 500 MB Node list from a hostile server, more Nodes than allowed.
//!
//! Tests share one management and one workload server, so each uses its own
//! namespace and cluster name, and Node names made unique by that namespace.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use capwasm::api::MachinePool;
use capwasm::testing::objects::ClusterBuilder;
use capwasm::workload::{ClusterKey, Error, NodeEvent, Settings, WatchFailure, WorkloadClusters};
use futures::{Stream, StreamExt};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Secret};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use testenv::flows::{Scenario, condition, create, wait_for, wait_for_pool};
use testenv::hostile::HostileWorkload;
use testenv::scoped::ScopedWorkload;
use testenv::{ApiServer, TestEnv};

/// Upper bound for anything a watch should deliver.
const WAIT: Duration = Duration::from_secs(30);

type Events = Pin<Box<dyn Stream<Item = NodeEvent> + Send>>;

/// One test's view: its namespace on the management server, its Cluster,
/// and a `WorkloadClusters` of its own with its event stream.
struct Setup {
    env: &'static TestEnv,
    namespace: String,
    cluster: ClusterKey,
    workload: WorkloadClusters,
    events: Events,
}

async fn setup(prefix: &str) -> Result<Setup> {
    setup_with(prefix, Settings::default()).await
}

async fn setup_with(prefix: &str, settings: Settings) -> Result<Setup> {
    let env = TestEnv::shared().await?;
    let namespace = env.management().create_namespace(prefix).await?;
    let cluster = ClusterKey::new(namespace.clone(), format!("{prefix}-cluster"));
    // No cache of Secrets: every look at a kubeconfig Secret reads it.
    let (secrets, _) = kube::runtime::reflector::store();
    let (workload, events) = WorkloadClusters::new(env.management().client()?, secrets, settings);
    Ok(Setup {
        env,
        namespace,
        cluster,
        workload,
        events: Box::pin(events),
    })
}

impl Setup {
    fn shared_workload(&self) -> Result<&'static ApiServer> {
        self.env
            .workload()
            .context("the shared env has a workload server")
    }

    fn secrets(&self) -> Result<Api<Secret>> {
        Ok(Api::namespaced(
            self.env.management().client()?,
            &self.namespace,
        ))
    }

    /// Creates the Cluster's kubeconfig Secret for `server`.
    async fn point_at(&self, server: &ApiServer) -> Result<()> {
        let secret = server.kubeconfig_secret(&self.cluster.namespace, &self.cluster.name)?;
        self.secrets()?
            .create(&PostParams::default(), &secret)
            .await?;
        Ok(())
    }

    /// Creates the Cluster's kubeconfig Secret with `data`.
    async fn secret_with(&self, data: BTreeMap<String, ByteString>) -> Result<()> {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(self.cluster.kubeconfig_secret_name()),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..Secret::default()
        };
        self.secrets()?
            .create(&PostParams::default(), &secret)
            .await?;
        Ok(())
    }

    /// A Node name unique to this test.
    fn node_name(&self, name: &str) -> String {
        format!("{name}-{}", self.namespace)
    }

    /// The next event of this test's cluster for `node`, skipping others.
    async fn event_for(&mut self, node: &str) -> Result<NodeEvent> {
        self.event_where(|event| event.node_name == node).await
    }

    async fn event_where(&mut self, wanted: impl Fn(&NodeEvent) -> bool) -> Result<NodeEvent> {
        let cluster = self.cluster.clone();
        let found = tokio::time::timeout(WAIT, async {
            while let Some(event) = self.events.next().await {
                if event.cluster == cluster && wanted(&event) {
                    return Some(event);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(event)) => Ok(event),
            Ok(None) => bail!("the event stream ended"),
            Err(_) => bail!("no matching Node event within {WAIT:?}"),
        }
    }
}

fn node(name: &str, provider_id: Option<&str>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: provider_id.map(str::to_owned),
            ..NodeSpec::default()
        }),
        status: None,
    }
}

async fn create_node(server: &ApiServer, name: &str, provider_id: Option<&str>) -> Result<()> {
    Api::<Node>::all(server.client()?)
        .create(&PostParams::default(), &node(name, provider_id))
        .await?;
    Ok(())
}

fn node_name(node: Option<std::sync::Arc<Node>>) -> Option<String> {
    node.and_then(|node| node.metadata.name.clone())
}

#[tokio::test]
async fn client_from_secret_reaches_the_workload_server() -> Result<()> {
    let s = setup("wl-client").await?;
    let server = s.shared_workload()?;
    s.point_at(server).await?;
    let name = s.node_name("reach");
    create_node(server, &name, None).await?;

    let client = s.workload.client(&s.cluster).await?;
    let listed = Api::<Node>::all(client)
        .list(&ListParams::default())
        .await?;

    assert!(
        listed
            .items
            .iter()
            .any(|node| node.metadata.name.as_deref() == Some(&name)),
        "the client lists the workload server's Nodes"
    );
    Ok(())
}

#[tokio::test]
async fn created_node_appears_in_nodes_and_emits_event() -> Result<()> {
    let mut s = setup("wl-create").await?;
    let server = s.shared_workload()?;
    s.point_at(server).await?;
    s.workload.nodes(&s.cluster).await?;
    let name = s.node_name("created");
    let provider_id = format!("sim:///local-1/{name}");

    create_node(server, &name, Some(&provider_id)).await?;
    let event = s.event_for(&name).await?;

    assert_eq!(event.provider_id.as_deref(), Some(provider_id.as_str()));
    let nodes = s.workload.nodes(&s.cluster).await?;
    assert_eq!(
        node_name(nodes.by_provider_id(&provider_id)),
        Some(name.clone())
    );
    assert_eq!(node_name(nodes.by_name(&name)), Some(name));
    Ok(())
}

#[tokio::test]
async fn node_update_and_delete_emit_events() -> Result<()> {
    let mut s = setup("wl-update").await?;
    let server = s.shared_workload()?;
    s.point_at(server).await?;
    s.workload.nodes(&s.cluster).await?;
    let name = s.node_name("changing");
    let nodes = Api::<Node>::all(server.client()?);
    create_node(server, &name, None).await?;
    s.event_for(&name).await?;

    let provider_id = format!("sim:///local-1/{name}");
    let patch = serde_json::json!({"spec": {"providerID": provider_id}});
    nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let updated = s.event_for(&name).await?;
    assert_eq!(updated.provider_id.as_deref(), Some(provider_id.as_str()));
    assert_eq!(
        node_name(
            s.workload
                .nodes(&s.cluster)
                .await?
                .by_provider_id(&provider_id)
        ),
        Some(name.clone())
    );

    nodes.delete(&name, &DeleteParams::default()).await?;
    let deleted = s.event_for(&name).await?;
    assert_eq!(deleted.provider_id.as_deref(), Some(provider_id.as_str()));
    assert!(s.workload.nodes(&s.cluster).await?.by_name(&name).is_none());
    Ok(())
}

#[tokio::test]
async fn provider_id_lookup_is_exact() -> Result<()> {
    let mut s = setup("wl-exact").await?;
    let server = s.shared_workload()?;
    s.point_at(server).await?;
    s.workload.nodes(&s.cluster).await?;
    // The namespace keeps these IDs apart from other tests' on the shared server.
    let ns = s.namespace.clone();
    let aws = format!("aws:///us-east-2a/i-{ns}");
    let pool1 = format!("azure://westus2/{ns}/id-nodepool1/0");
    let pool2 = format!("azure://westus2/{ns}/id-nodepool2/0");
    for (name, provider_id) in [("aws", &aws), ("pool1", &pool1), ("pool2", &pool2)] {
        let name = s.node_name(name);
        create_node(server, &name, Some(provider_id)).await?;
        s.event_for(&name).await?;
    }

    let nodes = s.workload.nodes(&s.cluster).await?;

    assert_eq!(
        node_name(nodes.by_provider_id(&aws)),
        Some(s.node_name("aws"))
    );
    assert_eq!(nodes.by_provider_id(&format!("aws:////i-{ns}")), None);
    assert_eq!(
        node_name(nodes.by_provider_id(&pool1)),
        Some(s.node_name("pool1"))
    );
    assert_eq!(
        node_name(nodes.by_provider_id(&pool2)),
        Some(s.node_name("pool2"))
    );
    Ok(())
}

#[tokio::test]
async fn missing_secret_is_kubeconfig_secret_not_found() -> Result<()> {
    let s = setup("wl-nosecret").await?;

    let error = s
        .workload
        .nodes(&s.cluster)
        .await
        .err()
        .context("no Secret")?;

    assert!(
        matches!(error, Error::KubeconfigSecretNotFound { .. }),
        "{error:?}"
    );
    assert_eq!(error.reason().as_str(), "KubeconfigSecretNotFound");
    Ok(())
}

/// `data` as the Secret's content; the client must be refused as invalid.
async fn assert_invalid(prefix: &str, data: BTreeMap<String, ByteString>) -> Result<Error> {
    let s = setup(prefix).await?;
    s.secret_with(data).await?;

    let error = s
        .workload
        .client(&s.cluster)
        .await
        .err()
        .context("refused")?;

    assert_eq!(error.reason().as_str(), "KubeconfigInvalid", "{error:?}");
    Ok(error)
}

fn value(text: &str) -> BTreeMap<String, ByteString> {
    BTreeMap::from([("value".to_owned(), ByteString(text.as_bytes().to_vec()))])
}

#[tokio::test]
async fn secret_without_value_key_is_kubeconfig_invalid() -> Result<()> {
    let data = BTreeMap::from([("kubeconfig".to_owned(), ByteString(b"x".to_vec()))]);
    let error = assert_invalid("wl-nokey", data).await?;
    assert!(
        matches!(error, Error::KubeconfigMissingKey { .. }),
        "{error:?}"
    );
    Ok(())
}

#[tokio::test]
async fn garbage_kubeconfig_is_kubeconfig_invalid() -> Result<()> {
    let error = assert_invalid("wl-garbage", value("users: s3cr3t-t0ken")).await?;
    assert!(
        matches!(error, Error::KubeconfigInvalid { .. }),
        "{error:?}"
    );
    // The parser's message would quote the value; none of it may surface.
    let message = capwasm::report::error_chain(&error);
    assert!(!message.contains("s3cr3t"), "{message}");
    Ok(())
}

#[tokio::test]
async fn exec_plugin_kubeconfig_is_refused() -> Result<()> {
    let text = "apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: u}}]
clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]
users:
- name: u
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, id]}
";
    let error = assert_invalid("wl-exec", value(text)).await?;
    let message = capwasm::report::error_chain(&error);
    assert!(message.contains("exec credential plugin"), "{message}");
    Ok(())
}

#[tokio::test]
async fn stopped_api_server_is_unreachable_within_bound() -> Result<()> {
    let s = setup("wl-stopped").await?;
    let server = s.env.start_workload().await?;
    s.point_at(&server).await?;
    drop(server);

    let started = Instant::now();
    let error = s
        .workload
        .nodes(&s.cluster)
        .await
        .err()
        .context("stopped")?;

    let bound = Settings::default().initial_list_timeout;
    assert!(started.elapsed() < bound, "took {:?}", started.elapsed());
    assert!(matches!(error, Error::Unreachable { .. }), "{error:?}");
    assert_eq!(error.reason().as_str(), "WorkloadClusterUnreachable");
    Ok(())
}

#[tokio::test]
async fn changed_secret_switches_to_the_other_server() -> Result<()> {
    let mut s = setup("wl-rotate").await?;
    let first = s.shared_workload()?;
    s.point_at(first).await?;
    let on_first = s.node_name("first");
    create_node(first, &on_first, None).await?;
    let before = s.workload.nodes(&s.cluster).await?;
    assert!(before.by_name(&on_first).is_some());

    let second = s.env.start_workload().await?;
    let on_second = s.node_name("second");
    create_node(&second, &on_second, None).await?;
    let mut secret = second.kubeconfig_secret(&s.cluster.namespace, &s.cluster.name)?;
    let secrets = s.secrets()?;
    secret.metadata.resource_version = secrets
        .get(&s.cluster.kubeconfig_secret_name())
        .await?
        .metadata
        .resource_version;
    secrets
        .replace(
            &s.cluster.kubeconfig_secret_name(),
            &PostParams::default(),
            &secret,
        )
        .await?;

    // client() alone notices the change and restarts the Node watch on the new server.
    let client = s.workload.client(&s.cluster).await?;
    Api::<Node>::all(client).get(&on_second).await?;
    let late = s.node_name("second-late");
    create_node(&second, &late, None).await?;
    s.event_for(&late).await?;

    let after = s.workload.nodes(&s.cluster).await?;
    assert!(
        after.by_name(&on_second).is_some(),
        "serves the second server's Nodes"
    );
    assert!(after.by_name(&on_first).is_none(), "no longer the first's");
    Ok(())
}

#[tokio::test]
async fn forget_stops_the_watch() -> Result<()> {
    let mut s = setup("wl-forget").await?;
    let server = s.shared_workload()?;
    s.point_at(server).await?;
    s.workload.nodes(&s.cluster).await?;
    let forgotten = s.cluster.clone();
    s.workload.forget(&forgotten);

    // A second cluster on the same server, watched after the forget, is the
    // barrier: once it has reported two Nodes created after the forget, a
    // watch still running for the forgotten cluster would have reported the
    // first of them.
    let witness = ClusterKey::new(s.namespace.clone(), "wl-forget-witness");
    let secret = server.kubeconfig_secret(&witness.namespace, &witness.name)?;
    s.secrets()?.create(&PostParams::default(), &secret).await?;
    s.workload.nodes(&witness).await?;
    let names = [s.node_name("after-forget-1"), s.node_name("after-forget-2")];
    let mut late = Vec::new();
    for name in &names {
        create_node(server, name, None).await?;
        let reported = tokio::time::timeout(WAIT, async {
            while let Some(event) = s.events.next().await {
                if event.cluster == forgotten && names.contains(&event.node_name) {
                    late.push(event);
                } else if event.cluster == witness && event.node_name == *name {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(reported, Ok(true), "the witness reports {name}");
    }

    assert!(
        late.is_empty(),
        "the forgotten cluster still reports: {late:?}"
    );
    Ok(())
}

#[tokio::test]
async fn dropping_workload_clusters_stops_watches_and_ends_event_stream() -> Result<()> {
    let s = setup("wl-drop").await?;
    s.point_at(s.shared_workload()?).await?;
    s.workload.nodes(&s.cluster).await?;
    let Setup {
        workload, events, ..
    } = s;

    drop(workload);

    // Every watch task holds a sender: the stream ends only once all stopped.
    let ended = tokio::time::timeout(WAIT, events.count()).await;
    assert!(
        ended.is_ok(),
        "the event stream did not end within {WAIT:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_cluster_watches_and_requests_over_one_http2_connection() -> Result<()> {
    let s = setup("wl-http2").await?;
    let server = s.shared_workload()?;
    let scoped = ScopedWorkload::start(server).await?;
    let secret = scoped.kubeconfig_secret(&s.namespace, &s.cluster.name)?;
    s.secrets()?.create(&PostParams::default(), &secret).await?;
    s.workload.nodes(&s.cluster).await?;

    // While the Node watch stays open, requests in flight together: over
    // HTTP/1.1 each would need a connection of its own.
    let nodes = Api::<Node>::all(s.workload.client(&s.cluster).await?);
    let params = ListParams::default();
    let lists = (0..8).map(|_| nodes.list(&params));
    for listed in futures::future::join_all(lists).await {
        listed?;
    }

    assert_eq!(scoped.http1_requests(), 0, "every request came over HTTP/2");
    assert_eq!(scoped.connections(), 1, "the watch and the lists share one");
    Ok(())
}

#[tokio::test]
async fn more_nodes_than_the_bound_is_unreachable_naming_it_until_some_go() -> Result<()> {
    let settings = Settings {
        max_nodes: 2,
        ..Settings::default()
    };
    let mut s = setup_with("wl-max-nodes", settings).await?;
    // A server of its own: no other test's Nodes count against the bound.
    let server = s.env.start_workload().await?;
    s.point_at(&server).await?;
    let names = ["a", "b", "c"].map(|name| s.node_name(name));
    for name in &names {
        create_node(&server, name, None).await?;
    }

    let error = s.workload.nodes(&s.cluster).await.err().context("3 > 2")?;
    assert!(
        matches!(&error, Error::Unreachable { source, .. }
            if matches!(**source, WatchFailure::TooManyNodes { limit: 2 })),
        "{error:?}"
    );
    assert_eq!(error.reason().as_str(), "WorkloadClusterUnreachable");
    let message = capwasm::report::error_chain(&error);
    assert!(message.contains("more than 2 Nodes"), "{message}");

    // Back within the bound, the next attempt lists them (after its backoff).
    Api::<Node>::all(server.client()?)
        .delete(&names[2], &DeleteParams::default())
        .await?;
    s.event_for(&names[1]).await?;
    let nodes = s.workload.nodes(&s.cluster).await?;
    assert_eq!(nodes.len(), 2);
    Ok(())
}

/// What the hostile server answers a Node list with: far past any bound,
/// and more than the test process could hold unnoticed.
const HOSTILE_LIST: u64 = 500_000_000;

/// This process's resident and peak resident memory, in bytes.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map_or(0, |kib| kib << 10)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Waits until pool `name`'s `ReplicasReady` condition satisfies `done`
/// (given its reason), and returns its reason and message.
async fn replicas_ready(
    pools: &Api<MachinePool>,
    name: &str,
    what: &str,
    done: impl Fn(&str) -> bool,
) -> (String, String) {
    let reason_of = |pool: &MachinePool| {
        pool.status
            .as_ref()
            .and_then(|s| condition(&s.conditions, "ReplicasReady"))
            .map(|(_, reason, message)| (reason, message))
    };
    let pool = wait_for(pools, name, what, |pool: Option<&MachinePool>| {
        pool.and_then(reason_of)
            .is_some_and(|(reason, _)| done(&reason))
    })
    .await
    .expect("the pool exists");
    reason_of(&pool).expect("the condition is set")
}

// The security issue's case: "a workload API server answering a 500 MB
// NodeList marks that cluster unreachable and nothing else".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_500_mb_node_list_marks_only_its_cluster_unreachable() {
    let scenario = Scenario::new("wl-hostile").await;
    let hostile = HostileWorkload::start(HOSTILE_LIST).await.unwrap();
    let Scenario {
        stack,
        client,
        ns,
        apis,
        modules,
        ..
    } = &scenario;
    let (rss_before, _) = memory();
    let started = Instant::now();

    let secret = hostile.kubeconfig_secret(ns, "hostile").unwrap();
    stack
        .objects
        .create_cluster_objects(client, &secret, ns, "hostile", modules)
        .await
        .unwrap();
    create(client, &ClusterBuilder::new(ns, "hostile").build())
        .await
        .unwrap();
    scenario.cluster("good").await;
    scenario.pool("hostile-pool", "hostile", 1).await;
    scenario.pool("good-pool", "good", 1).await;

    let (_, message) = replicas_ready(
        &apis.pools,
        "hostile-pool",
        "ReplicasReady is WorkloadClusterUnreachable",
        |reason| reason == "WorkloadClusterUnreachable",
    )
    .await;
    let to_unreachable = started.elapsed();
    wait_for_pool(&apis.pools, "good-pool", "Running", 1).await;
    let to_running = started.elapsed();
    let (rss_after, peak) = memory();
    let (lists, sent, largest, hang_ups) = (
        hostile.node_lists(),
        hostile.bytes_sent(),
        hostile.largest_response(),
        hostile.hang_ups(),
    );
    eprintln!(
        "hostile pool unreachable after {to_unreachable:?}, good pool Running after \
         {to_running:?}; the hostile server answered {lists} Node lists, sent {sent} bytes \
         in all, at most {largest} in one ({hang_ups} hung up on); RSS {} MiB before, {} \
         MiB after, peak {} MiB; message: {message}",
        rss_before >> 20,
        rss_after >> 20,
        peak >> 20,
    );
    assert!(message.contains("more than 8 MiB"), "{message}");
    assert!(
        lists >= 1 && hang_ups >= 1,
        "{lists} lists, {hang_ups} hung up on"
    );
    // The client read up to its bound, then hung up: what the server got
    // to send beyond it sat in socket buffers.
    assert!(
        (8 << 20..64 << 20).contains(&largest),
        "one list sent {largest} bytes"
    );
    assert!(
        rss_after.saturating_sub(rss_before) < HOSTILE_LIST / 4,
        "RSS grew from {rss_before} to {rss_after} bytes"
    );

    // The same server answering sanely again (here: as the real workload
    // server, where the simulated cloud registered the pool's Node) is
    // reachable again after its backoff, and its pool goes on.
    hostile
        .behave_as(scenario.env.workload().expect("a workload server"))
        .unwrap();
    let behaved = Instant::now();
    wait_for_pool(&apis.pools, "hostile-pool", "Running", 1).await;
    eprintln!(
        "the hostile pool Running {:?} after its server behaved",
        behaved.elapsed()
    );
}
