//! Providers written in Python (componentize-py) and TypeScript
//! (componentize-js), run through the binary as a user would: each kubeadm
//! bootstrap provider answers every example fixture exactly as the Rust one
//! does, and each hostile provider is contained as a hostile Rust one is,
//! with the end of what it raised or threw in the error.
//!
//! `make guests` builds them (`guests/python/build.sh`, `guests/js/build.sh`).

mod support;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use support::{assert_exit, example, provider_test, stderr, stdout};

/// A language's kubeadm-bootstrap, the name it gives, and its hostile provider.
struct Language {
    kubeadm: &'static str,
    name: &'static str,
    hostile: &'static str,
}

const PYTHON: Language = Language {
    kubeadm: "python-kubeadm-bootstrap.wasm",
    name: "kubeadm-bootstrap-python",
    hostile: "python-hostile.wasm",
};
const JS: Language = Language {
    kubeadm: "js-kubeadm-bootstrap.wasm",
    name: "kubeadm-bootstrap-js",
    hostile: "js-hostile.wasm",
};
const LANGUAGES: [Language; 2] = [PYTHON, JS];

/// `capwasm provider test` keeping compiled components for the next call:
/// a Python or JavaScript component takes seconds to compile.
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

/// `config`'s call into `component`, the hostile fixture written for it.
async fn hostile_call(component: &str, config: Value, extra: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().expect("temporary directory");
    call(component, &hostile(dir.path(), &config), extra).await
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
async fn kubeadm_in_each_language_answers_every_fixture_as_the_rust_one_does() {
    let fixtures = bootstrap_fixtures();
    assert!(fixtures.len() >= 4, "{fixtures:?}");
    for language in LANGUAGES {
        for fixture in &fixtures {
            let rust = call("kubeadm_bootstrap.wasm", fixture, &[]).await;
            let other = call(language.kubeadm, fixture, &[]).await;
            let name = format!("{}: {}", language.kubeadm, fixture.display());
            assert_eq!(other.status.code(), rust.status.code(), "{name}: exit");
            assert_eq!(stdout(&other), stdout(&rust), "{name}: result");
            assert_eq!(stderr(&other), stderr(&rust), "{name}: error");
        }
    }
}

#[tokio::test]
async fn kubeadm_in_each_language_describes_itself_and_the_rust_schema() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let info = write(dir.path(), "info", &json!({"call": "info"}));
    let schema = write(dir.path(), "schema", &json!({"call": "config-schema"}));
    let rust = call("kubeadm_bootstrap.wasm", &schema, &[]).await;
    for language in LANGUAGES {
        let output = call(language.kubeadm, &info, &[]).await;
        assert_exit(&output, 0);
        let info: Value = serde_json::from_slice(&output.stdout).expect("info is JSON");
        assert_eq!(info, json!({"name": language.name, "version": "0.1.0"}));

        let output = call(language.kubeadm, &schema, &[]).await;
        assert_exit(&output, 0);
        assert_eq!(
            stdout(&output),
            stdout(&rust),
            "{}: the same schema",
            language.name
        );
    }
}

#[tokio::test]
async fn a_provider_in_each_language_that_loops_or_hoards_memory_is_stopped() {
    for language in LANGUAGES {
        // The deadline also bounds the loading check's `info` call, which a
        // machine busy with parallel tests can slow past 2 s.
        let output = hostile_call(
            language.hostile,
            json!({"do": "loop"}),
            &["--timeout-ms", "5000"],
        )
        .await;
        assert_exit(&output, 21);
        assert!(
            stderr(&output).starts_with("deadline exceeded: "),
            "{}",
            stderr(&output)
        );

        let output = hostile_call(language.hostile, json!({"do": "allocate"}), &[]).await;
        assert_exit(&output, 22);
        assert!(
            stderr(&output)
                .starts_with("memory limit exceeded: bootstrap.generate tried to grow past 64 MiB"),
            "{}",
            stderr(&output)
        );
    }
}

/// Only Python: the JavaScript engine has no API for an environment.
#[tokio::test]
async fn a_python_provider_finds_no_environment() {
    let output = hostile_call(PYTHON.hostile, json!({"do": "environment"}), &[]).await;
    assert_exit(&output, 0);
    let data: Value = serde_json::from_slice(&output.stdout).expect("result is JSON");
    assert_eq!(data["value"], "#!/bin/sh\n: '{}'\n", "an empty environment");
}

#[tokio::test]
async fn what_a_provider_raises_or_throws_ends_in_a_trap_with_its_last_words() {
    for (language, last) in [
        (
            PYTHON,
            "RuntimeError: the hostile provider raised, as asked",
        ),
        (JS, "Error: the hostile provider raised, as asked"),
    ] {
        let output = hostile_call(language.hostile, json!({"do": "raise"}), &[]).await;
        assert_exit(&output, 20);
        assert!(
            stderr(&output).starts_with("trap in bootstrap.generate: "),
            "{}",
            stderr(&output)
        );
        let said = guest_said(&output);
        assert!(said.contains(last), "{}: {said}", language.hostile);
        if language.hostile == PYTHON.hostile {
            assert!(
                said.contains("Traceback (most recent call last):"),
                "{said}"
            );
        }
    }
}

#[tokio::test]
async fn a_python_provider_finds_no_files() {
    let output = hostile_call(PYTHON.hostile, json!({"do": "open"}), &[]).await;
    assert_exit(&output, 20);
    assert!(
        guest_said(&output)
            .contains("FileNotFoundError: [Errno 44] No such file or directory: '/etc/passwd'"),
        "{}",
        stderr(&output)
    );
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
    let output = hostile_call(
        PYTHON.hostile,
        json!({"do": "connect", "port": port}),
        &["--allow-host", "127.0.0.1"],
    )
    .await;
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
