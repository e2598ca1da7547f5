//! What reading one webhook request costs in memory: for each body of
//! [`BODY`] bytes built to cost the most, the resident memory its parsing
//! and answer add at their peak, beside the body itself, one line each:
//!
//!     <case>: body=<KiB> peak=+<KiB> (<n.n>x the body): <what came of it>
//!
//! Each case runs in a process of its own (this one, again), so that no
//! case finds memory another freed. Run with
//! `cargo bench -p capwasm --bench webhook_parse` (or `cargo test`, the
//! same figures unoptimised).

use std::process::Command;

use capwasm::api::PlatformCluster;
use capwasm::webhook::bounds::{self, MAX_VALUES};
use kube::core::admission::AdmissionReview;
use serde_json::{Value, json};

/// The API server's limit on a request body, which the webhook keeps.
const BODY: usize = bounds::MAX_BODY;

/// A case: its name, what it parses with, and how its body is built.
type Case = (&'static str, fn(&[u8]) -> Vec<u8>, fn() -> Vec<u8>);

const CASES: [Case; 6] = [
    ("before-bounds: a Value tree of [0,0,…]", tree, zeros_array),
    ("conversion: one object of [0,0,…]", conversion, || {
        conversion_review(&[zeros_object(BODY)])
    }),
    (
        "conversion: v1beta1 Clusters of as many values as allowed",
        conversion,
        clusters_at_the_bound,
    ),
    (
        "conversion: small v1beta1 Clusters",
        conversion,
        small_clusters,
    ),
    (
        "admission: spec.values of as many values as allowed",
        admission,
        admission_at_the_bound,
    ),
    (
        "admission: a field of [0,0,…] beside the request",
        admission,
        admission_with_junk,
    ),
];

fn main() {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some("--case") {
        let index: usize = args.next().and_then(|i| i.parse().ok()).unwrap_or(0);
        return measure(CASES[index].1, CASES[index].2);
    }
    let exe = std::env::current_exe().expect("this benchmark's path");
    for (index, (name, _, _)) in CASES.iter().enumerate() {
        // Fixed thresholds: glibc otherwise raises them as large blocks are
        // freed, and the case would reuse, unseen, what building its body freed.
        let output = Command::new(&exe)
            .args(["--case", &index.to_string()])
            .env("MALLOC_MMAP_THRESHOLD_", "131072")
            .env("MALLOC_TRIM_THRESHOLD_", "131072")
            .output()
            .expect("the case runs");
        println!("{name}: {}", String::from_utf8_lossy(&output.stdout).trim());
    }
}

/// Builds the body, then parses it with the peak of resident memory reset;
/// says what came of it once the peak is read.
fn measure(parse: fn(&[u8]) -> Vec<u8>, build: fn() -> Vec<u8>) {
    let body = build();
    std::fs::write("/proc/self/clear_refs", "5").expect("the peak reset");
    let before = status_kib("VmRSS:");
    let answer = parse(&body);
    let peak = status_kib("VmHWM:").saturating_sub(before);
    let len = body.len() as u64 / 1024;
    println!(
        "body={len}KiB peak=+{peak}KiB ({}.{}x the body): {}",
        peak / len,
        peak * 10 / len % 10,
        outcome(&answer)
    );
}

/// A ConversionReview's result (how many objects were converted, or why
/// none), or what else the case answered.
fn outcome(answer: &[u8]) -> String {
    let Ok(said) = serde_json::from_slice::<Value>(answer) else {
        return String::from_utf8_lossy(answer).into_owned();
    };
    let result = &said["response"]["result"];
    let converted = said["response"]["convertedObjects"]
        .as_array()
        .map_or(0, Vec::len);
    format!(
        "{converted} objects converted; {} {}",
        result["status"].as_str().unwrap_or_default(),
        result["message"].as_str().unwrap_or_default()
    )
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .expect("/proc/self/status")
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("the field")
}

fn tree(body: &[u8]) -> Vec<u8> {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    std::hint::black_box(&value);
    Vec::new()
}

fn conversion(body: &[u8]) -> Vec<u8> {
    let (store, _writer) = kube::runtime::reflector::store();
    let converter = capwasm::webhook::converter(store);
    capwasm::webhook::review(body, converter.as_ref())
}

fn admission(body: &[u8]) -> Vec<u8> {
    match bounds::parse::<AdmissionReview<PlatformCluster>>(body) {
        Ok(review) => {
            std::hint::black_box(&review);
            b"parsed".to_vec()
        }
        Err(error) => capwasm::report::error_chain(&error).into_bytes(),
    }
}

/// `[0,0,…]`, [`BODY`] bytes.
fn zeros_array() -> Vec<u8> {
    let mut body = b"[0".to_vec();
    while body.len() + 3 <= BODY {
        body.extend_from_slice(b",0");
    }
    body.push(b']');
    body
}

/// `"zeros":[0,0,…]` with `values` zeros, as JSON text to put in an object.
fn zeros_field(values: usize) -> String {
    let mut field = String::from(r#""zeros":[0"#);
    for _ in 1..values {
        field.push_str(",0");
    }
    field.push(']');
    field
}

/// A v1beta1 Cluster whose `spec.zeros` take about `len` bytes.
fn zeros_object(len: usize) -> Value {
    let zeros: Value =
        serde_json::from_str(&format!("{{{}}}", zeros_field(len / 2))).unwrap_or_default();
    json!({ "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "spec": zeros })
}

fn conversion_review(objects: &[Value]) -> Vec<u8> {
    let one: Vec<Vec<u8>> = objects
        .iter()
        .map(|o| serde_json::to_vec(o).unwrap_or_default())
        .collect();
    review_of(&one.iter().map(Vec::as_slice).collect::<Vec<_>>())
}

/// A ConversionReview to v1beta2 of `objects` (JSON text each).
fn review_of(objects: &[&[u8]]) -> Vec<u8> {
    let mut body = br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u-1","desiredAPIVersion":"cluster.x-k8s.io/v1beta2","objects":["#.to_vec();
    body.extend_from_slice(&objects.join(&b","[..]));
    body.extend_from_slice(b"]}}");
    body
}

/// A v1beta1 Cluster as users write one, with `metadata.managedFields`
/// holding `zeros` values (kept through the conversion, as all metadata).
fn cluster(name: &str, zeros: usize) -> Value {
    let version = capwasm::api::provider::VERSION;
    let fields: Value =
        serde_json::from_str(&format!("{{{}}}", zeros_field(zeros.max(1)))).unwrap_or_default();
    let managed = if zeros == 0 {
        json!([])
    } else {
        json!([{ "manager": "m", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields }])
    };
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Cluster",
        "metadata": { "name": name, "namespace": "default", "managedFields": managed },
        "spec": { "infrastructureRef": {
            "apiVersion": format!("infrastructure.cluster.x-k8s.io/{version}"),
            "kind": "WasmCluster",
            "name": name,
        }},
    })
}

/// Clusters of just under [`MAX_VALUES`] values each, filling the body.
fn clusters_at_the_bound() -> Vec<u8> {
    let one = serde_json::to_vec(&cluster("c", MAX_VALUES - 100)).unwrap_or_default();
    review_of(&vec![one.as_slice(); BODY / (one.len() + 1) - 1])
}

/// As many small Clusters as fill the body.
fn small_clusters() -> Vec<u8> {
    let one = serde_json::to_vec(&cluster("c", 0)).unwrap_or_default();
    review_of(&vec![one.as_slice(); BODY / (one.len() + 1) - 1])
}

/// An AdmissionReview of a PlatformCluster with `spec.values` of `zeros` zeros, and `junk` beside its request.
fn admission_review(zeros: usize, junk: &str) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",{junk}"request":{{"uid":"u-1","kind":{{"group":"platform.capwasm.dev","version":"v1alpha1","kind":"PlatformCluster"}},"resource":{{"group":"platform.capwasm.dev","version":"v1alpha1","resource":"platformclusters"}},"operation":"CREATE","userInfo":{{}},"object":{{"apiVersion":"platform.capwasm.dev/v1alpha1","kind":"PlatformCluster","metadata":{{"name":"big"}},"spec":{{"templateName":"t","values":{{{}}}}}}}}}}}"#,
        zeros_field(zeros)
    )
    .into_bytes()
}

fn admission_at_the_bound() -> Vec<u8> {
    admission_review(MAX_VALUES - 100, "")
}

fn admission_with_junk() -> Vec<u8> {
    admission_review(1, &format!("{},", zeros_field(BODY / 2 - 1000)))
}
