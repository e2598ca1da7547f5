//! The scoped workload proxy (`testenv::scoped`) that stands between both
//! cores and the fleet bench's one workload API server: the requests
//! upstream Cluster API's cluster cache makes through a Cluster's kubeconfig
//! are answered as the API server answers them, and a Cluster's kubeconfig
//! still sees only its own Nodes and nothing outside its prefix.
//!
//! Upstream (v1.14, `controllers/clustercache`) connects to a workload
//! cluster in `createHTTPClientAndMapper` and probes it in
//! `clusterAccessor.HealthCheck`, both with
//! `restClient.Get().AbsPath("/").Timeout(..)`: client-go keeps the
//! kubeconfig server's path as a prefix and, for `AbsPath("/")`, its
//! trailing slash, so the probe is `GET <prefix>/?timeout=<timeout>`. Its
//! REST mapper then discovers `<prefix>/api` and `<prefix>/apis`, asking for
//! aggregated discovery.

use anyhow::{Context as _, Result};
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{Request, StatusCode};
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};
use kube::client::Body;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::Value;
use testenv::scoped::{CLUSTER_LABEL, ScopedWorkload};
use testenv::{ApiServer, TestEnv};

/// client-go's discovery `Accept` (`acceptDiscoveryFormats`): aggregated
/// discovery v2, then v2beta1, then the unaggregated lists.
const DISCOVERY_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
     application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,\
     application/json";

/// Upstream's health probe, relative to the kubeconfig's server (its default
/// `--clustercache-health-probe-timeout` is 5s).
const PROBE: &str = "/?timeout=5s";

/// One answer: its status, content type and body.
struct Answer {
    status: StatusCode,
    content_type: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Result<Value> {
        serde_json::from_slice(&self.body).with_context(|| {
            format!(
                "a {} answer is not JSON: {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// `GET path` relative to `client`'s server, as client-go sends it.
async fn get(client: &Client, path: &str, accept: &str) -> Result<Answer> {
    let request = Request::get(path)
        .header(ACCEPT, accept)
        .body(Body::empty())?;
    let response = client.send(request).await?;
    let status = response.status();
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.into_body().collect_bytes().await?.to_vec();
    Ok(Answer {
        status,
        content_type,
        body,
    })
}

/// The kubeconfig in a `<cluster>-kubeconfig` Secret.
fn kubeconfig_in(secret: &Secret) -> Result<Kubeconfig> {
    let value = secret
        .data
        .as_ref()
        .and_then(|data| data.get("value"))
        .context("the Secret has a value")?;
    Ok(Kubeconfig::from_yaml(std::str::from_utf8(&value.0)?)?)
}

/// The client a controller builds from `kubeconfig`.
async fn client_for(kubeconfig: Kubeconfig) -> Result<Client> {
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// The client a controller builds from a `<cluster>-kubeconfig` Secret.
async fn client_from(secret: &Secret) -> Result<Client> {
    client_for(kubeconfig_in(secret)?).await
}

/// The same client with the proxy's bare address as its server: no
/// Cluster's prefix.
async fn unscoped_client_from(secret: &Secret) -> Result<Client> {
    let mut kubeconfig = kubeconfig_in(secret)?;
    for named in &mut kubeconfig.clusters {
        if let Some(server) = named.cluster.as_mut().and_then(|c| c.server.as_mut()) {
            let uri: http::Uri = server.parse()?;
            *server = format!(
                "https://{}",
                uri.authority().context("the server has an address")?
            );
        }
    }
    client_for(kubeconfig).await
}

fn workload(env: &TestEnv) -> Result<&ApiServer> {
    env.workload()
        .context("the shared environment has a workload server")
}

#[tokio::test]
async fn upstreams_cluster_cache_probe_and_discovery_are_answered_through_the_proxy() -> Result<()>
{
    let env = TestEnv::shared().await?;
    let server = workload(env)?;
    let scoped = ScopedWorkload::start(server).await?;
    let secret = scoped.kubeconfig_secret("default", "probed")?;
    let through = client_from(&secret).await?;
    let direct = server.client()?;

    // The health probe: `GET /` answers the server's paths.
    let proxied = get(&through, PROBE, "application/json, */*").await?;
    let answered = get(&direct, PROBE, "application/json, */*").await?;
    assert_eq!(
        proxied.status,
        StatusCode::OK,
        "the probe through the proxy: {}",
        String::from_utf8_lossy(&proxied.body)
    );
    assert_eq!(proxied.status, answered.status);
    assert_eq!(proxied.content_type, answered.content_type);
    let paths = proxied.json()?["paths"].clone();
    for path in ["/api", "/apis", "/version"] {
        assert!(
            paths
                .as_array()
                .is_some_and(|paths| paths.iter().any(|p| p == path)),
            "the probe's answer lists {path}: {paths}"
        );
    }

    // The prefix without its slash is the same root.
    let bare = unscoped_client_from(&secret).await?;
    let answer = get(&bare, "/clusters/probed?timeout=5s", "application/json").await?;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json()?["paths"], paths);

    // The REST mapper's discovery, aggregated: the core group (which it
    // needs for Nodes) as the server has it, and the named groups.
    let proxied = get(&through, "/api", DISCOVERY_ACCEPT).await?;
    let answered = get(&direct, "/api", DISCOVERY_ACCEPT).await?;
    assert_eq!(proxied.status, StatusCode::OK);
    assert_eq!(proxied.content_type, answered.content_type);
    assert!(
        proxied.content_type.contains("as=APIGroupDiscoveryList"),
        "aggregated discovery: {}",
        proxied.content_type
    );
    assert_eq!(proxied.json()?, answered.json()?);
    let nodes = proxied.json()?["items"][0]["versions"][0]["resources"]
        .as_array()
        .is_some_and(|resources| resources.iter().any(|r| r["resource"] == "nodes"));
    assert!(nodes, "core v1 lists nodes");

    let proxied = get(&through, "/apis", DISCOVERY_ACCEPT).await?;
    let answered = get(&direct, "/apis", DISCOVERY_ACCEPT).await?;
    assert_eq!(proxied.status, StatusCode::OK);
    assert_eq!(proxied.content_type, answered.content_type);
    assert_eq!(proxied.json()?["kind"], "APIGroupDiscoveryList");
    Ok(())
}

#[tokio::test]
async fn a_clusters_kubeconfig_reaches_only_its_own_nodes_through_the_proxy() -> Result<()> {
    let env = TestEnv::shared().await?;
    let server = workload(env)?;
    let namespace = env.management().create_namespace("scoped").await?;
    let scoped = ScopedWorkload::start(server).await?;
    let (ours, theirs) = (format!("{namespace}-a"), format!("{namespace}-b"));
    for cluster in [&ours, &theirs] {
        let node = Node {
            metadata: ObjectMeta {
                name: Some(cluster.clone()),
                labels: Some([(CLUSTER_LABEL.to_owned(), cluster.clone())].into()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        Api::<Node>::all(server.client()?)
            .create(&PostParams::default(), &node)
            .await?;
    }
    let secret = scoped.kubeconfig_secret(&namespace, &ours)?;

    let listed = Api::<Node>::all(client_from(&secret).await?)
        .list(&ListParams::default())
        .await?;
    let names: Vec<_> = listed
        .items
        .iter()
        .filter_map(|node| node.metadata.name.as_deref())
        .collect();
    assert_eq!(names, [ours.as_str()], "only the Cluster's own Node");

    // Outside every Cluster's prefix the proxy answers nothing.
    let unscoped = unscoped_client_from(&secret).await?;
    for path in [PROBE, "/api", "/api/v1/nodes"] {
        let answer = get(&unscoped, path, "application/json").await?;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path} unscoped");
    }
    Ok(())
}
