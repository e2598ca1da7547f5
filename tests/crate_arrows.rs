//! The workspace's crates depend on each other only as the architecture
//! says, and the provider runtime on nothing of Kubernetes: read from
//! `cargo metadata`, so an arrow added the wrong way fails here, not in
//! review.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// Each crate of the workspace and the crates of the workspace it may use.
const ALLOWED: &[(&str, &[&str])] = &[
    ("capwasm-runtime", &[]),
    ("capwasm-api", &["capwasm-runtime"]),
    ("capwasm-oci", &["capwasm-runtime"]),
    ("capwasm-simcloud", &["capwasm-runtime"]),
    (
        "capwasm-provider-tools",
        &["capwasm-runtime", "capwasm-oci", "capwasm-simcloud"],
    ),
    (
        "capwasm-operator",
        &["capwasm-runtime", "capwasm-api", "capwasm-oci"],
    ),
    (
        "capwasm",
        &[
            "capwasm-runtime",
            "capwasm-api",
            "capwasm-oci",
            "capwasm-simcloud",
            "capwasm-provider-tools",
            "capwasm-operator",
        ],
    ),
];

/// Crates the runtime must not reach, even through another crate.
const KUBERNETES: &[&str] = &[
    "kube",
    "kube-client",
    "kube-core",
    "kube-runtime",
    "k8s-openapi",
];

/// The resolved graph: each package id's name and the ids of its normal
/// (not dev, not build) dependencies.
struct Graph {
    names: BTreeMap<String, String>,
    normal: BTreeMap<String, Vec<String>>,
    members: BTreeSet<String>,
}

fn graph() -> Graph {
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata is JSON");
    let names = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            (
                p["id"].as_str().expect("id").to_owned(),
                p["name"].as_str().expect("name").to_owned(),
            )
        })
        .collect();
    let members = metadata["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .map(|id| id.as_str().expect("member id").to_owned())
        .collect();
    let normal = metadata["resolve"]["nodes"]
        .as_array()
        .expect("resolve nodes")
        .iter()
        .map(|node| {
            let deps = node["deps"]
                .as_array()
                .expect("deps")
                .iter()
                .filter(|dep| {
                    dep["dep_kinds"]
                        .as_array()
                        .expect("dep_kinds")
                        .iter()
                        .any(|k| k["kind"].is_null())
                })
                .map(|dep| dep["pkg"].as_str().expect("pkg").to_owned())
                .collect();
            (node["id"].as_str().expect("node id").to_owned(), deps)
        })
        .collect();
    Graph {
        names,
        normal,
        members,
    }
}

impl Graph {
    fn id(&self, name: &str) -> &str {
        self.members
            .iter()
            .find(|id| self.names[*id] == name)
            .unwrap_or_else(|| panic!("{name} is no member of the workspace"))
    }

    /// The names of what `name` depends on directly, for its library and binaries.
    fn direct(&self, name: &str) -> BTreeSet<&str> {
        self.normal[self.id(name)]
            .iter()
            .map(|id| self.names[id].as_str())
            .collect()
    }

    /// The names of everything `name` builds on, through any crate.
    fn reach(&self, name: &str) -> BTreeSet<&str> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![self.id(name).to_owned()];
        while let Some(id) = todo.pop() {
            for dep in &self.normal[&id] {
                if seen.insert(self.names[dep].as_str()) {
                    todo.push(dep.clone());
                }
            }
        }
        seen
    }
}

#[test]
fn each_crate_uses_only_the_crates_below_it() {
    let graph = graph();
    let listed: BTreeSet<&str> = ALLOWED.iter().map(|(name, _)| *name).collect();
    let ours: BTreeSet<&str> = graph
        .members
        .iter()
        .map(|id| graph.names[id].as_str())
        .filter(|name| *name != "capwasm-tests")
        .collect();
    assert_eq!(
        ours, listed,
        "every crate of the workspace has its rule here"
    );
    for (name, allowed) in ALLOWED {
        let used: BTreeSet<&str> = graph
            .direct(name)
            .into_iter()
            .filter(|dep| listed.contains(dep))
            .collect();
        let wrong: Vec<&&str> = used.iter().filter(|dep| !allowed.contains(*dep)).collect();
        assert!(wrong.is_empty(), "{name} depends on {wrong:?}");
    }
}

#[test]
fn the_runtime_reaches_nothing_of_kubernetes() {
    let graph = graph();
    let reached = graph.reach("capwasm-runtime");
    let kubernetes: Vec<&&str> = KUBERNETES.iter().filter(|k| reached.contains(*k)).collect();
    assert!(
        kubernetes.is_empty(),
        "capwasm-runtime builds on {kubernetes:?}"
    );
    // The same walk finds them where they are: the operator builds on both.
    let operator = graph.reach("capwasm-operator");
    assert!(operator.contains("kube") && operator.contains("k8s-openapi"));
}
