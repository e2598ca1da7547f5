//! `capwasm run` as a process: it serves its health and metrics endpoints,
//! holds the leader Lease while it runs and gives it up on SIGTERM, and
//! bad start-up input is one line on stderr and exit code 1.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use capwasm::api::ProviderModule;
use capwasm::api::providermodule::World;
use capwasm::testing::objects::ProviderModuleBuilder;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;
use testenv::TestEnv;
use testenv::flows::wait_for;
use tokio::io::AsyncBufReadExt as _;

/// The `capwasm` binary `cargo test --workspace` built next to this test.
fn binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let binary = dir.join("capwasm");
    assert!(
        binary.exists(),
        "{} is missing: run `cargo build -p capwasm` or `make test`",
        binary.display()
    );
    binary
}

/// `GET path` on `addr`, as (status code, body).
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let code = response
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (code, body)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn run_serves_health_and_metrics_holds_the_lease_and_releases_it_on_sigterm() {
    let env = TestEnv::shared().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, env.management().kubeconfig_yaml().unwrap()).unwrap();
    let ns = env.management().create_namespace("leader").await.unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut child = tokio::process::Command::new(binary())
        .args(["run", "--kubeconfig"])
        .arg(&kubeconfig)
        .args([
            "--metrics-bind-address",
            &addr,
            "--leader-election-namespace",
            &ns,
            "--instance",
            "replica-1",
        ])
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let started = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("became the leader") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(started, Ok(true), "capwasm run did not become the leader");
    // Keep draining the log so the process never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    assert_eq!(get(&addr, "/healthz").0, 200);
    assert_eq!(get(&addr, "/readyz").0, 200);
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
    wait_for(
        &modules,
        &format!("{ns}-missing"),
        "the module is Failed",
        |m: Option<&ProviderModule>| {
            m.and_then(|m| m.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Failed")
        },
    )
    .await;
    let (code, metrics) = get(&addr, "/metrics");
    assert_eq!(code, 200);
    assert!(
        metrics.contains(r#"capwasm_reconcile_total{controller="providermodule"}"#),
        "{metrics}"
    );
    let leases: Api<Lease> = Api::namespaced(client, &ns);
    let lease = leases.get("capwasm-leader").await.unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("replica-1")
    );

    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
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
    let output = Command::new(binary()).args(args).output().unwrap();
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
