//! Bootstrap tokens the host owns (issue 34, item 4; upstream's
//! kubernetes-sigs/cluster-api #3359 and #11034): a kubeadm-bootstrap config
//! without a token joins with one the operator made in the workload cluster
//! (`kube-system/bootstrap-token-<id>`, as kubeadm makes it), kept alive
//! while machines have to join and left to expire after; a pool scaled once
//! its token expired, and again once its token Secret was deleted by hand,
//! joins with a fresh token, losing and duplicating no instance; the sweep
//! deletes only expired Secrets shaped as the host's tokens, never a
//! labelled Secret of another shape or the token a decoy names. The TTL is
//! a few seconds here; the operator's default is kubeadm's 15 minutes.

use std::collections::BTreeMap;
use std::time::Duration;

use capwasm::api::MachinePool;
use capwasm::api::ProviderModule;
use capwasm::api::providermodule::World;
use capwasm::controllers::bootstrap::{CONFIG_UID_LABEL, TOKEN_ID_ANNOTATION};
use capwasm::simcloud::InstanceRecord;
use capwasm::testing::guest_path;
use capwasm::testing::objects::{MachinePoolBuilder, ProviderModuleBuilder};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt as _};
use testenv::flows::{
    Apis, create_pool, scale, wait_for, wait_for_cluster, wait_for_event, wait_for_module,
    wait_for_pool,
};
use testenv::{ApiServer, Stack, TestEnv};

/// Short enough for a test, long enough for a pool to come up well within
/// it (the simulated cloud boots in 300 ms), so that a token is still there
/// to read once its machines have joined.
const TTL: Duration = Duration::from_secs(20);

/// A token as the workload cluster holds it.
struct Token {
    id: String,
    /// `id.secret`, as `kubeadm join --token` takes it.
    joined: String,
    expires: Timestamp,
}

fn data(secret: &Secret, key: &str) -> String {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .unwrap_or_default()
}

async fn token(tokens: &Api<Secret>, id: &str) -> Option<Token> {
    let secret = tokens
        .get_opt(&format!("bootstrap-token-{id}"))
        .await
        .unwrap()?;
    assert_eq!(
        secret.type_.as_deref(),
        Some("bootstrap.kubernetes.io/token")
    );
    for (key, value) in [
        ("usage-bootstrap-authentication", "true"),
        ("usage-bootstrap-signing", "true"),
        (
            "auth-extra-groups",
            "system:bootstrappers:kubeadm:default-node-token",
        ),
        ("token-id", id),
    ] {
        assert_eq!(data(&secret, key), value, "{key} of token {id}");
    }
    Some(Token {
        id: id.to_owned(),
        joined: format!("{id}.{}", data(&secret, "token-secret")),
        expires: data(&secret, "expiration").parse().unwrap(),
    })
}

/// The id of the token the pool's bootstrap data holds, from its Secret.
async fn data_token_id(client: &Client, ns: &str) -> String {
    Api::<Secret>::namespaced(client.clone(), ns)
        .get("pool")
        .await
        .unwrap()
        .annotations()
        .get(TOKEN_ID_ANNOTATION)
        .cloned()
        .expect("the data Secret names the host's token")
}

fn booted_with(instance: &InstanceRecord, token: &Token) -> bool {
    String::from_utf8_lossy(&instance.bootstrap_data)
        .contains(&format!("token: \"{}\"", token.joined))
}

/// The pool's instances in the cloud by id, and checks there are `count`.
fn instances(stack: &Stack, ns: &str, count: usize) -> BTreeMap<String, InstanceRecord> {
    let listed = stack.cloud.instances_of(&format!("{ns}/pool"));
    let by_id: BTreeMap<_, _> = listed
        .into_iter()
        .map(|r| (r.instance.id.clone(), r))
        .collect();
    assert_eq!(by_id.len(), count, "instances: {:?}", by_id.keys());
    by_id
}

/// The token's secret appears in none of the pool's objects but the data
/// Secret (where a machine's cloud-config must carry it).
async fn not_in_objects(apis: &Apis, token: &Token) {
    let pool = serde_json::to_string(&apis.pools.get("pool").await.unwrap()).unwrap();
    let config = serde_json::to_string(&apis.configs.get("pool").await.unwrap()).unwrap();
    let infra = serde_json::to_string(&apis.infra_pools.get("pool").await.unwrap()).unwrap();
    for (what, text) in [
        ("MachinePool", pool),
        ("config", config),
        ("WasmMachinePool", infra),
    ] {
        assert!(!text.contains(&token.joined), "the {what} holds the token");
    }
}

/// Cluster `c1` of `workload` and pool `pool` of one replica, its
/// kubeadm-bootstrap config without a token, Running.
async fn pool_of_one_without_a_token(
    stack: &Stack,
    client: &Client,
    workload: &ApiServer,
    ns: &str,
    apis: &Apis,
    guest: Option<&str>,
) {
    let mut modules = stack.objects.modules(client, ns).await.unwrap();
    if let Some(file) = guest {
        let api = Api::<ProviderModule>::all(client.clone());
        let name = format!("{ns}-kubeadm-guest");
        let module = ProviderModuleBuilder::file(
            &name,
            World::Bootstrap,
            &guest_path(file).to_string_lossy(),
        )
        .build();
        api.create(&PostParams::default(), &module).await.unwrap();
        wait_for_module(&api, &name, "Ready").await;
        modules.bootstrap = name;
    }
    stack
        .objects
        .create_cluster(client, workload, ns, "c1", &modules)
        .await
        .unwrap();
    wait_for_cluster(&apis.clusters, "c1", "Provisioned").await;

    // A config without a token: the host makes one.
    let mut providers = stack.objects.providers(&modules);
    let removed = providers
        .bootstrap
        .1
        .as_object_mut()
        .and_then(|c| c.remove("token"));
    assert!(
        removed.is_some(),
        "the fixture's config had a token to remove"
    );
    let pool = MachinePoolBuilder::new(ns, "pool", "c1")
        .replicas(1)
        .build();
    create_pool(client, &pool, &providers).await.unwrap();
    wait_for_pool(&apis.pools, "pool", "Running", 1).await;
}

/// One operator with the short TTL for the tests of this file (one
/// simulated cloud, so that no two instances share a Node name).
static STACK: tokio::sync::OnceCell<Stack> = tokio::sync::OnceCell::const_new();

/// [`STACK`], started by the first test that asks.
async fn stack(env: &'static TestEnv) -> &'static Stack {
    STACK
        .get_or_init(|| async {
            Stack::of_with(env, |settings| settings.bootstrap_token_ttl = TTL)
                .await
                .unwrap()
        })
        .await
}

#[tokio::test]
async fn a_pool_of_the_rust_provider_scaled_after_its_token_expired_or_was_deleted_joins() {
    Box::pin(scaled_after_expiry_and_deletion("tokens-rs", None)).await;
}

#[tokio::test]
async fn a_pool_of_the_python_provider_scaled_after_its_token_expired_or_was_deleted_joins() {
    Box::pin(scaled_after_expiry_and_deletion(
        "tokens-py",
        Some("python-kubeadm-bootstrap.wasm"),
    ))
    .await;
}

#[tokio::test]
async fn a_pool_of_the_typescript_provider_scaled_after_its_token_expired_or_was_deleted_joins() {
    Box::pin(scaled_after_expiry_and_deletion(
        "tokens-js",
        Some("js-kubeadm-bootstrap.wasm"),
    ))
    .await;
}

/// The scenario with kubeadm-bootstrap built from `guest` (the Rust one
/// if none).
async fn scaled_after_expiry_and_deletion(prefix: &str, guest: Option<&str>) {
    let env = TestEnv::shared().await.unwrap();
    let stack = stack(env).await;
    let client = env.management().client().unwrap();
    let workload = env.workload().unwrap();
    let tokens: Api<Secret> = Api::namespaced(workload.client().unwrap(), "kube-system");
    let ns = env.management().create_namespace(prefix).await.unwrap();
    let apis = Apis::new(&client, &ns);
    pool_of_one_without_a_token(stack, &client, workload, &ns, &apis, guest).await;
    let first = token(&tokens, &data_token_id(&client, &ns).await)
        .await
        .expect("the first token is in the workload cluster");
    let before = instances(stack, &ns, 1);
    let (first_id, first_instance) = before.iter().next().unwrap();
    assert!(
        booted_with(first_instance, &first),
        "the first instance joins with the host's token"
    );
    not_in_objects(&apis, &first).await;
    let uid = apis.configs.get("pool").await.unwrap().uid().unwrap();
    let made = tokens
        .list(&ListParams::default().labels(&format!("{CONFIG_UID_LABEL}={uid}")))
        .await
        .unwrap();
    assert_eq!(made.items.len(), 1, "one token for one config");

    // Every machine joined: the token is left to expire, and then deleted.
    let name = format!("bootstrap-token-{}", first.id);
    wait_for(&tokens, &name, "the expired token is deleted", |s| {
        s.is_none()
    })
    .await;
    assert!(
        Timestamp::now() >= first.expires,
        "deleted only once expired"
    );

    // Scaled after that: a new token, new data, the first instance kept.
    scale(&apis.pools, "pool", 2).await.unwrap();
    wait_for_pool(&apis.pools, "pool", "Running", 2).await;
    wait_for_event(&client, &ns, "pool", "BootstrapTokenRenewed").await;
    let second = token(&tokens, &data_token_id(&client, &ns).await)
        .await
        .expect("the second token is in the workload cluster");
    assert_ne!(second.id, first.id);
    assert!(
        second.expires > first.expires,
        "made after the first expired"
    );
    let after = instances(stack, &ns, 2);
    assert!(after.contains_key(first_id), "the first instance is kept");
    let new: Vec<_> = after
        .values()
        .filter(|r| &r.instance.id != first_id)
        .collect();
    assert!(
        booted_with(new[0], &second),
        "the new instance joins with the fresh token"
    );
    assert!(!booted_with(new[0], &first));

    // The token Secret deleted by hand: the next scale-up makes a new one,
    // with a Warning on the config; no machine boots with the deleted one.
    tokens
        .delete(
            &format!("bootstrap-token-{}", second.id),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
    scale(&apis.pools, "pool", 3).await.unwrap();
    let pool: MachinePool = wait_for_pool(&apis.pools, "pool", "Running", 3).await;
    assert_eq!(pool.spec.provider_id_list.len(), 3);
    let note = wait_for_event(&client, &ns, "pool", "BootstrapTokenMissing").await;
    assert!(note.contains(&second.id), "{note}");
    let third = token(&tokens, &data_token_id(&client, &ns).await)
        .await
        .expect("the third token is in the workload cluster");
    assert!(third.id != first.id && third.id != second.id);
    let last = instances(stack, &ns, 3);
    for id in after.keys() {
        assert!(last.contains_key(id), "instance {id} is kept");
    }
    let newest: Vec<_> = last
        .values()
        .filter(|r| !after.contains_key(&r.instance.id))
        .collect();
    assert!(
        booted_with(newest[0], &third),
        "the newest instance joins with the third token"
    );
    not_in_objects(&apis, &third).await;
}

/// Secrets labelled as the config's tokens, expired: the sweep deletes
/// the one shaped as the host makes a token (its type, named for the token
/// its data holds), and leaves alone a decoy of another name whose data
/// names someone else's token, a labelled Secret of another type, and that
/// other token.
#[tokio::test]
async fn the_sweep_deletes_only_expired_secrets_shaped_as_its_tokens_never_the_token_a_decoy_names()
{
    let env = TestEnv::shared().await.unwrap();
    let stack = stack(env).await;
    let client = env.management().client().unwrap();
    let workload = env.workload().unwrap();
    let tokens: Api<Secret> = Api::namespaced(workload.client().unwrap(), "kube-system");
    let ns = env
        .management()
        .create_namespace("tokens-decoy")
        .await
        .unwrap();
    let apis = Apis::new(&client, &ns);
    pool_of_one_without_a_token(stack, &client, workload, &ns, &apis, None).await;
    let uid = apis.configs.get("pool").await.unwrap().uid().unwrap();
    let (past, future) = ("2000-01-01T00:00:00Z", "2099-01-01T00:00:00Z");

    // Someone else's token, unexpired and not labelled for the config.
    let victim_id = "vctm01";
    let victim = token_secret(
        &format!("bootstrap-token-{victim_id}"),
        victim_id,
        future,
        None,
    );
    // Labelled as the config's and expired: a decoy naming the victim, a
    // Secret of another type, and one shaped as the host's own tokens.
    let decoy = token_secret("decoy-token", victim_id, past, Some(&uid));
    let mut opaque = token_secret("bootstrap-token-opq001", "opq001", past, Some(&uid));
    opaque.type_ = Some("Opaque".into());
    let expired = token_secret("bootstrap-token-exp001", "exp001", past, Some(&uid));
    let mut left = Vec::new();
    for secret in [victim, decoy, opaque] {
        left.push(
            tokens
                .create(&PostParams::default(), &secret)
                .await
                .unwrap(),
        );
    }
    tokens
        .create(&PostParams::default(), &expired)
        .await
        .unwrap();

    // The sweep ran: the expired token shaped as the host's is gone.
    wait_for(
        &tokens,
        "bootstrap-token-exp001",
        "the expired token is deleted",
        |s| s.is_none(),
    )
    .await;
    for before in left {
        let name = before.name_any();
        let kept = tokens
            .get_opt(&name)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{name} is kept"));
        assert_eq!(kept.uid(), before.uid(), "{name}: the same Secret");
        assert_eq!(
            kept.resource_version(),
            before.resource_version(),
            "{name}: not even changed"
        );
    }
}

/// A `bootstrap.kubernetes.io/token` Secret `name` for token `id`
/// expiring at `expiration`, labelled as config `uid`'s if given.
fn token_secret(name: &str, id: &str, expiration: &str, uid: Option<&str>) -> Secret {
    let data = [
        ("token-id", id),
        ("token-secret", "0123456789abcdef"),
        ("expiration", expiration),
        ("usage-bootstrap-authentication", "true"),
        ("usage-bootstrap-signing", "true"),
    ];
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("kube-system".into()),
            labels: uid.map(|uid| BTreeMap::from([(CONFIG_UID_LABEL.to_owned(), uid.to_owned())])),
            ..kube::api::ObjectMeta::default()
        },
        type_: Some("bootstrap.kubernetes.io/token".into()),
        string_data: Some(
            data.into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        ),
        ..Secret::default()
    }
}
