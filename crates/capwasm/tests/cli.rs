//! The `capwasm` binary's provider and sim-cloud commands, run as a user
//! would: exit codes, what they print, and the example request fixtures.
//!
//! Components come from `make guests` (`CAPWASM_GUESTS_DIR`, else
//! `guests/target/wasm32-wasip2/release`).

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use capwasm::simcloud::{Settings, SimCloud};
use serde_json::Value;
use sha2::Digest as _;
use support::{
    BIN, WAIT, assert_exit, capwasm, capwasm_default_log, example, fixture_for, guest, json_stdout,
    one_line, provider_test, stderr, stdout,
};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

// === provider inspect ===

#[tokio::test]
async fn inspect_describes_kubeadm_bootstrap_with_the_files_digest() {
    let file = guest("kubeadm_bootstrap.wasm");
    let bytes = std::fs::read(&file).unwrap();
    let output = capwasm([
        "provider".as_ref(),
        "inspect".as_ref(),
        file.as_os_str(),
        "--output".as_ref(),
        "json".as_ref(),
    ])
    .await;
    assert_exit(&output, 0);
    let d = json_stdout(&output);
    assert_eq!(d["world"], "bootstrap-provider");
    assert_eq!(d["witPackage"], "capwasm:provider@0.1.2");
    assert_eq!(d["name"], "kubeadm-bootstrap");
    assert_eq!(d["size"], bytes.len());
    assert_eq!(
        d["digest"],
        format!("sha256:{}", hex::encode(sha2::Sha256::digest(&bytes)))
    );
    let exports = strings(&d["exports"]);
    assert!(
        exports.contains(&"capwasm:provider/bootstrap@0.1.2"),
        "{exports:?}"
    );
    // The token may be left out: the host then makes one.
    assert_eq!(d["configSchema"]["required"], serde_json::json!(["mode"]));
    let imports = strings(&d["imports"]);
    assert!(
        imports.contains(&"capwasm:provider/bootstrap-tokens@0.1.2"),
        "{imports:?}"
    );
}

#[tokio::test]
async fn inspect_prints_the_world_and_a_pretty_schema_for_people() {
    let file = guest("sim_infrastructure.wasm");
    let output = capwasm(["provider".as_ref(), "inspect".as_ref(), file.as_os_str()]).await;
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(text.contains("world:    infrastructure-provider"), "{text}");
    assert!(text.contains("wit:      capwasm:provider@0.1.2"), "{text}");
    assert!(
        text.contains("  capwasm:provider/machine-pools@0.1.2"),
        "{text}"
    );
    assert!(
        text.contains("\n  \"required\": [\n    \"endpoint\"\n  ]"),
        "{text}"
    );
}

#[tokio::test]
async fn inspect_refuses_components_the_operator_refuses_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let text_file = dir.path().join("notes.wasm");
    std::fs::write(&text_file, "hello").unwrap();
    let core_module = dir.path().join("core.wasm");
    std::fs::write(&core_module, b"\0asm\x01\0\0\0").unwrap();
    let cases = [
        (
            guest("testdata_no_world.wasm"),
            "implements no capwasm provider world",
        ),
        (
            guest("testdata_unsupported_version.wasm"),
            "this host supports capwasm:provider@0.1.2",
        ),
        (
            text_file,
            "not a WebAssembly component; build it for wasm32-wasip2",
        ),
        (core_module, "not a WebAssembly component"),
        (dir.path().join("missing.wasm"), "cannot read component"),
    ];
    for (file, message) in cases {
        let output = capwasm(["provider".as_ref(), "inspect".as_ref(), file.as_os_str()]).await;
        assert_exit(&output, 1);
        let line = one_line(&output);
        assert!(line.starts_with("error: "), "{line}");
        assert!(line.contains(message), "{}: {line}", file.display());
        assert!(stdout(&output).is_empty());
    }
}

// === provider test ===

#[tokio::test]
async fn provider_test_prints_kubeadm_cloud_config_as_json() {
    let output = provider_test(
        "kubeadm_bootstrap.wasm",
        &example("kubeadm-generate-join.json"),
        &[],
    )
    .await;
    assert_exit(&output, 0);
    let data = json_stdout(&output);
    assert_eq!(data["format"], "cloud-config");
    let value = data["value"].as_str().expect("cloud-config is text");
    assert!(value.starts_with("#cloud-config"), "{value}");
    assert!(value.contains("10.0.0.10:6443"), "{value}");
}

#[tokio::test]
async fn log_lines_carry_no_colour_escapes_off_a_terminal() {
    let component = guest("kubeadm_bootstrap.wasm");
    let fixture = example("kubeadm-generate-join.json");
    let output = capwasm_default_log(&[
        "provider",
        "test",
        &component.to_string_lossy(),
        "--input",
        &fixture.to_string_lossy(),
    ])
    .await;
    assert_exit(&output, 0);
    let log = stderr(&output);
    assert!(
        log.contains("INFO guest_call{provider=\"kubeadm_bootstrap\"")
            && log.contains(
                "export=\"bootstrap.generate\"}: capwasm::guest: rendered kubeadm cloud-config"
            ),
        "the guest's log line, at the default level, in the span of its call: {log:?}"
    );
    assert!(!log.contains('\u{1b}'), "no escapes: {log:?}");
}

#[tokio::test]
async fn provider_test_refuses_a_config_its_schema_refuses_before_the_call() {
    let output = provider_test(
        "kubeadm_bootstrap.wasm",
        &example("kubeadm-generate-invalid-token.json"),
        &[],
    )
    .await;
    assert_exit(&output, 12);
    let line = one_line(&output);
    assert!(line.starts_with("invalid config at $.token: "), "{line}");
    assert!(stdout(&output).is_empty());
}

#[tokio::test]
async fn provider_test_exits_with_the_class_of_the_providers_typed_error() {
    let output = provider_test(
        "kubeadm_bootstrap.wasm",
        &example("kubeadm-generate-no-endpoint.json"),
        &[],
    )
    .await;
    assert_exit(&output, 10);
    let line = one_line(&output);
    assert!(line.starts_with("retry after "), "{line}");
    assert!(line.contains("control-plane endpoint"), "{line}");

    let output = provider_test(
        "kubeadm_bootstrap.wasm",
        &example("kubeadm-generate-bad-version.json"),
        &[],
    )
    .await;
    assert_exit(&output, 11);
    let line = one_line(&output);
    assert!(
        line.starts_with("terminal (InvalidKubernetesVersion): "),
        "{line}"
    );
}

#[tokio::test]
async fn provider_test_reports_a_panicking_guest_as_a_trap_with_its_message() {
    let output = provider_test(
        "hostile_panic.wasm",
        &example("kubeadm-generate-join.json"),
        &[],
    )
    .await;
    assert_exit(&output, 20);
    let text = stderr(&output);
    assert!(text.starts_with("trap in bootstrap.generate: "), "{text}");
    assert!(
        text.lines().any(|line| line.starts_with("guest said: ")
            && line.ends_with("hostile guest panics on purpose (owner pool-a)")),
        "{text}"
    );
}

#[tokio::test]
async fn provider_test_names_the_limit_a_hostile_guest_ran_into() {
    let dir = tempfile::tempdir().unwrap();
    let join = example("kubeadm-generate-join.json");
    // The oversized guest takes only `sizeBytes`: 2 MiB, over the 1 MiB output cap.
    let mut oversized: Value =
        serde_json::from_str(&std::fs::read_to_string(&join).unwrap()).unwrap();
    oversized["request"]["config"] = serde_json::json!({"sizeBytes": 2 << 20});
    let oversized_fixture = dir.path().join("oversized.json");
    std::fs::write(&oversized_fixture, oversized.to_string()).unwrap();
    let cases: [(&str, &Path, &[&str], i32, &str); 3] = [
        (
            "hostile_infinite_loop.wasm",
            &join,
            &["--timeout-ms", "200"],
            21,
            "deadline exceeded: bootstrap.generate ran past 200ms (--timeout-ms)",
        ),
        (
            "hostile_memory_bomb.wasm",
            &join,
            &["--memory-mib", "16"],
            22,
            "memory limit exceeded: bootstrap.generate tried to grow past 16 MiB (--memory-mib)",
        ),
        (
            "hostile_oversized_output.wasm",
            &oversized_fixture,
            &["--max-output-kib", "1024"],
            23,
            "output too large: bootstrap.generate returned more than the limit of 1048576 bytes (--max-output-kib)",
        ),
    ];
    for (component, fixture, flags, code, message) in cases {
        let output = provider_test(component, fixture, flags).await;
        assert_exit(&output, code);
        assert_eq!(one_line(&output), message, "{component}");
    }
}

#[tokio::test]
async fn provider_test_refuses_a_call_the_components_world_lacks() {
    let output = provider_test(
        "kubeadm_bootstrap.wasm",
        &example("sim-reconcile-pool.json"),
        &[],
    )
    .await;
    assert_exit(&output, 1);
    let line = one_line(&output);
    assert!(
        line.contains(
            "implements the bootstrap-provider world, which has no machine-pools.reconcile (an export of the infrastructure-provider world)"
        ),
        "{line}"
    );
}

#[tokio::test]
async fn provider_test_names_the_field_of_a_bad_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = dir.path().join("bad.json");
    std::fs::write(
        &fixture,
        r#"{"call": "owns", "request": {"providerID": "sim://local-1/i-1"}}"#,
    )
    .unwrap();
    let output = provider_test("sim_infrastructure.wasm", &fixture, &[]).await;
    assert_exit(&output, 1);
    let line = one_line(&output);
    assert!(line.contains("bad fixture"), "{line}");
    assert!(line.contains("unknown field `providerID`"), "{line}");

    let output = provider_test(
        "sim_infrastructure.wasm",
        &dir.path().join("none.json"),
        &[],
    )
    .await;
    assert_exit(&output, 1);
    assert!(one_line(&output).contains("cannot read the fixture"));
}

#[tokio::test]
async fn provider_test_runs_the_sim_fixtures_that_need_no_cloud() {
    let output = provider_test(
        "sim_infrastructure.wasm",
        &example("sim-reconcile-cluster.json"),
        &[],
    )
    .await;
    assert_exit(&output, 0);
    let state = json_stdout(&output);
    assert_eq!(state["controlPlaneEndpoint"]["host"], "10.0.0.10");
    assert_eq!(state["failureDomains"][1]["name"], "zone-b");

    let output = provider_test(
        "sim_infrastructure.wasm",
        &example("sim-provider-id.json"),
        &[],
    )
    .await;
    assert_exit(&output, 0);
    assert_eq!(json_stdout(&output), "sim://local-1/i-0a1b2c3d");

    let output = provider_test("sim_infrastructure.wasm", &example("sim-owns.json"), &[]).await;
    assert_exit(&output, 0);
    assert_eq!(json_stdout(&output), true);

    let output = provider_test("sim_infrastructure.wasm", &example("info.json"), &[]).await;
    assert_exit(&output, 0);
    assert_eq!(json_stdout(&output)["name"], "sim-infrastructure");
}

#[tokio::test]
async fn provider_test_renders_rolls_up_and_judges_with_the_sample_platform_provider() {
    let render = example("sim-platform-render.json");
    // Without the kinds it renders allowed, nothing of the render is used.
    let output = provider_test("sim_platform.wasm", &render, &[]).await;
    assert_exit(&output, 25);
    assert!(
        stderr(&output).contains(
            "objects[0].kind (Cluster.cluster.x-k8s.io): a kind the ProviderModule's capabilities.allowedKinds does not list"
        ),
        "{}",
        stderr(&output)
    );
    let kinds = [
        "Cluster.cluster.x-k8s.io",
        "MachinePool.cluster.x-k8s.io",
        "WasmCluster.infrastructure.cluster.x-k8s.io",
        "WasmMachinePool.infrastructure.cluster.x-k8s.io",
        "WasmBootstrapConfig.bootstrap.cluster.x-k8s.io",
        "Secret",
    ];
    let allowed: Vec<String> = kinds.iter().map(|k| format!("--allow-kind={k}")).collect();
    let allowed: Vec<&str> = allowed.iter().map(String::as_str).collect();
    let output = provider_test("sim_platform.wasm", &render, &allowed).await;
    assert_exit(&output, 0);
    let rendered = json_stdout(&output);
    let objects = rendered["objects"].as_array().expect("objects");
    let named = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name} in {rendered:#}"))
    };
    assert_eq!(named("MachinePool", "demo-md")["spec"]["replicas"], 2);
    let gpu = &named("MachinePool", "demo-gpu")["metadata"]["annotations"];
    assert_eq!(
        gpu["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"],
        "3"
    );
    // The host stamps the namespace, label and owner on apply, not here.
    assert!(named("Cluster", "demo")["metadata"]["namespace"].is_null());
    named("WasmBootstrapConfig", "demo-md");
    assert_eq!(rendered["secrets"][0]["name"], "demo-encryption");

    // The schema refuses the values before any call.
    let output = provider_test(
        "sim_platform.wasm",
        &example("sim-platform-render-bad-version.json"),
        &[],
    )
    .await;
    assert_exit(&output, 12);
    assert!(
        stderr(&output).contains("$.kubernetesVersion"),
        "{}",
        stderr(&output)
    );

    let output = provider_test(
        "sim_platform.wasm",
        &example("sim-platform-status.json"),
        &[],
    )
    .await;
    assert_exit(&output, 0);
    let summary = json_stdout(&output);
    assert_eq!(summary["phase"], "reconciling", "{summary:#}");
    assert_eq!(summary["nodeGroups"][0]["ready"], 1, "{summary:#}");
    assert_eq!(
        summary["nodes"][0]["kubeletVersion"], "v1.31.2",
        "{summary:#}"
    );

    let output = provider_test(
        "sim_platform.wasm",
        &example("sim-platform-validate-two-minors.json"),
        &[],
    )
    .await;
    assert_exit(&output, 0);
    let refused = json_stdout(&output)["refused"].as_str().map(str::to_owned);
    assert_eq!(
        refused.as_deref(),
        Some("v1.30.4 to v1.33.0 is more than one minor version at once")
    );

    // A platform call on a component of another world is bad input.
    let output = provider_test(
        "kubeadm_bootstrap.wasm",
        &example("sim-platform-validate-one-minor.json"),
        &[],
    )
    .await;
    assert_exit(&output, 1);
    assert!(
        stderr(&output).contains("which has no composition.validate"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn provider_test_reconciles_a_pool_in_a_sim_cloud_it_may_reach() {
    let running = SimCloud::new(Settings {
        boot_delay: Duration::ZERO,
        ..Settings::default()
    })
    .start_on_loopback()
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let allow = ["--allow-host", "127.0.0.1"];

    // Nothing can be created before the bootstrap provider has produced its data.
    let fixture = fixture_for(
        dir.path(),
        "sim-reconcile-pool-no-bootstrap.json",
        &running.endpoint(),
    );
    let output = provider_test("sim_infrastructure.wasm", &fixture, &allow).await;
    assert_exit(&output, 10);
    assert!(one_line(&output).starts_with("retry after 15s: "));

    let fixture = fixture_for(dir.path(), "sim-reconcile-pool.json", &running.endpoint());
    let output = provider_test("sim_infrastructure.wasm", &fixture, &allow).await;
    assert_exit(&output, 0);
    let state = json_stdout(&output);
    let instances = state["instances"].as_array().unwrap();
    assert_eq!(instances.len(), 2, "{state}");
    assert_eq!(instances[0]["state"], "running");
    assert!(
        instances[0]["providerId"]
            .as_str()
            .unwrap()
            .starts_with("sim://local-1/")
    );
    assert_eq!(running.cloud().instances_of("default/pool-a").len(), 2);
}

#[tokio::test]
async fn provider_test_keeps_a_component_from_hosts_it_may_not_reach() {
    let running = SimCloud::new(Settings::default())
        .start_on_loopback()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture_for(dir.path(), "sim-reconcile-pool.json", &running.endpoint());
    let output = provider_test("sim_infrastructure.wasm", &fixture, &[]).await;
    assert_exit(&output, 11);
    let text = stderr(&output);
    let last = text.lines().last().unwrap_or_default();
    assert!(last.starts_with("terminal (HttpRequestDenied): "), "{text}");
    assert!(running.cloud().instances().is_empty());
}

// === sim-cloud ===

/// A `capwasm sim-cloud` process and the endpoint it printed.
struct SimCloudProcess {
    child: tokio::process::Child,
    endpoint: String,
}

async fn sim_cloud(extra: &[&str]) -> SimCloudProcess {
    let mut child = tokio::process::Command::new(BIN)
        .args(["sim-cloud", "--listen", "127.0.0.1:0"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("capwasm sim-cloud starts");
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut line = String::new();
    tokio::time::timeout(WAIT, BufReader::new(stdout).read_line(&mut line))
        .await
        .expect("sim-cloud prints its endpoint in time")
        .expect("stdout is readable");
    let endpoint = line
        .trim()
        .strip_prefix("sim-cloud serving ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    SimCloudProcess { child, endpoint }
}

/// One HTTP/1.1 request; the status and the body.
async fn http(endpoint: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let authority = endpoint.strip_prefix("http://").unwrap();
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut response))
        .await
        .expect("answered in time")
        .unwrap();
    let response = String::from_utf8(response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn create(token: &str, data: &str) -> Value {
    use base64::Engine as _;
    serde_json::json!({
        "requestToken": token,
        "pool": "default/pool-a",
        "bootstrapData": base64::engine::general_purpose::STANDARD.encode(data),
        "bootstrapFormat": "cloud-config",
    })
}

#[tokio::test]
async fn sim_cloud_serves_its_api_and_stops_cleanly_on_sigterm() {
    let mut cloud = sim_cloud(&["--boot-delay", "0"]).await;
    let path = "/v1/regions/local-1/instances";
    let (status, list) = http(&cloud.endpoint, "GET", path, None).await;
    assert_eq!((status, list), (200, serde_json::json!({"instances": []})));

    let (status, joined) = http(
        &cloud.endpoint,
        "POST",
        path,
        Some(&create("t-0", "#cloud-config\n")),
    )
    .await;
    assert_eq!(status, 201, "{joined}");
    assert_eq!(joined["state"], "running");
    // Empty bootstrap data: the machine boots but never joins.
    let (status, failed) = http(&cloud.endpoint, "POST", path, Some(&create("t-1", ""))).await;
    assert_eq!(status, 201, "{failed}");
    assert_eq!(failed["state"], "failed");

    let pid = nix::unistd::Pid::from_raw(cloud.child.id().unwrap().try_into().unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(WAIT, cloud.child.wait())
        .await
        .expect("sim-cloud stops in time")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn sim_cloud_refuses_requests_without_its_bearer_token() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let cloud = sim_cloud(&["--bearer-token-file", token.to_str().unwrap()]).await;
    let (status, body) = http(
        &cloud.endpoint,
        "GET",
        "/v1/regions/local-1/instances",
        None,
    )
    .await;
    assert_eq!(status, 401, "{body}");
}

#[tokio::test]
async fn sim_cloud_says_what_is_wrong_with_its_flags_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    // A kubeconfig whose API server is not there (port 1 of loopback refuses).
    let unreachable = dir.path().join("kubeconfig");
    std::fs::write(
        &unreachable,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .unwrap();
    let unreachable = unreachable.to_str().unwrap();
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    let loopback = "127.0.0.1:0";
    // YAML errors quote the input over several lines.
    let not_yaml = dir.path().join("not-yaml");
    std::fs::write(&not_yaml, "vm\n").unwrap();
    let not_yaml = not_yaml.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["--listen", loopback, "--kubeconfig", unreachable],
            "cannot reach the workload cluster's API server",
        ),
        (
            &["--listen", loopback, "--kubeconfig", not_yaml],
            "cannot read the kubeconfig",
        ),
        (
            &["--listen", loopback, "--kubeconfig", missing],
            "cannot read the kubeconfig",
        ),
        (
            &["--listen", "0.0.0.0:0"],
            "refusing to serve on 0.0.0.0:0 without authentication",
        ),
        (
            &["--listen", loopback, "--bearer-token-file", missing],
            "cannot read the bearer token file",
        ),
    ];
    for (flags, message) in cases {
        let mut args = vec!["sim-cloud"];
        args.extend(flags);
        let output = capwasm_default_log(&args).await;
        assert_exit(&output, 1);
        let line = one_line(&output);
        assert!(line.contains(message), "{flags:?}: {line}");
    }
}

// === flags ===

#[tokio::test]
async fn unknown_flags_fail_with_clap_usage_errors() {
    let output = capwasm(["provider", "inspect", "x.wasm", "--bogus"]).await;
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("unexpected argument '--bogus'"),
        "{}",
        stderr(&output)
    );
    let output = capwasm(["sim-cloud", "--boot-delay", "3"]).await;
    assert_exit(&output, 2);
    assert!(stderr(&output).contains("no unit"), "{}", stderr(&output));
    let output = capwasm(["run", "--max-provider-instances", "0"]).await;
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("--max-provider-instances"),
        "{}",
        stderr(&output)
    );
}

/// The strings of a JSON array (none if it is not one).
fn strings(array: &Value) -> Vec<&str> {
    array
        .as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}
