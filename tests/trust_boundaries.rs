//! What a provider or a tenant may reach, through the operator and real API
//! servers: a provider claiming Nodes it never made (another cloud's, the
//! control plane's) is refused and no Node of the workload cluster is
//! touched; a namespace a ProviderModule or ClusterTemplate does not allow
//! gets a condition and no call; a bearer rule's token never reaches
//! another port of its host, nor goes over plain HTTP.

use std::collections::BTreeMap;

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::post;
use capwasm::api::providermodule::{
    BearerToken, ModuleCapabilities, RequestAuth, SecretReference, World,
};
use capwasm::api::tenancy::AllowedNamespaces;
use capwasm::api::{ObjectStatus as _, ProviderModule, WasmCluster};
use capwasm::testing::guest_path;
use capwasm::testing::objects::{self, ClusterBuilder, MachinePoolBuilder, ProviderModuleBuilder};
use k8s_openapi::api::core::v1::{Node, NodeSpec};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client, ResourceExt as _};
use serde_json::json;
use testenv::CREDENTIALS_NAMESPACE;
use testenv::flows::{
    Providers, Scenario, condition, create, create_pool, credentials_secret, wait_for,
    wait_for_event, wait_for_module,
};

/// Creates ProviderModule `module` and waits until it is in service.
async fn serve(client: &Client, module: ProviderModule) {
    let api = Api::<ProviderModule>::all(client.clone());
    let name = module.name_any();
    api.create(&PostParams::default(), &module).await.unwrap();
    wait_for_module(&api, &name, "Ready").await;
}

/// The hostile bad-results guest as infrastructure module `name`, whose
/// instances' providerIDs it declares start `prefix`.
fn claiming(name: &str, prefix: &str) -> ProviderModule {
    ProviderModuleBuilder::file(
        name,
        World::Infrastructure,
        &guest_path("hostile_bad_results.wasm").to_string_lossy(),
    )
    .provider_id_prefix(prefix)
    .build()
}

/// A Node of the workload server reporting `provider_id`, with `labels`.
fn node(name: &str, provider_id: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(provider_id.into()),
            ..NodeSpec::default()
        }),
        ..Node::default()
    }
}

/// Waits until `name`'s Ready condition has `reason`; its message.
async fn not_ready<K>(api: &Api<K>, name: &str, reason: &str) -> String
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static
        + capwasm::api::HasStatus,
{
    let found = wait_for(api, name, &format!("Ready says {reason}"), |o| {
        o.and_then(|o| o.status())
            .and_then(|s| condition(s.conditions(), "Ready"))
            .is_some_and(|(_, r, _)| r == reason)
    })
    .await
    .unwrap();
    let status = found.status().cloned().unwrap_or_default();
    condition(status.conditions(), "Ready").unwrap().2
}

/// A provider that reports the providerIDs of Nodes it never made — of
/// another cloud, of the control plane — gets `InvalidProviderResult`:
/// nothing of its result is recorded, and no Node of the workload cluster
/// is matched, marked or deleted, also once its pools are deleted.
#[tokio::test]
async fn a_provider_claiming_nodes_it_did_not_make_is_refused_and_no_node_is_touched() {
    let scenario = Scenario::with_cluster("claim", "c").await;
    let (client, ns) = (&scenario.client, &scenario.ns);
    let workload = scenario.env.workload().unwrap().client().unwrap();
    let nodes = Api::<Node>::all(workload);
    let control_plane = format!("kind://docker/kind/cp-{ns}");
    let worker = format!("kind://docker/kind/worker-{ns}");
    for made in [
        node(
            &format!("cp-{ns}"),
            &control_plane,
            &[("node-role.kubernetes.io/control-plane", "")],
        ),
        node(&format!("worker-{ns}"), &worker, &[]),
    ] {
        nodes.create(&PostParams::default(), &made).await.unwrap();
    }
    let mut before = Vec::new();
    for name in [format!("cp-{ns}"), format!("worker-{ns}")] {
        before.push(nodes.get(&name).await.unwrap());
    }

    // One module declares another scheme; the other declares kind's, so
    // only the control plane's role can refuse its claim.
    let (elsewhere, same_scheme) = (format!("{ns}-hostile"), format!("{ns}-kind"));
    serve(client, claiming(&elsewhere, "hostile://")).await;
    serve(client, claiming(&same_scheme, "kind://")).await;
    let bootstrap = scenario
        .stack
        .objects
        .providers(&scenario.modules)
        .bootstrap;
    let cases = [
        (
            "other",
            &elsewhere,
            &worker,
            "outside the module's capabilities.providerIDPrefix",
        ),
        (
            "cp",
            &same_scheme,
            &control_plane,
            "the providerID of a control-plane Node",
        ),
    ];
    for (pool, module, claimed, _) in cases {
        let providers = Providers {
            bootstrap: bootstrap.clone(),
            infrastructure: (
                module.clone(),
                json!({ "mode": "claim", "providerIDs": [claimed] }),
            ),
        };
        let built = MachinePoolBuilder::new(ns, pool, "c").replicas(1).build();
        create_pool(client, &built, &providers).await.unwrap();
    }
    for (pool, _, claimed, rule) in cases {
        let message = not_ready(&scenario.apis.infra_pools, pool, "InvalidProviderResult").await;
        assert!(
            message.contains(rule) && message.contains(claimed),
            "{message}"
        );
        let recorded = scenario.apis.infra_pools.get(pool).await.unwrap();
        assert!(recorded.spec.provider_id_list.is_empty(), "{recorded:?}");
        let machine_pool = scenario.apis.pools.get(pool).await.unwrap();
        let refs = machine_pool.status.map(|s| s.node_refs).unwrap_or_default();
        assert!(refs.is_empty(), "{refs:?}");
    }
    let event = wait_for_event(client, ns, "cp", "InvalidProviderResult").await;
    assert!(event.contains("control-plane"), "{event}");

    for pool in ["other", "cp"] {
        scenario
            .apis
            .pools
            .delete(pool, &kube::api::DeleteParams::default())
            .await
            .unwrap();
    }
    for pool in ["other", "cp"] {
        wait_for(&scenario.apis.pools, pool, "the pool is gone", |p| {
            p.is_none()
        })
        .await;
    }
    for node in before {
        let now = nodes.get(&node.name_any()).await.unwrap();
        assert_eq!(
            now.metadata.resource_version,
            node.metadata.resource_version,
            "Node {} is exactly as it was",
            node.name_any()
        );
    }
}

/// A ProviderModule serves only the namespaces it allows: an object of
/// another namespace gets `NamespaceNotAllowed` and an Event, and no call
/// is made for it; allowing the namespace (by a label) lets it through.
#[tokio::test]
async fn a_namespace_a_provider_module_does_not_allow_gets_a_condition_and_no_call() {
    let scenario = Scenario::new("tenancy").await;
    let (client, ns) = (&scenario.client, &scenario.ns);
    // The credential-dump guest reports every request it made; here it is
    // given none, and the module's metrics count calls.
    let name = format!("{ns}-closed");
    let module = ProviderModuleBuilder::file(
        &name,
        World::Infrastructure,
        &guest_path("hostile_credential_dump.wasm").to_string_lossy(),
    )
    .allowed_namespaces(Some(AllowedNamespaces::named(&["someone-else"])))
    .build();
    serve(client, module).await;
    create(
        client,
        &objects::wasm_cluster(ns, "c", &name, json!({ "requests": [] })),
    )
    .await
    .unwrap();
    create(
        client,
        &ClusterBuilder::new(ns, "c")
            .endpoint("127.0.0.1", 6443)
            .build(),
    )
    .await
    .unwrap();
    let infra = Api::<WasmCluster>::namespaced(client.clone(), ns);
    let message = not_ready(&infra, "c", "NamespaceNotAllowed").await;
    assert!(
        message.contains(&format!(
            "ProviderModule {name:?} does not allow namespace {ns:?}"
        )),
        "{message}"
    );
    let event = wait_for_event(client, ns, "c", "NamespaceNotAllowed").await;
    assert!(event.contains("allowedNamespaces"), "{event}");
    let served = infra.get("c").await.unwrap();
    assert!(
        served
            .status
            .as_ref()
            .and_then(|s| s.common.served_by.as_ref())
            .is_none(),
        "no call was made: {served:?}"
    );

    // Allowed by a label of the namespace: the call is made, and the
    // guest's answer (it was given nothing to send) shows.
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    let label = json!({ "metadata": { "labels": { "tenant.example.com/tier": "gold" } } });
    namespaces
        .patch(
            ns,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(label),
        )
        .await
        .unwrap();
    let selector = json!({ "spec": { "allowedNamespaces": { "selector": { "matchLabels": { "tenant.example.com/tier": "gold" } } } } });
    Api::<ProviderModule>::all(client.clone())
        .patch(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(selector),
        )
        .await
        .unwrap();
    let message = not_ready(&infra, "c", "ProviderFailed").await;
    assert!(message.contains("AllAnswered"), "{message}");
}

/// A ClusterTemplate whose rule leaves out a namespace: a PlatformCluster
/// of that namespace is held with `NamespaceNotAllowed`, nothing rendered.
#[tokio::test]
async fn a_namespace_a_cluster_template_does_not_allow_renders_nothing() {
    use capwasm::api::platform::{ClusterTemplateSpec, PlatformClusterSpec};
    use capwasm::api::{ClusterTemplate, PlatformCluster};

    let scenario = Scenario::new("tenancy-template").await;
    let (client, ns) = (&scenario.client, &scenario.ns);
    let module = format!("{ns}-platform");
    serve(
        client,
        ProviderModuleBuilder::file(
            &module,
            World::Platform,
            &guest_path("sim_platform.wasm").to_string_lossy(),
        )
        .allowed_kinds(capwasm::testing::SIM_PLATFORM_KINDS)
        .build(),
    )
    .await;
    for (name, rule) in [
        (format!("{ns}-none"), None),
        (
            format!("{ns}-other"),
            Some(AllowedNamespaces::named(&["someone-else"])),
        ),
    ] {
        let template = ClusterTemplate::new(
            &name,
            ClusterTemplateSpec {
                provider: module.clone(),
                values: Some(json!({ "kubernetesVersion": "v1.31.2",
                    "bootstrap": { "provider": scenario.modules.bootstrap },
                    "infrastructure": { "provider": scenario.modules.infrastructure } })),
                allowed_namespaces: rule,
                ..ClusterTemplateSpec::default()
            },
        );
        Api::<ClusterTemplate>::all(client.clone())
            .create(&PostParams::default(), &template)
            .await
            .unwrap();
        let cluster_name = name.trim_start_matches(&format!("{ns}-")).to_owned();
        let mut cluster = PlatformCluster::new(
            &cluster_name,
            PlatformClusterSpec {
                template_name: name.clone(),
                ..PlatformClusterSpec::default()
            },
        );
        cluster.metadata.namespace = Some(ns.clone());
        create(client, &cluster).await.unwrap();
        let clusters = Api::<PlatformCluster>::namespaced(client.clone(), ns);
        let held = wait_for(
            &clusters,
            &cluster_name,
            "the template is not allowed",
            |c| {
                c.and_then(|c| c.status.as_ref()).is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "TemplateAccepted" && c.reason == "NamespaceNotAllowed")
                })
            },
        )
        .await
        .unwrap();
        let message = held
            .status
            .unwrap()
            .conditions
            .into_iter()
            .find(|c| c.type_ == "TemplateAccepted")
            .unwrap()
            .message;
        assert!(
            message.contains(&format!(
                "ClusterTemplate {name:?} does not allow namespace {ns:?}"
            )),
            "{message}"
        );
    }
    let rendered = scenario
        .apis
        .clusters
        .list(&kube::api::ListParams::default())
        .await
        .unwrap();
    assert!(rendered.items.is_empty(), "nothing was rendered");
}

/// Records the Authorization header of every POST to `/`; its address.
async fn recorder() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>,
) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let app = Router::new().route(
        "/",
        post(move |headers: HeaderMap| async move {
            let authorization = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            record.lock().unwrap().push(authorization);
            "recorded"
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (address, seen)
}

/// A bearer rule names a scheme, a host and a port: through the operator,
/// a provider's request to another port of the ruled host, or over plain
/// HTTP to a rule for HTTPS, is refused unsent and carries no token.
#[tokio::test]
async fn a_bearer_token_never_reaches_another_port_or_goes_over_plain_http() {
    let scenario = Scenario::new("bearer").await;
    let (client, ns) = (&scenario.client, &scenario.ns);
    let (ruled, seen_ruled) = recorder().await;
    let (other, seen_other) = recorder().await;
    let secret = format!("{ns}-token");
    credentials_secret(client, &secret, &[("token", "s3cret-bearer-token")]).await;
    let module = |name: &str, plain_http: bool| {
        let mut module = ProviderModuleBuilder::file(
            name,
            World::Infrastructure,
            &guest_path("hostile_credential_dump.wasm").to_string_lossy(),
        )
        .build();
        module.spec.capabilities = Some(ModuleCapabilities {
            // Every port of loopback may be reached; the token is for one.
            allowed_hosts: vec!["127.0.0.1".into(), ruled.to_string()],
            credentials_secret: Some(SecretReference {
                namespace: CREDENTIALS_NAMESPACE.into(),
                name: secret.clone(),
            }),
            request_auth: vec![RequestAuth {
                host: ruled.to_string(),
                plain_http,
                bearer: Some(BearerToken {
                    token_key: "token".into(),
                }),
                aws_sig_v4: None,
            }],
            ..ModuleCapabilities::default()
        });
        module
    };
    let (for_https, for_plain) = (format!("{ns}-https"), format!("{ns}-http"));
    serve(client, module(&for_https, false)).await;
    serve(client, module(&for_plain, true)).await;
    let cases = [
        ("to-other-port", &for_plain, other, "HttpRequestDenied"),
        (
            "plain-to-https-rule",
            &for_https,
            ruled,
            "HttpRequestDenied",
        ),
        ("as-ruled", &for_plain, ruled, "AllAnswered"),
    ];
    for (name, module, target, _) in cases {
        let config = json!({ "requests": [{ "url": format!("http://{target}/") }] });
        create(client, &objects::wasm_cluster(ns, name, module, config))
            .await
            .unwrap();
        create(
            client,
            &ClusterBuilder::new(ns, name)
                .endpoint("127.0.0.1", 6443)
                .build(),
        )
        .await
        .unwrap();
    }
    let infra = Api::<WasmCluster>::namespaced(client.clone(), ns);
    for (name, _, _, said) in cases {
        let message = not_ready(&infra, name, "ProviderFailed").await;
        assert!(message.contains(said), "{name}: {message}");
    }
    assert!(
        seen_other.lock().unwrap().is_empty(),
        "nothing reached the other port"
    );
    let ruled = seen_ruled.lock().unwrap().clone();
    assert_eq!(
        ruled,
        [Some("Bearer s3cret-bearer-token".to_owned())],
        "only the request the rule names reached it, with the token"
    );
}

/// A result that keeps every rule for each instance but would make a
/// status past its bound (80 instances of 32 long addresses: about 700 KiB)
/// is refused whole, and the status keeps what it had.
#[tokio::test]
async fn instances_whose_status_would_pass_its_bound_are_refused() {
    let scenario = Scenario::with_cluster("wide", "c").await;
    let (client, ns) = (&scenario.client, &scenario.ns);
    let module = format!("{ns}-wide");
    serve(client, claiming(&module, "hostile://")).await;
    let providers = Providers {
        bootstrap: scenario
            .stack
            .objects
            .providers(&scenario.modules)
            .bootstrap,
        infrastructure: (module, json!({ "mode": "wide" })),
    };
    let pool = MachinePoolBuilder::new(ns, "wide", "c")
        .replicas(80)
        .build();
    create_pool(client, &pool, &providers).await.unwrap();
    let message = not_ready(&scenario.apis.infra_pools, "wide", "InvalidProviderResult").await;
    assert!(
        message.contains("a result whose status would be over 512 KiB")
            && message.contains("instances ("),
        "{message}"
    );
    let recorded = scenario.apis.infra_pools.get("wide").await.unwrap();
    let instances = recorded.status.map(|s| s.instances).unwrap_or_default();
    assert!(instances.is_empty(), "nothing of it was recorded");
}
