//! What plugs capwasm into a cluster's existing tooling: the alerts of
//! `deploy/monitoring/` pass promtool's checks and unit tests (each fires
//! from the series the operator exports, under their exact names); every
//! series the alerts and the dashboard read is one a running operator
//! exports, of the type its name says, and controller-runtime's carry
//! upstream's labels after a reconcile; `--log-level` sets what is logged
//! unless `RUST_LOG` is set; and `--otlp-endpoint` sends the spans of a
//! reconcile to an OTLP/HTTP receiver.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use capwasm::api::providermodule::World;
use capwasm::api::{MachinePool, ProviderModule};
use capwasm::testing::guest_path;
use capwasm::testing::objects::{MachinePoolBuilder, ProviderModuleBuilder};
use kube::Api;
use kube::api::PostParams;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message as _;
use serde_json::Value as Json;
use testenv::TestEnv;
use testenv::flows::wait_for_module;
use testenv::operator::{Launch, OperatorProcess};

/// The job label the ServiceMonitor gives every series (the Service's name).
const JOB: &str = r#"job="capwasm-metrics""#;

/// Held by each test that runs operators: every operator reconciles every
/// (cluster-scoped) ProviderModule, and one stopping marks the modules it
/// was loading as abandoned, so the tests' operators take turns.
static OPERATORS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
}

/// `deploy/monitoring/`, rendered by kustomize as `kubectl apply -k` does.
fn monitoring() -> Vec<Json> {
    let text = testenv::kustomize::build(&repo().join("deploy/monitoring")).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).unwrap())
        .collect()
}

fn of_kind<'a>(objects: &'a [Json], kind: &str) -> &'a Json {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("deploy/monitoring/ renders no {kind}"))
}

/// The PromQL of every alert, and of every panel of the dashboard.
fn expressions() -> Vec<String> {
    let objects = monitoring();
    let rule = of_kind(&objects, "PrometheusRule");
    let mut exprs: Vec<String> = rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| r["expr"].as_str().unwrap().to_owned())
        .collect();
    let config_map = of_kind(&objects, "ConfigMap");
    assert_eq!(
        config_map["metadata"]["labels"]["grafana_dashboard"], "1",
        "Grafana's sidecar finds dashboards by this label"
    );
    let dashboard: Json =
        serde_json::from_str(config_map["data"]["capwasm.json"].as_str().unwrap()).unwrap();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(target["expr"].as_str().unwrap().to_owned());
        }
    }
    exprs
}

/// The metric names of the selectors (`name{…}`) of `expr`, each checked
/// to select on the ServiceMonitor's job.
fn selected_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in expr.match_indices('{') {
        let before = &expr[..at];
        let start = before
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |i| i + 1);
        let name = &before[start..];
        if name.is_empty() {
            continue;
        }
        let selector = &expr[at..expr[at..].find('}').map_or(expr.len(), |e| at + e)];
        assert!(
            selector.contains(JOB),
            "{name} in `{expr}` does not select {JOB}"
        );
        names.push(name.to_owned());
    }
    names
}

/// The family a series name belongs to and the type its suffix says:
/// `_total` a counter, `_bucket`/`_count`/`_sum` a histogram, else a gauge.
fn family(series: &str) -> (&str, &str) {
    for (suffix, kind) in [
        ("_total", "counter"),
        ("_bucket", "histogram"),
        ("_count", "histogram"),
        ("_sum", "histogram"),
    ] {
        if let Some(family) = series.strip_suffix(suffix) {
            return (family, kind);
        }
    }
    (series, "gauge")
}

/// The value of the one series `series` (`name{labels}`), if exported.
fn value(metrics: &str, series: &str) -> Option<f64> {
    let prefix = format!("{series} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

fn promtool() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("promtool/build.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    assert!(output.status.success(), "{} failed", script.display());
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim()).join("promtool")
}

#[test]
fn promtool_checks_the_rules_and_each_alert_fires_in_its_unit_test() {
    let objects = monitoring();
    let rule = of_kind(&objects, "PrometheusRule");
    let dir = tempfile::tempdir().unwrap();
    // promtool reads a rule file: the PrometheusRule's spec is one.
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_yaml_ng::to_string(&rule["spec"]).unwrap(),
    )
    .unwrap();
    std::fs::copy(
        repo().join("tests/fixtures/monitoring/rules_test.yaml"),
        dir.path().join("rules_test.yaml"),
    )
    .unwrap();
    let promtool = promtool();
    let run = |args: &[&str]| {
        let output = Command::new(&promtool)
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "promtool {args:?}:\n{text}");
        text
    };
    let checked = run(&["check", "rules", "rules.yaml"]);
    assert!(checked.contains("SUCCESS: 7 rules found"), "{checked}");
    let tested = run(&["test", "rules", "rules_test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
    // Every alert has a unit test in which it fires.
    let tests = std::fs::read_to_string(dir.path().join("rules_test.yaml")).unwrap();
    for alert in rule["spec"]["groups"][0]["rules"].as_array().unwrap() {
        let name = alert["alert"].as_str().unwrap();
        assert!(
            tests.contains(&format!("name: {name} fires")),
            "{name} has no unit test firing it"
        );
        assert!(
            alert["annotations"]["runbook_url"]
                .as_str()
                .is_some_and(|u| u.ends_with(&format!("operating.md#{}", name.to_lowercase()))),
            "{name}'s runbook is not its section of docs/operating.md"
        );
        let docs = std::fs::read_to_string(repo().join("docs/operating.md")).unwrap();
        assert!(
            docs.contains(&format!("### {name}\n")),
            "docs/operating.md has no runbook section {name}"
        );
    }
}

#[tokio::test]
async fn every_series_the_alerts_and_dashboard_read_is_exported_with_upstream_labels() {
    let _turn = OPERATORS.lock().await;
    let env = TestEnv::shared().await.unwrap();
    let ns = env.management().create_namespace("metrics").await.unwrap();
    let operator = OperatorProcess::start(env.management(), &ns, "replica-1", &[]).await;
    operator.ready().await;
    // A module that cannot load (Failed), one that loads (calls into its
    // guest), and a pool of a Cluster that does not exist (a reconcile error).
    let client = env.management().client().unwrap();
    let modules: Api<ProviderModule> = Api::all(client.clone());
    let failed = format!("{ns}-missing");
    let kubeadm = guest_path("kubeadm_bootstrap.wasm");
    for module in [
        ProviderModuleBuilder::file(&failed, World::Bootstrap, "/nonexistent.wasm").build(),
        ProviderModuleBuilder::file(
            &format!("{ns}-kubeadm"),
            World::Bootstrap,
            &kubeadm.to_string_lossy(),
        )
        .build(),
    ] {
        modules
            .create(&PostParams::default(), &module)
            .await
            .unwrap();
    }
    let pools: Api<MachinePool> = Api::namespaced(client, &ns);
    pools
        .create(
            &PostParams::default(),
            &MachinePoolBuilder::new(&ns, "orphan", "no-such-cluster").build(),
        )
        .await
        .unwrap();
    wait_for_module(&modules, &failed, "Failed").await;
    let until = std::time::Instant::now() + Duration::from_secs(60);
    let metrics = loop {
        let (code, metrics) = operator.get("/metrics").await;
        assert_eq!(code, 200);
        if metrics.contains("\ncapwasm_guest_calls_total{")
            && metrics.contains("\ncapwasm_reconcile_failures_total{controller=\"machinepool\"")
        {
            break metrics;
        }
        assert!(
            std::time::Instant::now() < until,
            "no guest call or reconcile failure within 60 s:\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };

    assert_every_selected_series_is_declared(&metrics);
    assert_upstream_series(&metrics, env);
}

/// Every name the alerts and the dashboard select is a family `metrics`
/// declares, of the type the name says.
fn assert_every_selected_series_is_declared(metrics: &str) {
    let mut names = BTreeSet::new();
    for expr in expressions() {
        let selected = selected_names(&expr);
        assert!(!selected.is_empty(), "`{expr}` selects no series");
        names.extend(selected);
    }
    // Prometheus's own, of every scrape.
    names.remove("up");
    assert!(names.len() >= 20, "{names:?}");
    // Only a failed list or watch makes this family (a missing RBAC rule):
    // the operator's own Metrics type is asked for it here.
    let mut registry = prometheus_client::registry::Registry::default();
    capwasm::controllers::Metrics::register(&mut registry).watch_error("secrets");
    let mut watch_errors = String::new();
    prometheus_client::encoding::text::encode(&mut watch_errors, &registry).unwrap();
    for name in &names {
        let (family, kind) = family(name);
        let declared = format!("# TYPE {family} {kind}\n");
        if family == "capwasm_watch_errors" {
            assert!(watch_errors.contains(&declared), "{watch_errors}");
            continue;
        }
        assert!(
            metrics.contains(&declared),
            "{name}: the operator exports no {kind} {family}; it exports {:?}",
            metrics
                .lines()
                .filter(|l| l.starts_with("# TYPE"))
                .collect::<Vec<_>>()
        );
    }
}

/// controller-runtime's series in `metrics`, with its labels, after reconciles.
fn assert_upstream_series(metrics: &str, env: &TestEnv) {
    let pm = r#"controller="providermodule""#;
    let queue = r#"name="providermodule",controller="providermodule""#;
    let at_least = |series: String, least: f64| {
        let got = value(metrics, &series);
        assert!(
            got.is_some_and(|v| v >= least),
            "{series} = {got:?}, wanted at least {least}"
        );
    };
    for result in ["success", "error", "requeue", "requeue_after"] {
        at_least(
            format!(r#"controller_runtime_reconcile_total{{{pm},result="{result}"}}"#),
            0.0,
        );
    }
    // The finalizer added (await_change), then the module failed to load
    // (back at the resync).
    at_least(
        format!(r#"controller_runtime_reconcile_total{{{pm},result="success"}}"#),
        1.0,
    );
    at_least(
        format!(r#"controller_runtime_reconcile_total{{{pm},result="requeue_after"}}"#),
        1.0,
    );
    at_least(
        format!("controller_runtime_reconcile_errors_total{{{pm}}}"),
        0.0,
    );
    at_least(
        format!("controller_runtime_reconcile_time_seconds_count{{{pm}}}"),
        2.0,
    );
    assert_eq!(
        value(
            metrics,
            &format!("controller_runtime_max_concurrent_reconciles{{{pm}}}")
        ),
        Some(16.0)
    );
    at_least(format!("workqueue_adds_total{{{queue}}}"), 2.0);
    at_least(format!("workqueue_retries_total{{{queue}}}"), 1.0);
    at_least(
        format!("workqueue_work_duration_seconds_count{{{queue}}}"),
        2.0,
    );
    at_least(format!("workqueue_unfinished_work_seconds{{{queue}}}"), 0.0);
    let server = &env.management().kubeconfig().clusters[0]
        .cluster
        .as_ref()
        .unwrap()
        .server;
    let host = server
        .as_deref()
        .unwrap()
        .trim_start_matches("https://")
        .trim_end_matches('/');
    at_least(
        format!(r#"rest_client_requests_total{{code="200",method="GET",host="{host}"}}"#),
        1.0,
    );
    at_least(
        format!(r#"rest_client_requests_total{{code="200",method="PATCH",host="{host}"}}"#),
        1.0,
    );
    assert_eq!(
        value(
            metrics,
            r#"leader_election_master_status{name="capwasm-leader"}"#
        ),
        Some(1.0)
    );
    at_least(r#"capwasm_provider_modules{phase="Failed"}"#.into(), 1.0);
    assert_eq!(
        value(metrics, r#"capwasm_ready{check="webhook"}"#),
        Some(1.0)
    );
    at_least("process_resident_memory_bytes".into(), 10e6);
    at_least("process_open_fds".into(), 5.0);
    at_least("process_cpu_seconds_total".into(), 0.01);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = value(metrics, "process_start_time_seconds").unwrap();
    assert!(
        started <= now && started > now - 600.0,
        "{started} is not a moment ago"
    );
}

/// Launches an operator with `args` and `RUST_LOG` = `rust_log` (empty:
/// unset), and makes it reconcile a module; its log lines at debug level.
async fn debug_lines(env: &TestEnv, rust_log: &str, args: &[&str]) -> Vec<String> {
    let ns = env
        .management()
        .create_namespace("log-level")
        .await
        .unwrap();
    let launch = Launch {
        log: rust_log,
        ..Launch::default()
    };
    let operator = OperatorProcess::launch(env.management(), &ns, "replica-1", args, launch).await;
    let modules: Api<ProviderModule> = Api::all(env.management().client().unwrap());
    let name = format!("{ns}-missing");
    let module = ProviderModuleBuilder::file(&name, World::Bootstrap, "/nonexistent.wasm").build();
    modules
        .create(&PostParams::default(), &module)
        .await
        .unwrap();
    wait_for_module(&modules, &name, "Failed").await;
    operator.log_lines(|line| line.contains(" DEBUG "))
}

#[tokio::test]
async fn log_level_sets_what_is_logged_and_rust_log_wins_when_set() {
    let _turn = OPERATORS.lock().await;
    let env = TestEnv::shared().await.unwrap();
    let directive = "--log-level=info,capwasm_operator::controllers::reconciler=debug";
    let debug = debug_lines(env, "", &[directive]).await;
    assert!(
        debug
            .iter()
            .any(|l| l.contains("capwasm_operator::controllers::reconciler")
                && l.contains("reconciling")),
        "{debug:?}"
    );
    let overridden = debug_lines(env, "info", &[directive]).await;
    assert!(overridden.is_empty(), "{overridden:?}");
}

/// A span as the receiver decoded it.
#[derive(Clone, Debug)]
struct Received {
    name: String,
    span_id: Vec<u8>,
    parent_span_id: Vec<u8>,
    attributes: Vec<(String, String)>,
    service: Option<String>,
}

type Spans = Arc<Mutex<Vec<Received>>>;

/// OTLP/HTTP's traces endpoint: protobuf in, an empty protobuf answer out.
async fn traces(State(spans): State<Spans>, body: Bytes) -> impl axum::response::IntoResponse {
    let string = |v: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>| match v
        .and_then(|v| v.value.as_ref())
    {
        Some(Value::StringValue(s)) => s.clone(),
        other => format!("{other:?}"),
    };
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP trace request");
    let mut received = spans.lock().unwrap();
    for resource_spans in request.resource_spans {
        let service = resource_spans.resource.as_ref().and_then(|r| {
            r.attributes
                .iter()
                .find(|a| a.key == "service.name")
                .map(|a| string(a.value.as_ref()))
        });
        for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
            received.push(Received {
                name: span.name,
                span_id: span.span_id,
                parent_span_id: span.parent_span_id,
                attributes: span
                    .attributes
                    .iter()
                    .map(|a| (a.key.clone(), string(a.value.as_ref())))
                    .collect(),
                service: service.clone(),
            });
        }
    }
    (
        [(http::header::CONTENT_TYPE, "application/x-protobuf")],
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}

#[tokio::test]
async fn spans_of_a_reconcile_reach_an_otlp_receiver() {
    let spans = Spans::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .with_state(spans.clone());
    let receiver = tokio::spawn(async move { axum::serve(listener, app).await });
    let _turn = OPERATORS.lock().await;

    let env = TestEnv::shared().await.unwrap();
    let ns = env.management().create_namespace("otlp").await.unwrap();
    let flag = format!("--otlp-endpoint={endpoint}");
    let mut operator =
        OperatorProcess::start(env.management(), &ns, "replica-1", &[flag.as_str()]).await;
    let modules: Api<ProviderModule> = Api::all(env.management().client().unwrap());
    let name = format!("{ns}-missing");
    let module = ProviderModuleBuilder::file(&name, World::Bootstrap, "/nonexistent.wasm").build();
    modules
        .create(&PostParams::default(), &module)
        .await
        .unwrap();
    wait_for_module(&modules, &name, "Failed").await;
    // The spans still in the batch go out as the process exits.
    let (status, _) = operator.terminate(Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}");
    receiver.abort();

    let spans = spans.lock().unwrap().clone();
    let object = format!("ProviderModule.v1alpha1.runtime.capwasm.dev/{name}");
    let reconciles: Vec<&Received> = spans
        .iter()
        .filter(|s| {
            s.name == "reconcile"
                && s.attributes
                    .contains(&("object.ref".into(), object.clone()))
        })
        .collect();
    assert!(
        !reconciles.is_empty(),
        "no reconcile span of {object} among {} spans: {:?}",
        spans.len(),
        spans.iter().map(|s| &s.name).collect::<BTreeSet<_>>()
    );
    for reconcile in reconciles {
        assert!(
            reconcile
                .attributes
                .contains(&("controller".into(), "providermodule".into())),
            "{reconcile:?}"
        );
        assert_eq!(reconcile.service.as_deref(), Some("capwasm"));
        // Its parent is kube-runtime's span of the same object, sent too.
        let parent = spans
            .iter()
            .find(|s| s.span_id == reconcile.parent_span_id)
            .unwrap_or_else(|| panic!("the parent of {reconcile:?} was not sent"));
        assert_eq!(parent.name, "reconciling object", "{parent:?}");
    }
}
