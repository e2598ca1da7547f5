//! `capwasm run` as a process: it serves its health and metrics endpoints,
//! holds the leader Lease while it runs and gives it up on SIGTERM, and
//! bad start-up input is one line on stderr and exit code 1.

use std::process::Command;
use std::time::Duration;

use capwasm::api::ProviderModule;
use capwasm::api::providermodule::World;
use capwasm::testing::objects::ProviderModuleBuilder;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;
use testenv::TestEnv;
use testenv::flows::{wait_for, wait_for_module};
use testenv::operator::{self, OperatorProcess};

#[tokio::test]
async fn run_serves_health_and_metrics_holds_the_lease_and_releases_it_on_sigterm() {
    let env = TestEnv::shared().await.unwrap();
    let ns = env.management().create_namespace("leader").await.unwrap();
    let mut operator = OperatorProcess::start(env.management(), &ns, "replica-1", &[]).await;

    assert_eq!(operator.get("/healthz").await.0, 200);
    operator.ready().await;
    let (status, text) = operator.get("/readyz").await;
    assert_eq!(status, 200);
    // The leader's caches, and the webhook every replica serves.
    assert!(
        text.contains("[+]caches ok") && text.contains("[+]webhook ok"),
        "{text}"
    );
    // Something to reconcile, so that the reconcile figures have a series.
    let client = env.management().client().unwrap();
    let modules: Api<ProviderModule> = Api::all(client.clone());
    let module = ProviderModuleBuilder::file(
        &format!("{ns}-missing"),
        World::Bootstrap,
        "/nonexistent.wasm",
    )
    .build();
    modules
        .create(&PostParams::default(), &module)
        .await
        .unwrap();
    wait_for_module(&modules, &format!("{ns}-missing"), "Failed").await;
    let (code, metrics) = operator.get("/metrics").await;
    assert_eq!(code, 200);
    assert!(
        metrics.contains(r#"capwasm_reconcile_total{controller="providermodule"}"#),
        "{metrics}"
    );
    // The sandbox's instance slots (`--max-provider-instances`, 64), none in use.
    assert!(
        metrics.contains("capwasm_guest_instance_slots 64\n")
            && metrics.contains("capwasm_guest_instances 0\n"),
        "{metrics}"
    );
    let leases: Api<Lease> = Api::namespaced(client, &ns);
    let lease = leases.get("capwasm-leader").await.unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("replica-1")
    );

    let (status, _) = operator.terminate(Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}");
    wait_for(
        &leases,
        "capwasm-leader",
        "the Lease is released",
        |l: Option<&Lease>| {
            l.and_then(|l| l.spec.as_ref())
                .is_none_or(|s| s.holder_identity.is_none())
        },
    )
    .await;
}

/// Runs `capwasm` with `args` and returns (exit code, stderr).
fn run(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(operator::binary())
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_missing_kubeconfig_is_one_line_and_exit_code_one() {
    let (code, stderr) = run(&["run", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(code, Some(1));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: cannot read the kubeconfig /nonexistent/kubeconfig"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_api_server_that_is_down_is_one_line_and_exit_code_one() {
    let env = TestEnv::shared().await.unwrap();
    let stopped = env.start_workload().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, stopped.kubeconfig_yaml().unwrap()).unwrap();
    drop(stopped);
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();
    let (code, stderr) =
        tokio::task::spawn_blocking(move || run(&["run", "--kubeconfig", &kubeconfig]))
            .await
            .unwrap();
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("cannot reach the Kubernetes API server"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_flag_is_refused_with_usage() {
    let (code, stderr) = run(&["run", "--no-such-flag"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--no-such-flag"), "{stderr}");
}

#[test]
fn no_reconciles_at_once_is_refused_with_usage() {
    let (code, stderr) = run(&["run", "--concurrency", "0"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("invalid value '0' for '--concurrency <N>'"),
        "{stderr}"
    );
}

#[test]
fn a_shard_that_does_not_fit_is_one_line_and_exit_code_one() {
    let (code, stderr) = run(&["run", "--shards", "3", "--shard-index", "3"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr.trim(),
        "error: --shard-index 3 does not fit --shards 3: shards are numbered 0 to 2"
    );
    let (code, stderr) = run(&["run", "--shards", "2", "--leader-elect", "false"]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("--shards needs --leader-elect"), "{stderr}");
}
