//! `capwasm provider conformance`, run as a provider author would: every
//! implementation of sim-infrastructure passes the infrastructure world's
//! scenarios, every kubeadm-bootstrap implementation (Rust, Python,
//! TypeScript) and the sample platform provider meet the example fixtures'
//! expectations, while providers
//! that behave otherwise fail, each check saying why.

mod support;

use std::path::Path;

use serde_json::Value;
use support::{assert_exit, capwasm, example, guest, stderr, stdout};

/// Exit code when a check failed.
const FAILED: i32 = 30;

/// `capwasm provider conformance COMPONENT extra...`, keeping compiled
/// components for the next run (a Python one takes seconds to compile).
async fn conformance(component: &str, extra: &[&str]) -> std::process::Output {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("precompiled");
    let component = guest(component);
    let mut args = vec![
        "provider".as_ref(),
        "conformance".as_ref(),
        component.as_os_str(),
        "--cache-dir".as_ref(),
        cache.as_os_str(),
    ];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    capwasm(args).await
}

/// The lines of checks, by verdict.
fn checks(output: &std::process::Output, verdict: &str) -> Vec<String> {
    stdout(output)
        .lines()
        .filter(|line| line.starts_with(verdict))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn every_sim_infrastructure_implementation_passes_the_infrastructure_scenarios() {
    for component in [
        "sim_infrastructure.wasm",
        "python-sim-infrastructure.wasm",
        "js-sim-infrastructure.wasm",
    ] {
        let output = conformance(component, &["--world", "infrastructure"]).await;
        assert_exit(&output, 0);
        assert_eq!(checks(&output, "ok    ").len(), 15, "{}", stdout(&output));
        assert!(
            stdout(&output).ends_with("15 checks: 15 passed, 0 failed\n"),
            "{}",
            stdout(&output)
        );
    }
}

#[tokio::test]
async fn a_provider_that_does_not_provision_as_sim_infrastructure_fails_each_scenario_with_why() {
    let output = conformance("hostile_forbidden_http.wasm", &[]).await;

    assert_exit(&output, FAILED);
    let failed = checks(&output, "FAIL  ");
    assert_eq!(failed.len(), 15, "{}", stdout(&output));
    assert!(
        failed[0].starts_with("FAIL  scale up creates sim instances")
            && failed[0].contains("machine-pools.reconcile returned invalid config at $.endpoint"),
        "{}",
        failed[0]
    );
    assert!(stdout(&output).ends_with("15 checks: 0 passed, 15 failed\n"));
}

#[tokio::test]
async fn every_kubeadm_bootstrap_implementation_meets_the_example_fixtures() {
    let fixtures = example("");
    for component in [
        "kubeadm_bootstrap.wasm",
        "python-kubeadm-bootstrap.wasm",
        "js-kubeadm-bootstrap.wasm",
    ] {
        let output = conformance(component, &["--fixtures", fixtures.to_str().unwrap()]).await;
        assert_exit(&output, 0);
        let passed = checks(&output, "ok    ");
        assert_eq!(passed.len(), 4, "{}", stdout(&output));
        assert!(
            passed
                .iter()
                .any(|l| l.contains("kubeadm-generate-join.json"))
        );
    }
}

/// Both versions of the sample platform provider meet the platform
/// fixtures (render's schema check, the roll-up to Reconciling and, with
/// mixed kubelets, Upgrading, validate's upgrade rule); the bootstrap
/// fixtures in the same directory are not theirs to meet.
#[tokio::test]
async fn the_sample_platform_provider_meets_the_platform_fixtures() {
    let fixtures = example("");
    for component in ["sim_platform.wasm", "sim_platform_v2.wasm"] {
        let output = conformance(
            component,
            &[
                "--world",
                "platform",
                "--fixtures",
                fixtures.to_str().unwrap(),
            ],
        )
        .await;
        assert_exit(&output, 0);
        let passed = checks(&output, "ok    ");
        assert_eq!(passed.len(), 5, "{}", stdout(&output));
        assert!(
            passed.iter().all(|l| l.contains("fixture sim-platform-")),
            "{passed:#?}"
        );
    }
}

#[tokio::test]
async fn a_trapping_bootstrap_provider_fails_the_fixtures_with_its_trap() {
    let fixtures = example("");
    let output = conformance(
        "hostile_panic.wasm",
        &["--fixtures", fixtures.to_str().unwrap()],
    )
    .await;

    assert_exit(&output, FAILED);
    let failed = checks(&output, "FAIL  ");
    assert_eq!(failed.len(), 4, "{}", stdout(&output));
    assert!(
        failed
            .iter()
            .all(|line| line.contains("got trap in bootstrap.generate")),
        "{failed:#?}"
    );
}

#[tokio::test]
async fn a_result_that_differs_is_shown_where_it_differs() {
    let dir = tempfile::tempdir().unwrap();
    let mut fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(example("kubeadm-generate-join.json")).unwrap(),
    )
    .unwrap();
    let value = &mut fixture["expect"]["result"]["value"];
    *value = Value::String(value.as_str().unwrap().replace("tier=web", "tier=db"));
    std::fs::write(dir.path().join("join.json"), fixture.to_string()).unwrap();

    let output = conformance(
        "kubeadm_bootstrap.wasm",
        &["--fixtures", dir.path().to_str().unwrap()],
    )
    .await;

    assert_exit(&output, FAILED);
    let failed = checks(&output, "FAIL  ");
    assert_eq!(failed.len(), 1, "{}", stdout(&output));
    assert!(
        failed[0].contains("the result differs at $.value (character")
            && failed[0].contains("tier=db")
            && failed[0].contains("tier=web"),
        "{}",
        failed[0]
    );
}

#[tokio::test]
async fn nothing_to_check_or_the_wrong_world_is_bad_input() {
    let nothing = conformance("kubeadm_bootstrap.wasm", &[]).await;
    assert_exit(&nothing, 1);
    assert!(
        stderr(&nothing)
            .contains("nothing to check: the bootstrap-provider world has no built-in scenarios"),
        "{}",
        stderr(&nothing)
    );

    let wrong = conformance("kubeadm_bootstrap.wasm", &["--world", "infrastructure"]).await;
    assert_exit(&wrong, 1);
    assert!(
        stderr(&wrong).contains(
            "implements the bootstrap-provider world, not the infrastructure-provider world"
        ),
        "{}",
        stderr(&wrong)
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.json"),
        r#"{"call": "generate", "expect": {"error": "terminal"}}"#,
    )
    .unwrap();
    let bad = conformance(
        "kubeadm_bootstrap.wasm",
        &["--fixtures", dir.path().to_str().unwrap()],
    )
    .await;
    assert_exit(&bad, 1);
    assert!(
        stderr(&bad).contains("bad fixture") && stderr(&bad).contains("terminal takes a reason"),
        "{}",
        stderr(&bad)
    );
}
