//! Providers written in Python (componentize-py), run through the binary
//! as a user would: the kubeadm bootstrap provider answers every example
//! fixture exactly as the Rust one does, and a hostile Python provider is
//! contained as a hostile Rust one is, with the end of its traceback in
//! the error.
//!
//! `make guests` builds them (`guests/python/build.sh`).

mod support;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use support::{assert_exit, example, provider_test, stderr, stdout};

const PYTHON_KUBEADM: &str = "python-kubeadm-bootstrap.wasm";
const PYTHON_HOSTILE: &str = "python-hostile.wasm";

/// `capwasm provider test` keeping compiled components for the next call:
/// a Python component takes seconds to compile.
async fn call(component: &str, fixture: &Path, extra: &[&str]) -> std::process::Output {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("precompiled");
    let cache = cache.to_string_lossy();
    let mut args = vec!["--cache-dir", &cache];
    args.extend(extra);
    provider_test(component, fixture, &args).await
}

/// The example fixtures of the bootstrap world.
fn bootstrap_fixtures() -> Vec<PathBuf> {
    let dir = example("");
    let mut fixtures: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|text| serde_json::from_str::<Value>(&text).ok())
                .is_some_and(|fixture| fixture["call"] == "generate")
        })
        .collect();
    fixtures.sort();
    fixtures
}

#[tokio::test]
async fn python_kubeadm_answers_every_fixture_as_the_rust_one_does() {
    let fixtures = bootstrap_fixtures();
    assert!(fixtures.len() >= 4, "{fixtures:?}");
    for fixture in &fixtures {
        let rust = call("kubeadm_bootstrap.wasm", fixture, &[]).await;
        let python = call(PYTHON_KUBEADM, fixture, &[]).await;
        let name = fixture.display();
        assert_eq!(python.status.code(), rust.status.code(), "{name}: exit");
        assert_eq!(stdout(&python), stdout(&rust), "{name}: result");
        assert_eq!(stderr(&python), stderr(&rust), "{name}: error");
    }
}

#[tokio::test]
async fn python_kubeadm_describes_itself_and_its_schema() {
    let info = json!({"call": "info"});
    let schema = json!({"call": "config-schema"});
    let dir = tempfile::tempdir().expect("temporary directory");
    for (name, request) in [("info", info), ("schema", schema)] {
        let fixture = write(dir.path(), name, &request);
        let python = call(PYTHON_KUBEADM, &fixture, &[]).await;
        assert_exit(&python, 0);
        let rust = call("kubeadm_bootstrap.wasm", &fixture, &[]).await;
        if name == "schema" {
            assert_eq!(stdout(&python), stdout(&rust), "the same schema");
        } else {
            let info: Value = serde_json::from_slice(&python.stdout).expect("info is JSON");
            assert_eq!(info["name"], "kubeadm-bootstrap-python");
        }
    }
}

fn write(dir: &Path, name: &str, fixture: &Value) -> PathBuf {
    let path = dir.join(format!("{name}.json"));
    let mut file = std::fs::File::create(&path).expect("fixture file");
    write!(file, "{fixture}").expect("fixture written");
    path
}

/// The join fixture with the hostile provider's `config`.
fn hostile(dir: &Path, config: &Value) -> PathBuf {
    let text = std::fs::read_to_string(example("kubeadm-generate-join.json")).expect("example");
    let mut fixture: Value = serde_json::from_str(&text).expect("example is JSON");
    fixture["request"]["config"] = config.clone();
    write(dir, config["do"].as_str().unwrap_or("x"), &fixture)
}

/// What the guest said before it died, as the binary prints it.
fn guest_said(output: &std::process::Output) -> String {
    stderr(output)
        .lines()
        .filter_map(|line| line.strip_prefix("guest said: "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_python_provider_that_loops_or_hoards_memory_is_stopped() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let looping = hostile(dir.path(), &json!({"do": "loop"}));
    let output = call(PYTHON_HOSTILE, &looping, &["--timeout-ms", "2000"]).await;
    assert_exit(&output, 21);
    assert!(
        stderr(&output).starts_with("deadline exceeded: "),
        "{}",
        stderr(&output)
    );

    let hoarding = hostile(dir.path(), &json!({"do": "allocate"}));
    let output = call(PYTHON_HOSTILE, &hoarding, &[]).await;
    assert_exit(&output, 22);
    assert!(
        stderr(&output)
            .starts_with("memory limit exceeded: bootstrap.generate tried to grow past 64 MiB"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn a_python_provider_finds_no_files_and_no_environment() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let output = call(
        PYTHON_HOSTILE,
        &hostile(dir.path(), &json!({"do": "open"})),
        &[],
    )
    .await;
    assert_exit(&output, 20);
    let said = guest_said(&output);
    assert!(
        said.contains("FileNotFoundError: [Errno 44] No such file or directory: '/etc/passwd'"),
        "{}",
        stderr(&output)
    );

    let output = call(
        PYTHON_HOSTILE,
        &hostile(dir.path(), &json!({"do": "environment"})),
        &[],
    )
    .await;
    assert_exit(&output, 0);
    let data: Value = serde_json::from_slice(&output.stdout).expect("result is JSON");
    assert_eq!(data["value"], "#!/bin/sh\n: '{}'\n", "an empty environment");
}

#[tokio::test]
async fn a_python_provider_cannot_open_a_socket() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listener");
    let port = listener.local_addr().expect("address").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counting = accepted.clone();
    let server = tokio::spawn(async move {
        while listener.accept().await.is_ok() {
            counting.fetch_add(1, Ordering::Relaxed);
        }
    });
    let dir = tempfile::tempdir().expect("temporary directory");
    let connect = hostile(dir.path(), &json!({"do": "connect", "port": port}));
    let output = call(PYTHON_HOSTILE, &connect, &["--allow-host", "127.0.0.1"]).await;
    server.abort();
    assert_exit(&output, 20);
    assert!(
        guest_said(&output).contains("PermissionError"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        accepted.load(Ordering::Relaxed),
        0,
        "no connection reached the listener"
    );
}

#[tokio::test]
async fn an_exception_in_a_python_provider_ends_in_a_trap_with_its_traceback() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let output = call(
        PYTHON_HOSTILE,
        &hostile(dir.path(), &json!({"do": "raise"})),
        &[],
    )
    .await;
    assert_exit(&output, 20);
    assert!(
        stderr(&output).starts_with("trap in bootstrap.generate: "),
        "{}",
        stderr(&output)
    );
    let said = guest_said(&output);
    assert!(
        said.contains("Traceback (most recent call last):"),
        "{said}"
    );
    assert!(
        said.contains("RuntimeError: the hostile provider raised, as asked"),
        "{said}"
    );
}
