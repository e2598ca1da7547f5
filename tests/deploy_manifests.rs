//! `deploy/`, rendered by kustomize as `kubectl apply -k` does: every
//! manifest (and every CRD) applies, the operator does its whole job holding
//! exactly the ClusterRole there, the Deployment's arguments are ones
//! `capwasm run` accepts, the NetworkPolicy lets in what the operator
//! serves and nothing else, and `deploy/provider-mode/` is the same install
//! beside upstream Cluster API's core.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use capwasm::leader::{self, Election};
use clap::Parser as _;
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Container, Namespace, Pod, PodTemplateSpec, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, ObjectMeta, PatchParams, PostParams,
};
use kube::{Client, ResourceExt as _};
use serde::Deserialize as _;
use testenv::flows::{Apis, WAIT, wait_for, wait_for_cluster, wait_for_event, wait_for_pool};
use testenv::{Stack, TestEnv};
use tracing_subscriber::layer::SubscriberExt as _;

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy");
const CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../crds");
const FIELD_MANAGER: &str = "capwasm-deploy-test";
/// How long the ServiceAccount's permissions may take to reach the API
/// server's authorizer.
const RBAC_PROPAGATION: Duration = Duration::from_secs(30);

// === manifests ===

/// The kustomization of the standalone install (`deploy/`) and of provider
/// mode, beside upstream Cluster API's core (`deploy/provider-mode/`).
const STANDALONE: &str = "";
const PROVIDER_MODE: &str = "provider-mode";
const SHARDED: &str = "sharded";

/// A manifest and where it came from.
struct Manifest {
    source: String,
    object: DynamicObject,
}

impl Manifest {
    fn kind(&self) -> &str {
        self.object.types.as_ref().map_or("", |t| t.kind.as_str())
    }

    fn describe(&self) -> String {
        format!(
            "{} {} ({})",
            self.kind(),
            self.object.name_any(),
            self.source
        )
    }

    fn key(&self) -> (String, String) {
        (self.kind().to_owned(), self.object.name_any())
    }
}

/// Every object in `text` (several documents allowed), from `source`.
fn parse_objects(source: &str, text: &str) -> Vec<Manifest> {
    let mut manifests = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value = serde_json::Value::deserialize(document)
            .unwrap_or_else(|e| panic!("{source} is not YAML: {e}"));
        if value.is_null() {
            continue;
        }
        let object = serde_json::from_value(value).unwrap_or_else(|e| {
            panic!("{source} holds something other than a Kubernetes object: {e}")
        });
        manifests.push(Manifest {
            source: source.to_owned(),
            object,
        });
    }
    manifests
}

/// Every object in a YAML file.
fn read_objects(path: &Path) -> Vec<Manifest> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    parse_objects(&path.display().to_string(), &text)
}

/// What `kubectl apply -k deploy/<variant>` applies, rendered by kustomize.
fn rendered(variant: &str) -> Vec<Manifest> {
    let dir = Path::new(DEPLOY).join(variant);
    let text = testenv::kustomize::build(&dir)
        .unwrap_or_else(|e| panic!("{}", capwasm::report::error_chain(&e)));
    parse_objects(&format!("kustomize build deploy/{variant}"), &text)
}

/// The standalone install's objects but its CRDs.
fn manifests() -> Vec<Manifest> {
    rendered(STANDALONE)
        .into_iter()
        .filter(|m| m.kind() != "CustomResourceDefinition")
        .collect()
}

/// The CRDs the standalone install has (every file in `crds/`: the crd_drift
/// test keeps `crds/kustomization.yaml` listing them all).
fn crds() -> Vec<Manifest> {
    rendered(STANDALONE)
        .into_iter()
        .filter(|m| m.kind() == "CustomResourceDefinition")
        .collect()
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| p.file_name().is_some_and(|f| f != "kustomization.yaml"))
        .collect();
    files.sort();
    files
}

fn the_deployment() -> Deployment {
    deployment_of(&manifests())
}

fn deployment_of(manifests: &[Manifest]) -> Deployment {
    let manifest = manifests
        .iter()
        .find(|m| m.kind() == "Deployment")
        .expect("a Deployment");
    serde_json::from_value(serde_json::to_value(&manifest.object).expect("serialisable"))
        .expect("the Deployment is a valid apps/v1 Deployment")
}

/// Applies `manifest` (server-side) wherever discovery says its kind lives.
async fn apply(
    client: &Client,
    manifest: &Manifest,
    params: &PatchParams,
) -> Result<DynamicObject, String> {
    testenv::kustomize::apply(client, &manifest.object, params)
        .await
        .map_err(|e| capwasm::report::error_chain(&e))
}

// === the operator's warnings ===

/// Every warning (and error) logged in this process, for a test to read:
/// a forbidden request leaves a line here, whoever made it.
struct Warnings {
    lines: Mutex<Vec<String>>,
    count: tokio::sync::watch::Sender<usize>,
}

impl Warnings {
    /// The process's one collector, installed as the global subscriber the
    /// first time (with CAPWASM_TEST_LOG's filter, its lines also go to stderr).
    fn install() -> Arc<Warnings> {
        static WARNINGS: OnceLock<Arc<Warnings>> = OnceLock::new();
        WARNINGS
            .get_or_init(|| {
                use tracing_subscriber::Layer as _;
                let warnings = Arc::new(Warnings {
                    lines: Mutex::new(Vec::new()),
                    count: tokio::sync::watch::Sender::new(0),
                });
                let collect = tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(Collector(warnings.clone()))
                    .with_filter(tracing_subscriber::filter::LevelFilter::WARN);
                let show = std::env::var("CAPWASM_TEST_LOG").ok().map(|filter| {
                    tracing_subscriber::fmt::layer()
                        .with_writer(std::io::stderr)
                        .with_filter(tracing_subscriber::EnvFilter::new(filter))
                });
                let subscriber = tracing_subscriber::registry().with(collect).with(show);
                tracing::subscriber::set_global_default(subscriber)
                    .expect("no other global subscriber in this test binary");
                warnings
            })
            .clone()
    }

    fn len(&self) -> usize {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The lines from the `mark`th on.
    fn since(&self, mark: usize) -> Vec<String> {
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)[mark..].to_vec()
    }

    /// The forbidden requests logged from the `mark`th line on.
    fn forbidden_since(&self, mark: usize) -> Vec<String> {
        self.since(mark)
            .into_iter()
            .filter(|l| l.to_ascii_lowercase().contains("forbidden"))
            .collect()
    }

    /// Completes once a forbidden request is logged after `mark`.
    async fn first_forbidden_since(&self, mark: usize) -> Vec<String> {
        let mut count = self.count.subscribe();
        loop {
            let forbidden = self.forbidden_since(mark);
            if !forbidden.is_empty() {
                return forbidden;
            }
            if count.changed().await.is_err() {
                return Vec::new();
            }
        }
    }
}

struct Collector(Arc<Warnings>);

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Collector {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line {
            text: Vec::new(),
            warnings: self.0.clone(),
        }
    }
}

/// One formatted event, kept when the formatter is done with it.
struct Line {
    text: Vec<u8>,
    warnings: Arc<Warnings>,
}

impl std::io::Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.text.is_empty() {
            return;
        }
        let line = String::from_utf8_lossy(&self.text).trim_end().to_owned();
        let count = {
            let mut lines = self
                .warnings
                .lines
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            lines.push(line);
            lines.len()
        };
        self.warnings.count.send_replace(count);
    }
}

// === tests ===

#[test]
fn the_standalone_install_has_every_manifest_and_crd() {
    let installed: BTreeSet<(String, String)> =
        rendered(STANDALONE).iter().map(Manifest::key).collect();
    let files = yaml_files(&Path::new(DEPLOY).join("operator"))
        .into_iter()
        .chain(yaml_files(Path::new(CRDS)));
    let missing: Vec<String> = files
        .flat_map(|file| read_objects(&file))
        .filter(|m| !installed.contains(&m.key()))
        .map(|m| m.describe())
        .collect();
    assert!(
        missing.is_empty(),
        "`kubectl apply -k deploy/` would not install: {missing:?}"
    );
}

/// Applies `manifests` with a server-side dry run, failing on any refusal;
/// a Namespace is applied for real, as the objects in it need it.
async fn applies_with_dry_run(client: &Client, manifests: &[Manifest]) {
    let dry_run = PatchParams::apply(FIELD_MANAGER).dry_run();
    let mut refused = Vec::new();
    for manifest in manifests {
        if let Err(e) = apply(client, manifest, &dry_run).await {
            refused.push(format!("{}: {e}", manifest.describe()));
        }
        if manifest.kind() == "Namespace" {
            apply(client, manifest, &PatchParams::apply(FIELD_MANAGER))
                .await
                .unwrap();
        }
    }
    assert!(
        refused.is_empty(),
        "the API server refused (dry run):\n{}",
        refused.join("\n")
    );
}

#[tokio::test]
async fn every_manifest_and_crd_applies_with_server_side_dry_run() {
    let env = TestEnv::shared().await.unwrap();
    let client = env.management().client().unwrap();
    // In the README's order: the CRDs, then the kustomization.
    let all: Vec<Manifest> = crds().into_iter().chain(manifests()).collect();
    assert!(all.len() > crds().len(), "deploy/ has no manifest");
    applies_with_dry_run(&client, &all).await;

    // Pod Security admission enforces the namespace's level on Pods, not on
    // the Deployment: the Pod it would make must pass too.
    let deployment = the_deployment();
    let namespace = deployment.namespace().expect("the Deployment's namespace");
    let template = deployment.spec.map(|s| s.template).expect("a pod template");
    let level = Api::<Namespace>::all(client.clone())
        .get(&namespace)
        .await
        .unwrap()
        .labels()
        .get("pod-security.kubernetes.io/enforce")
        .cloned();
    assert_eq!(level.as_deref(), Some("restricted"));
    let pod = Pod {
        metadata: ObjectMeta {
            generate_name: Some("capwasm-dry-run-".into()),
            namespace: Some(namespace.clone()),
            ..template.metadata.unwrap_or_default()
        },
        spec: template.spec,
        ..Pod::default()
    };
    Api::<Pod>::namespaced(client, &namespace)
        .create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &pod,
        )
        .await
        .unwrap_or_else(|e| panic!("the Deployment's Pod is refused in {namespace}: {e}"));
}

/// The operator's own role reads Clusters and MachinePools, and gets,
/// creates, applies and deletes them only as a platform cluster's objects:
/// never their status, finalizers by update, or anything else. Of
/// Machines it lists and deletes those of the instances a scale-down
/// removes, as the infrastructure side of MachinePool Machines does.
fn reads_or_composes_clusters(rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>) {
    for rule in rules {
        if rule
            .api_groups
            .iter()
            .flatten()
            .any(|g| g == "cluster.x-k8s.io")
        {
            if rule.resources.as_deref() == Some(&["machines".to_owned()][..]) {
                assert_eq!(rule.verbs, ["list", "delete"], "{rule:?}");
                continue;
            }
            let composed = ["get", "list", "watch", "create", "patch", "delete"];
            assert!(
                rule.verbs == ["list", "watch"] || rule.verbs == composed,
                "{rule:?}"
            );
            let mut resources = rule.resources.iter().flatten();
            assert!(
                resources.all(|r| r == "clusters" || r == "machinepools"),
                "{rule:?}"
            );
        }
    }
}

/// Provider mode renders the standalone install without the core CRDs,
/// with the provider controllers only, a ClusterRole that writes no Cluster
/// or MachinePool, and the provider kinds aggregated into upstream's manager
/// role; all of it applies.
#[tokio::test]
async fn provider_mode_installs_only_the_providers_and_applies_with_server_side_dry_run() {
    let provider_mode = rendered(PROVIDER_MODE);
    let crds: BTreeSet<String> = provider_mode
        .iter()
        .filter(|m| m.kind() == "CustomResourceDefinition")
        .map(|m| m.object.name_any())
        .collect();
    // Upstream's CRDs serve Cluster, MachinePool and Machine.
    let core = [
        "clusters.cluster.x-k8s.io",
        "machinepools.cluster.x-k8s.io",
        "machines.cluster.x-k8s.io",
    ];
    let expected: BTreeSet<String> = self::crds()
        .iter()
        .map(|m| m.object.name_any())
        .filter(|name| !core.contains(&name.as_str()))
        .collect();
    assert_eq!(crds.len(), 8, "{crds:?}");
    assert_eq!(
        crds, expected,
        "provider mode installs the provider kinds, ProviderModule and the platform kinds"
    );

    // The same Deployment but for the controllers it runs.
    let args = |deployment: Deployment| {
        deployment
            .spec
            .and_then(|s| s.template.spec)
            .map(|s| s.containers[0].args.clone().unwrap_or_default())
            .unwrap_or_default()
    };
    let standalone_args = args(the_deployment());
    let provider_args = args(deployment_of(&provider_mode));
    let changed: Vec<(&String, &String)> = standalone_args
        .iter()
        .zip(&provider_args)
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(standalone_args.len(), provider_args.len());
    assert_eq!(
        changed,
        [(
            &"--controllers=all".to_owned(),
            &"--controllers=providers".to_owned()
        )]
    );

    let roles: Vec<k8s_openapi::api::rbac::v1::ClusterRole> = provider_mode
        .iter()
        .filter(|m| m.kind() == "ClusterRole")
        .map(|m| serde_json::from_value(serde_json::to_value(&m.object).unwrap()).unwrap())
        .collect();
    let rules_of = |name: &str| {
        roles
            .iter()
            .find(|r| r.name_any() == name)
            .and_then(|r| r.rules.clone())
            .unwrap_or_else(|| panic!("no ClusterRole {name}"))
    };
    reads_or_composes_clusters(rules_of("capwasm-manager"));
    // The aggregated one gives upstream's manager what it does to the
    // provider objects.
    let aggregated = roles
        .iter()
        .find(|r| {
            r.labels()
                .get("cluster.x-k8s.io/aggregate-to-manager")
                .is_some_and(|v| v == "true")
        })
        .expect("a ClusterRole aggregated into upstream's manager role");
    for (group, resource) in [
        ("bootstrap.cluster.x-k8s.io", "wasmbootstrapconfigs"),
        ("infrastructure.cluster.x-k8s.io", "wasmmachinepools"),
        ("infrastructure.cluster.x-k8s.io", "wasmmachines"),
        ("infrastructure.cluster.x-k8s.io", "wasmclusters"),
        ("controlplane.cluster.x-k8s.io", "wasmcontrolplanes"),
    ] {
        let granted: BTreeSet<&str> = aggregated
            .rules
            .iter()
            .flatten()
            .filter(|r| {
                r.api_groups.iter().flatten().any(|g| g == group)
                    && r.resources.iter().flatten().any(|r| r == resource)
            })
            .flat_map(|r| r.verbs.iter().map(String::as_str))
            .collect();
        for verb in ["get", "list", "watch", "patch", "update", "delete"] {
            assert!(granted.contains(verb), "{resource}: {verb} not aggregated");
        }
    }

    let env = TestEnv::shared().await.unwrap();
    let client = env.management().client().unwrap();
    applies_with_dry_run(&client, &provider_mode).await;
}

/// The sharded install is the standalone one with a StatefulSet instead of
/// the Deployment: the args pod `<i>` gets parse as shard `<i>` of as many
/// as it has replicas, on a Lease the Role lets it use; all of it applies.
/// Nothing runs here (no kubelet): shards reconciling their own Clusters
/// and only those are tests/sharding.rs.
#[tokio::test]
async fn the_sharded_install_gives_pod_i_the_args_and_lease_of_shard_i_and_applies_with_server_side_dry_run()
 {
    let sharded = rendered(SHARDED);
    assert!(
        !sharded.iter().any(|m| m.kind() == "Deployment"),
        "the sharded install keeps the Deployment"
    );
    let manifest = sharded
        .iter()
        .find(|m| m.kind() == "StatefulSet")
        .expect("a StatefulSet");
    let set: StatefulSet =
        serde_json::from_value(serde_json::to_value(&manifest.object).unwrap()).unwrap();
    let spec = set.spec.expect("a StatefulSet spec");
    let replicas = u32::try_from(spec.replicas.unwrap_or(1)).unwrap();
    let pod = spec.template.spec.expect("a pod spec");
    let container = &pod.containers[0];
    let index_from = container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "SHARD_INDEX")
        .and_then(|e| e.value_from.as_ref()?.field_ref.as_ref())
        .map(|f| f.field_path.as_str());
    assert_eq!(
        index_from,
        Some("metadata.labels['apps.kubernetes.io/pod-index']")
    );
    let role: k8s_openapi::api::rbac::v1::Role = sharded
        .iter()
        .find(|m| m.kind() == "Role" && m.object.name_any() == "capwasm-leader-election")
        .map(|m| serde_json::from_value(serde_json::to_value(&m.object).unwrap()).unwrap())
        .expect("the leader election Role");
    let leases: BTreeSet<String> = role
        .rules
        .iter()
        .flatten()
        .filter(|r| r.verbs.iter().any(|v| v == "patch"))
        .flat_map(|r| r.resource_names.clone().unwrap_or_default())
        .collect();
    for index in 0..replicas {
        // As the kubelet passes them to pod <index>.
        let args: Vec<String> = kubelet_args(container)
            .into_iter()
            .map(|a| a.replace("value-of-SHARD_INDEX", &index.to_string()))
            .collect();
        let cli = capwasm::cli::Cli::try_parse_from(
            std::iter::once("capwasm".into()).chain(args.clone()),
        )
        .unwrap_or_else(|e| panic!("capwasm refuses pod {index}'s args {args:?}:\n{e}"));
        let shard = cli
            .shard()
            .expect("a run command")
            .unwrap_or_else(|e| panic!("pod {index}: {e}"));
        assert_eq!((shard.index(), shard.count()), (index, replicas));
        let lease = leader::lease_name(shard);
        assert!(
            leases.contains(&lease),
            "the Role does not let pod {index} use Lease {lease}: {leases:?}"
        );
    }

    let env = TestEnv::shared().await.unwrap();
    let client = env.management().client().unwrap();
    let without_crds: Vec<Manifest> = sharded
        .into_iter()
        .filter(|m| m.kind() != "CustomResourceDefinition")
        .collect();
    applies_with_dry_run(&client, &without_crds).await;
}

/// The container's args as the kubelet passes them: each `$(VAR)` replaced
/// by the value of the container's variable (here `value-of-VAR`).
fn kubelet_args(container: &Container) -> Vec<String> {
    let defined: BTreeSet<&str> = container
        .env
        .iter()
        .flatten()
        .map(|e| e.name.as_str())
        .collect();
    container
        .args
        .iter()
        .flatten()
        .map(|arg| {
            let mut expanded = arg.clone();
            while let Some(start) = expanded.find("$(") {
                let end = start
                    + expanded[start..]
                        .find(')')
                        .unwrap_or_else(|| panic!("unclosed $( in {arg:?}"));
                let name = expanded[start + 2..end].to_owned();
                assert!(
                    defined.contains(name.as_str()),
                    "{arg:?} uses ${name} but the container defines no such variable"
                );
                expanded.replace_range(start..=end, &format!("value-of-{name}"));
            }
            expanded
        })
        .collect()
}

#[test]
fn deployment_args_are_accepted_by_capwasm_run() {
    let deployment = the_deployment();
    let spec = deployment
        .spec
        .and_then(|s| s.template.spec)
        .expect("a pod spec");
    let container = spec
        .containers
        .iter()
        .find(|c| {
            c.args
                .as_ref()
                .is_some_and(|a| a.first().map(String::as_str) == Some("run"))
        })
        .expect("a container running `capwasm run`");
    let env = container.env.clone().unwrap_or_default();
    let args = kubelet_args(container);
    if let Err(e) =
        capwasm::cli::Cli::try_parse_from(std::iter::once("capwasm".into()).chain(args.clone()))
    {
        panic!("capwasm refuses the Deployment's args {args:?}:\n{e}");
    }

    let flag = |name: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("--{name}=")))
            .unwrap_or_else(|| panic!("the Deployment passes no --{name}=…"))
            .to_owned()
    };
    // --instance is the pod's name.
    assert_eq!(flag("instance"), "value-of-POD_NAME");
    let pod_name = env
        .iter()
        .find(|e| e.name == "POD_NAME")
        .and_then(|e| e.value_from.as_ref()?.field_ref.as_ref())
        .map(|f| f.field_path.as_str());
    assert_eq!(pod_name, Some("metadata.name"));

    // /metrics, /healthz and /readyz are served where the port, the probes
    // and the Service point.
    let address: std::net::SocketAddr = flag("metrics-bind-address").parse().unwrap();
    assert!(
        address.ip().is_unspecified(),
        "metrics must be reachable from outside the pod"
    );
    let port = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("metrics"))
        .expect("a port named metrics");
    assert_eq!(port.container_port, i32::from(address.port()));
    for (probe, path) in [
        (&container.liveness_probe, "/healthz"),
        (&container.readiness_probe, "/readyz"),
    ] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .unwrap_or_else(|| panic!("no HTTP probe of {path}"));
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(get.port, IntOrString::String("metrics".into()));
    }

    // The cache is writable although the root filesystem is not: it is
    // under an emptyDir mount.
    assert_eq!(
        container
            .security_context
            .as_ref()
            .and_then(|s| s.read_only_root_filesystem),
        Some(true)
    );
    let cache = PathBuf::from(flag("cache-dir"));
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| cache.starts_with(&m.mount_path))
        .unwrap_or_else(|| panic!("--cache-dir {} is on no volume", cache.display()));
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .expect("the mounted volume");
    assert!(
        volume.empty_dir.is_some(),
        "the cache volume is an emptyDir"
    );
}

/// The port `capwasm run` listens on for `--<flag>=ADDR` among `args`.
fn listening_port(args: &[String], flag: &str) -> i32 {
    let address: std::net::SocketAddr = args
        .iter()
        .find_map(|a| a.strip_prefix(&format!("--{flag}=")))
        .unwrap_or_else(|| panic!("no --{flag}=…"))
        .parse()
        .unwrap();
    i32::from(address.port())
}

/// The pod template of the install's Deployment, or of its StatefulSet.
fn pod_template(manifests: &[Manifest]) -> PodTemplateSpec {
    let manifest = manifests
        .iter()
        .find(|m| m.kind() == "Deployment" || m.kind() == "StatefulSet")
        .expect("a Deployment or StatefulSet");
    let spec = serde_json::to_value(&manifest.object).unwrap()["spec"]["template"].clone();
    serde_json::from_value(spec).expect("a pod template")
}

/// Each install's NetworkPolicy selects the operator's pods and lets in
/// connections from anywhere (the API server calls from addresses no
/// selector names) on exactly two ports: the webhook's, where
/// `--webhook-bind-address` listens and the webhook Service points, and the
/// metrics port, where `/metrics`, the probes and the metrics Service go.
#[test]
fn the_network_policy_admits_the_webhook_and_metrics_ports_of_the_operator_pods() {
    for variant in [STANDALONE, PROVIDER_MODE, SHARDED] {
        let manifests = rendered(variant);
        let manifest = manifests
            .iter()
            .find(|m| m.kind() == "NetworkPolicy")
            .unwrap_or_else(|| panic!("deploy/{variant} has no NetworkPolicy"));
        let policy: NetworkPolicy =
            serde_json::from_value(serde_json::to_value(&manifest.object).unwrap()).unwrap();
        let spec = policy.spec.expect("a NetworkPolicy spec");
        let template = pod_template(&manifests);
        let labels = template.metadata.and_then(|m| m.labels).unwrap_or_default();
        let selector = spec.pod_selector.unwrap_or_default();
        assert!(
            selector.match_expressions.is_none(),
            "{variant}: {selector:?}"
        );
        let wanted = selector.match_labels.unwrap_or_default();
        assert!(
            !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v)),
            "deploy/{variant}: the NetworkPolicy selects {wanted:?}, the pods are {labels:?}"
        );
        assert_eq!(spec.policy_types, Some(vec!["Ingress".to_owned()]));

        let container = template
            .spec
            .expect("a pod spec")
            .containers
            .into_iter()
            .find(|c| {
                c.args
                    .as_ref()
                    .is_some_and(|a| a.first().is_some_and(|a| a == "run"))
            })
            .expect("a container running `capwasm run`");
        // A port by number, or by the name of one of the container's ports.
        let resolve = |port: &IntOrString| match port {
            IntOrString::Int(number) => *number,
            IntOrString::String(name) => {
                container
                    .ports
                    .iter()
                    .flatten()
                    .find(|p| p.name.as_deref() == Some(name.as_str()))
                    .unwrap_or_else(|| panic!("deploy/{variant}: the container has no port {name}"))
                    .container_port
            }
        };
        let mut admitted = BTreeSet::new();
        for rule in spec.ingress.iter().flatten() {
            assert!(
                rule.from.as_ref().is_none_or(Vec::is_empty),
                "deploy/{variant}: {rule:?} admits only some sources"
            );
            for port in rule.ports.iter().flatten() {
                assert_eq!(port.protocol.as_deref(), Some("TCP"));
                admitted.insert(resolve(port.port.as_ref().expect("a port")));
            }
        }
        let args = kubelet_args(&container);
        let listening = BTreeSet::from([
            listening_port(&args, "webhook-bind-address"),
            listening_port(&args, "metrics-bind-address"),
        ]);
        assert_eq!(admitted, listening, "deploy/{variant}");
        for manifest in manifests.iter().filter(|m| m.kind() == "Service") {
            let service: Service =
                serde_json::from_value(serde_json::to_value(&manifest.object).unwrap()).unwrap();
            for port in service.spec.and_then(|s| s.ports).unwrap_or_default() {
                let target = resolve(port.target_port.as_ref().expect("a targetPort"));
                assert!(
                    admitted.contains(&target),
                    "deploy/{variant}: {} sends to port {target}, which the NetworkPolicy refuses",
                    manifest.describe()
                );
            }
        }
    }
}

/// The RBAC objects of `deploy/`, applied for real.
async fn install_rbac(client: &Client) -> (String, String) {
    let objects: Vec<DynamicObject> = manifests().into_iter().map(|m| m.object).collect();
    testenv::kustomize::apply_rbac(client, &objects, FIELD_MANAGER)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot apply deploy/'s RBAC: {}",
                capwasm::report::error_chain(&e)
            )
        })
        .expect("deploy/ has a ServiceAccount")
}

/// The admin configuration, impersonating the ServiceAccount as a pod
/// running as it authenticates.
fn impersonating(admin: &kube::Config, namespace: &str, name: &str) -> kube::Config {
    let mut config = admin.clone();
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{namespace}:{name}"));
    config.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{namespace}"),
        "system:authenticated".into(),
    ]);
    config
}

/// Waits until the API server's authorizer lets the ServiceAccount make
/// each of `requests`: its bindings reach the authorizer a moment after they
/// are written. Asks again, round trip after round trip, until it does.
async fn wait_for_rbac(client: &Client, requests: &[ResourceAttributes]) {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    for attributes in requests {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(attributes.clone()),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let allowed = tokio::time::timeout(RBAC_PROPAGATION, async {
            loop {
                let answer = reviews
                    .create(&PostParams::default(), &review)
                    .await
                    .unwrap_or_else(|e| panic!("cannot review access: {e}"));
                if answer.status.is_some_and(|s| s.allowed) {
                    return;
                }
                tokio::task::yield_now().await;
            }
        })
        .await;
        assert!(
            allowed.is_ok(),
            "the ServiceAccount is still refused {attributes:?} after {RBAC_PROPAGATION:?}"
        );
    }
}

/// A request for the authorizer: `verb` on `resource` of `group`.
fn request(verb: &str, group: &str, resource: &str, namespace: Option<&str>) -> ResourceAttributes {
    ResourceAttributes {
        verb: Some(verb.into()),
        group: Some(group.into()),
        resource: Some(resource.into()),
        namespace: namespace.map(str::to_owned),
        ..ResourceAttributes::default()
    }
}

/// What `capwasm run` does, as the ServiceAccount: take the leader Lease,
/// reconcile (through the 3-replica flow), release the Lease.
async fn lead_and_run(
    as_operator: Client,
    namespace: String,
    config: kube::Config,
    workload: kube::Config,
    env: &'static TestEnv,
) {
    let election = Election::new(namespace, "deploy-manifests-test");
    let leadership = match tokio::time::timeout(WAIT, leader::acquire(as_operator, &election)).await
    {
        Ok(Ok(leadership)) => leadership,
        Ok(Err(e)) => panic!(
            "cannot take the leader Lease: {}",
            capwasm::report::error_chain(&e)
        ),
        Err(elapsed) => panic!("not the leader: {elapsed} ({WAIT:?})"),
    };
    let stack = Stack::start(config, workload).await.unwrap();
    provision_and_delete(&stack, env).await;
    drop(stack);
    leadership.release().await;
}

/// The 3-replica flow, from the ProviderModules to the Cluster's deletion.
async fn provision_and_delete(stack: &Stack, env: &'static TestEnv) {
    let admin = env.management().client().unwrap();
    let workload = env.workload().unwrap();
    let ns = env.management().create_namespace("deploy").await.unwrap();
    let apis = Apis::new(&admin, &ns);
    let modules = stack.objects.modules(&admin, &ns).await.unwrap();

    stack
        .objects
        .create_cluster(&admin, workload, &ns, "c1", &modules)
        .await
        .unwrap();
    stack
        .objects
        .create_pool(&admin, &ns, "p1", "c1", 3, &modules)
        .await
        .unwrap();
    let pool = wait_for_pool(&apis.pools, "p1", "Running", 3).await;
    assert_eq!(pool.spec.provider_id_list.len(), 3);
    wait_for_cluster(&apis.clusters, "c1", "Provisioned").await;
    // Events are published as the ServiceAccount too.
    wait_for_event(&admin, &ns, "c1", "PhaseChanged").await;

    apis.clusters
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&apis.clusters, "c1", "the Cluster is gone", |c| c.is_none()).await;
    for (kind, left) in [
        (
            "MachinePool",
            apis.pools
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len(),
        ),
        (
            "WasmMachinePool",
            apis.infra_pools
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len(),
        ),
        (
            "WasmBootstrapConfig",
            apis.configs
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len(),
        ),
        (
            "WasmCluster",
            apis.infra_clusters
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len(),
        ),
    ] {
        assert_eq!(left, 0, "{left} {kind}s left after the Cluster was deleted");
    }
}

/// The panic message of a failed task.
fn panic_message(error: tokio::task::JoinError) -> String {
    match error.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic".into()),
        Err(error) => error.to_string(),
    }
}

#[tokio::test]
async fn operator_with_the_cluster_role_runs_a_pool_and_deletes_its_cluster() {
    let warnings = Warnings::install();
    let env = TestEnv::shared().await.unwrap();
    let admin = env.management().client().unwrap();
    let (sa_namespace, sa_name) = install_rbac(&admin).await;
    let config = impersonating(env.management().config(), &sa_namespace, &sa_name);

    // The impersonation is in force: the ServiceAccount is no admin.
    let as_operator = Client::try_from(config.clone()).unwrap();
    match Api::<k8s_openapi::api::core::v1::Pod>::all(as_operator.clone())
        .list(&ListParams::default().limit(1))
        .await
    {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("the impersonated client may list Pods: {other:?}"),
    }
    // Both bindings are in force.
    wait_for_rbac(
        &as_operator,
        &[
            request("watch", "cluster.x-k8s.io", "machinepools", None),
            // The webhook (not run in-process here): its certificate
            // Secret, the CRDs and the admission configuration it points
            // at itself.
            request("create", "", "secrets", Some(&sa_namespace)),
            ResourceAttributes {
                name: Some("machinepools.cluster.x-k8s.io".into()),
                ..request(
                    "patch",
                    "apiextensions.k8s.io",
                    "customresourcedefinitions",
                    None,
                )
            },
            // It reads a CRD before patching it (a restart writes nothing).
            ResourceAttributes {
                name: Some("clusters.cluster.x-k8s.io".into()),
                ..request(
                    "get",
                    "apiextensions.k8s.io",
                    "customresourcedefinitions",
                    None,
                )
            },
            request(
                "create",
                "coordination.k8s.io",
                "leases",
                Some(&sa_namespace),
            ),
            // The PlatformCluster admission webhook's configuration.
            ResourceAttributes {
                name: Some(capwasm::webhook::ADMISSION_CONFIGURATION.into()),
                ..request(
                    "patch",
                    "admissionregistration.k8s.io",
                    "validatingwebhookconfigurations",
                    None,
                )
            },
        ],
    )
    .await;

    // From here on, any forbidden request is one the operator made.
    let mark = warnings.len();
    let workload = env.workload().unwrap().config().clone();
    let flow = tokio::spawn(lead_and_run(
        as_operator,
        sa_namespace,
        config,
        workload,
        env,
    ));
    let abort = flow.abort_handle();
    tokio::select! {
        result = flow => {
            if let Err(error) = result {
                panic!(
                    "{}\n\nthe operator's warnings:\n{}",
                    panic_message(error),
                    warnings.since(mark).join("\n")
                );
            }
        }
        forbidden = warnings.first_forbidden_since(mark) => {
            abort.abort();
            panic!(
                "the operator was refused a request; a Role in deploy/ lacks a rule:\n{}",
                forbidden.join("\n")
            );
        }
    }
    let forbidden = warnings.forbidden_since(mark);
    assert!(
        forbidden.is_empty(),
        "the operator was refused requests:\n{}",
        forbidden.join("\n")
    );
}

/// Without the permissions, the caches' watches fail: they are retried,
/// and each failure is counted by resource (`capwasm_watch_errors`) and
/// logged, so a missing rule shows in the metrics rather than only in a log
/// line.
#[tokio::test]
async fn an_operator_without_permissions_counts_its_failed_watches() {
    let env = TestEnv::shared().await.unwrap();
    // A ServiceAccount nothing is bound to.
    let config = impersonating(env.management().config(), "nowhere", "nobody");
    let workload = env.workload().unwrap().config().clone();
    let stack = Stack::start(config, workload).await.unwrap();
    let metrics = &stack.context.metrics;
    let resources = [
        "machinepools",
        "machines",
        "clusters",
        "providermodules",
        "wasmbootstrapconfigs",
        "wasmmachinepools",
        "wasmmachines",
        "wasmclusters",
        "wasmcontrolplanes",
        "secrets",
        "configmaps",
        "customresourcedefinitions",
    ];
    let deadline = tokio::time::Instant::now() + WAIT;
    while resources.iter().any(|r| metrics.watch_errors(r) == 0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "watch errors by resource after {WAIT:?}: {:?}",
            resources.map(|r| (r, metrics.watch_errors(r)))
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// `/readyz` says 503 while the leader's caches cannot fill — here its
/// ServiceAccount may not list Clusters, so the API server refuses the list
/// (403) every time it is tried — and 200 once the list is allowed, in the
/// same process: a replica is not sent conversion requests or counted
/// available before it can answer them.
#[tokio::test]
async fn readiness_waits_for_the_caches_while_the_api_server_refuses_their_list() {
    let env = TestEnv::start(testenv::Options::default()).await.unwrap();
    let admin = env.management().client().unwrap();
    let mut objects: Vec<DynamicObject> = manifests().into_iter().map(|m| m.object).collect();
    let full = objects.clone();
    let mut held = 0;
    for object in &mut objects {
        if object
            .types
            .as_ref()
            .is_some_and(|t| t.kind == "ClusterRole")
            && let Some(rules) = object.data.get_mut("rules").and_then(|r| r.as_array_mut())
        {
            for rule in rules.iter_mut() {
                let cluster_api = rule["apiGroups"]
                    .as_array()
                    .is_some_and(|g| g.iter().any(|g| g == "cluster.x-k8s.io"));
                if let (true, Some(resources)) = (
                    cluster_api,
                    rule.get_mut("resources").and_then(|r| r.as_array_mut()),
                ) {
                    let before = resources.len();
                    resources.retain(|r| r != "clusters");
                    held += before - resources.len();
                }
            }
            // A rule left with no resource is invalid: it goes.
            rules.retain(|rule| rule["resources"].as_array().is_none_or(|r| !r.is_empty()));
        }
    }
    assert!(
        held > 0,
        "deploy/'s ClusterRole lets the operator list Clusters"
    );
    let (sa_namespace, sa_name) = testenv::kustomize::apply_rbac(&admin, &objects, FIELD_MANAGER)
        .await
        .unwrap()
        .expect("deploy/ has a ServiceAccount");
    let operator = testenv::operator::OperatorProcess::start_as(
        env.management(),
        Some((&sa_namespace, &sa_name)),
        &sa_namespace,
        "held",
        &[],
    )
    .await;

    // The list was tried and refused, and the replica is not ready.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (_, metrics) = operator.get("/metrics").await;
        if testenv::operator::sample(
            &metrics,
            r#"capwasm_watch_errors_total{resource="clusters"}"#,
        ) > 0
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no refused Cluster list: {metrics}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, text) = operator.get("/readyz").await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("[-]caches"), "{text}");

    // Allowed: the same process becomes ready.
    let pid = operator.process_id();
    testenv::kustomize::apply_rbac(&admin, &full, FIELD_MANAGER)
        .await
        .unwrap();
    let before = operator.ready().await;
    assert!(!before.is_empty(), "it was not ready before");
    let (status, text) = operator.get("/readyz").await;
    assert_eq!(
        (status, text.contains("[+]caches ok")),
        (200, true),
        "{text}"
    );
    assert_eq!(operator.process_id(), pid);
}
