//! Canary rollouts through the operator (`capwasm run`): a new version
//! serves a share of objects first (by a hash of each object's UID). One
//! that traps is rolled back after its first broken call, every pool still
//! reaches Running on the version before, and the same digest is not tried
//! again: neither through a reconcile of its module nor by a batch of new
//! pools its share would reach, its trap count stays where it was. One that
//! works is promoted after enough calls and then serves every object.

use capwasm::api::providermodule::{CanaryStatus, Rollout, RolloutStrategy, World};
use capwasm::api::{MachinePool, ProviderModule};
use capwasm::testing::guest_path;
use capwasm::testing::objects::ProviderModuleBuilder;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::flows::{Modules, condition, scale, wait_for, wait_for_pool};
use testenv::install::{Core, Install};

/// Pools per batch: with a canary serving three objects in four, the
/// chance that none of them is its is 1 in 4^POOLS.
const POOLS: usize = 8;

fn canary() -> Rollout {
    Rollout {
        strategy: RolloutStrategy::Canary,
        canary_percent: Some(75),
        promote_after_calls: Some(3),
        max_failure_percent: Some(20),
    }
}

async fn module(install: &Install, name: &str, world: World, file: &str) -> String {
    let mut module = ProviderModuleBuilder::file(name, world, &guest_path(file).to_string_lossy())
        .allowed_hosts(&["127.0.0.1"])
        .build();
    module.spec.rollout = Some(canary());
    let api: Api<ProviderModule> = Api::all(install.client.clone());
    api.create(&PostParams::default(), &module)
        .await
        .expect("the module created");
    let module = wait_for(&api, name, "it is Ready", |m| {
        m.and_then(|m| m.status.as_ref())
            .is_some_and(|s| s.phase.as_deref() == Some("Ready"))
    })
    .await
    .expect("the module");
    module
        .status
        .unwrap_or_default()
        .active_digest
        .unwrap_or_default()
}

/// Points module `name` at guest `file`.
async fn switch(api: &Api<ProviderModule>, name: &str, file: &str) {
    let path = guest_path(file).to_string_lossy().into_owned();
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"source": {"file": {"path": path}}}})),
    )
    .await
    .expect("the module patched");
}

async fn pools(install: &Install, modules: &Modules, prefix: &str, pools: &Api<MachinePool>) {
    for i in 0..POOLS {
        install
            .objects
            .create_pool(
                &install.client,
                &install.ns,
                &format!("{prefix}-{i}"),
                "canary",
                1,
                modules,
            )
            .await
            .expect("a pool");
    }
    for i in 0..POOLS {
        wait_for_pool(pools, &format!("{prefix}-{i}"), "Running", 1).await;
    }
}

/// The reasons of the Events about object `name`.
async fn event_reasons(install: &Install, name: &str) -> Vec<(String, String)> {
    Api::<Event>::all(install.client.clone())
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .expect("Events")
        .items
        .into_iter()
        .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default()))
        .collect()
}

/// The sum of `capwasm_guest_calls_total` for `provider` with `outcome`,
/// over its exports, in the operator's `metrics` text.
fn guest_calls(metrics: &str, provider: &str, outcome: &str) -> u64 {
    let (provider, outcome) = (
        format!("provider=\"{provider}\""),
        format!("outcome=\"{outcome}\""),
    );
    metrics
        .lines()
        .filter(|l| l.starts_with("capwasm_guest_calls_total{"))
        .filter(|l| l.contains(&provider) && l.contains(&outcome))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// `capwasm_reconcile_total` of `controller` in `metrics`.
fn reconciles(metrics: &str, controller: &str) -> u64 {
    testenv::operator::sample(
        metrics,
        &format!("capwasm_reconcile_total{{controller=\"{controller}\"}}"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_canary_is_rolled_back_and_a_working_one_promoted() {
    let install = Install::with_core("rollout", Core::Capwasm).await;
    let modules_api: Api<ProviderModule> = Api::all(install.client.clone());
    let bootstrap = format!("{}-kubeadm-canary", install.ns);
    let infrastructure = format!("{}-sim-canary", install.ns);
    let kubeadm = module(
        &install,
        &bootstrap,
        World::Bootstrap,
        "kubeadm_bootstrap.wasm",
    )
    .await;
    let v1 = module(
        &install,
        &infrastructure,
        World::Infrastructure,
        "sim_infrastructure.wasm",
    )
    .await;
    let modules = Modules {
        bootstrap: bootstrap.clone(),
        infrastructure: infrastructure.clone(),
    };
    let workload = install.env.workload().expect("a workload server");
    install
        .objects
        .create_cluster(&install.client, workload, &install.ns, "canary", &modules)
        .await
        .expect("the Cluster");
    let pools_api: Api<MachinePool> = Api::namespaced(install.client.clone(), &install.ns);
    pools(&install, &modules, "first", &pools_api).await;

    // A bootstrap version whose generate traps, as a canary: new pools'
    // configs in its share break, it is rolled back, and every pool is
    // served by the version before.
    switch(&modules_api, &bootstrap, "hostile_panic.wasm").await;
    let canary = wait_for(&modules_api, &bootstrap, "a canary serves", |m| {
        m.and_then(|m| m.status.as_ref())
            .and_then(|s| s.canary.as_ref())
            .is_some()
    })
    .await
    .and_then(|m| m.status)
    .and_then(|s| s.canary)
    .expect("a canary");
    assert_eq!(canary.percent, 75);
    assert_ne!(canary.digest, kubeadm);
    pools(&install, &modules, "late", &pools_api).await;
    let module = wait_for(&modules_api, &bootstrap, "it is rolled back", |m| {
        m.and_then(|m| m.status.as_ref())
            .and_then(|s| condition(&s.conditions, "Ready"))
            .is_some_and(|(status, reason, _)| status == "False" && reason == "RolledBack")
    })
    .await
    .expect("the module");
    let status = module.status.clone().unwrap_or_default();
    assert_eq!(status.active_digest.as_deref(), Some(kubeadm.as_str()));
    let rolled = status.rolled_back.clone().expect("the rolled-back canary");
    assert_eq!(rolled.digest, canary.digest);
    assert!(rolled.failures >= 1, "{rolled:?}");
    assert!(status.canary.is_none(), "{status:?}");
    let (_, _, message) = condition(&status.conditions, "Ready").unwrap_or_default();
    assert!(
        message.contains("change the ProviderModule to try it again"),
        "{message}"
    );
    assert!(
        event_reasons(&install, &bootstrap)
            .await
            .iter()
            .any(|(kind, reason)| kind == "Warning" && reason == "RolledBack")
    );
    the_rolled_back_version_is_not_tried_again(&install, &modules, &pools_api, &kubeadm, &rolled)
        .await;

    promotes_a_working_canary(&install, &infrastructure, &v1, &pools_api).await;
}

/// After the rollback of `rolled` (a canary of the bootstrap module of
/// `modules`, whose version before is `stable`), the rolled-back digest is
/// not tried again: a reconcile of the module (a change that is not its
/// spec) does not load it, and a batch of [`POOLS`] new pools, three in
/// four of which its share would reach were it still served, never calls
/// it: the module's traps stay at their count, while its working calls
/// grow by a call per pool at least.
async fn the_rolled_back_version_is_not_tried_again(
    install: &Install,
    modules: &Modules,
    pools_api: &Api<MachinePool>,
    stable: &str,
    rolled: &CanaryStatus,
) {
    let bootstrap = &modules.bootstrap;
    let modules_api: Api<ProviderModule> = Api::all(install.client.clone());
    let before = install.operator.get("/metrics").await.1;
    let traps = guest_calls(&before, bootstrap, "trap");
    assert!(
        traps >= u64::from(rolled.failures),
        "{traps} traps, {rolled:?}"
    );
    let calls = guest_calls(&before, bootstrap, "ok");

    // The module reconciled again, without a change of its spec (nothing
    // else here changes a module, so the count rising is its reconcile).
    let module_reconciles = reconciles(&before, "providermodule");
    let touch = json!({"metadata": {"annotations": {"test.capwasm.dev/touched": "1"}}});
    modules_api
        .patch(bootstrap, &PatchParams::default(), &Patch::Merge(touch))
        .await
        .expect("the module annotated");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while reconciles(&install.operator.get("/metrics").await.1, "providermodule")
        <= module_reconciles
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the annotated module was not reconciled"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    pools(install, modules, "after", pools_api).await;
    let after = install.operator.get("/metrics").await.1;
    assert_eq!(
        guest_calls(&after, bootstrap, "trap"),
        traps,
        "the rolled-back version was called again"
    );
    let more = guest_calls(&after, bootstrap, "ok") - calls;
    assert!(
        more >= POOLS as u64,
        "{more} working calls for {POOLS} new pools"
    );
    let status = modules_api
        .get(bootstrap)
        .await
        .expect("the module")
        .status
        .unwrap_or_default();
    assert_eq!(status.active_digest.as_deref(), Some(stable));
    assert!(status.canary.is_none(), "a canary again: {status:?}");
    assert_eq!(
        status.rolled_back.as_ref().map(|r| r.digest.as_str()),
        Some(rolled.digest.as_str())
    );
    let (ready, reason, _) = condition(&status.conditions, "Ready").unwrap_or_default();
    assert_eq!((ready.as_str(), reason.as_str()), ("False", "RolledBack"));
}

/// A working infrastructure version, as a canary: promoted after three
/// calls that did not break, then it serves every pool.
async fn promotes_a_working_canary(
    install: &Install,
    infrastructure: &str,
    v1: &str,
    pools_api: &Api<MachinePool>,
) {
    let modules_api: Api<ProviderModule> = Api::all(install.client.clone());
    switch(&modules_api, infrastructure, "sim_infrastructure_v2.wasm").await;
    for i in 0..POOLS {
        scale(pools_api, &format!("first-{i}"), 2)
            .await
            .expect("scaled");
    }
    let module = wait_for(
        &modules_api,
        infrastructure,
        "the canary is promoted",
        |m| {
            m.and_then(|m| m.status.as_ref()).is_some_and(|s| {
                s.canary.is_none()
                    && s.active_digest.is_some()
                    && s.active_digest.as_deref() != Some(v1)
            })
        },
    )
    .await
    .expect("the module");
    let status = module.status.unwrap_or_default();
    assert_eq!(status.previous_digest.as_deref(), Some(v1));
    assert_eq!(status.version.as_deref(), Some("0.2.0"));
    for i in 0..POOLS {
        wait_for_pool(pools_api, &format!("first-{i}"), "Running", 2).await;
    }
    let reasons = event_reasons(install, infrastructure).await;
    for expected in ["CanaryStarted", "Promoted"] {
        assert!(
            reasons
                .iter()
                .any(|(kind, reason)| kind == "Normal" && reason == expected),
            "{reasons:?}"
        );
    }
}
