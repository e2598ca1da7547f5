//! capwasm installed like any Cluster API provider: the release artifacts
//! `make release` writes (`deploy/clusterctl/release.sh`) read by upstream's
//! own clusterctl (v1.14.2, built from its Go module) from a local
//! repository through `file://` URLs. The artifacts are the same bytes
//! twice; `generate provider` resolves both providers with their variables;
//! every `generate cluster` flavor is accepted by an API server holding
//! upstream's CRDs and webhooks; variables left unset are refused by
//! clusterctl itself; `clusterctl init` installs the core provider and
//! capwasm's two, `clusterctl upgrade plan` reads their metadata and
//! `clusterctl upgrade apply` replaces both with a newer release.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::Parser as _;
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, PatchParams};
use testenv::clusterctl::{self, CLUSTER_API_VERSION, Clusterctl, ClusterctlBuild, documents};
use testenv::image::OperatorImage;
use testenv::upstream::{UpstreamBuild, UpstreamManager};
use testenv::{Options, TestEnv};

const CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../crds");
const VERSION: &str = "0.2.0";
const INFRASTRUCTURE: &str = "infrastructure-capwasm";
const BOOTSTRAP: &str = "bootstrap-capwasm";
const PROVIDER_LABEL: &str = "cluster.x-k8s.io/provider";
const FLAVORS: [&str; 3] = ["", "aws-ec2", "machinepool-autoscaler"];

/// What each flavor asks of its user (clusterctl takes them from the
/// environment): the simulated cloud's and the kubeadm join's, EC2's.
const TEMPLATE_VARIABLES: [(&str, &str); 8] = [
    ("SIM_CLOUD_ENDPOINT", "http://sim-cloud.example:8081"),
    ("SIM_CONTROL_PLANE_HOST", "10.0.0.10"),
    (
        "KUBEADM_CA_CERT_HASH",
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ),
    ("AWS_REGION", "us-east-1"),
    ("AWS_AMI_ID", "ami-0123456789abcdef0"),
    ("AWS_AVAILABILITY_ZONE", "us-east-1a"),
    ("AWS_API_SERVER_CIDR", "203.0.113.0/24"),
    ("WORKER_MACHINE_MIN_COUNT", "2"),
];

/// A repository holding the release of `version` made with the test image.
fn release_into(output: &Path, version: &str) -> (PathBuf, OperatorImage) {
    let image = OperatorImage::build().expect("the operator's image layout (CAPWASM_IMAGE)");
    let layout = image.layout.to_string_lossy().into_owned();
    let repository = clusterctl::release(version, output, &["--image-layout", &layout])
        .expect("release.sh writes the artifacts");
    (repository, image)
}

/// Release [`VERSION`] made into a repository of its own, and clusterctl
/// reading only capwasm's two providers from it.
struct Released {
    _out: tempfile::TempDir,
    repository: PathBuf,
    image: OperatorImage,
    clusterctl: Clusterctl,
}

fn released() -> Released {
    let build = ClusterctlBuild::locate().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (repository, image) = release_into(out.path(), VERSION);
    let clusterctl = clusterctl_for(&build, &repository, VERSION, None);
    Released {
        _out: out,
        repository,
        image,
        clusterctl,
    }
}

/// clusterctl configured with capwasm's two providers of `repository` at
/// `version`, and the core provider when `core` is given.
fn clusterctl_for(
    build: &ClusterctlBuild,
    repository: &Path,
    version: &str,
    core: Option<&Path>,
) -> Clusterctl {
    let url = |provider: &str, file: &str| {
        format!(
            "file://{}/{provider}/v{version}/{file}",
            repository.display()
        )
    };
    let mut providers = vec![
        (
            "capwasm",
            "InfrastructureProvider",
            url(INFRASTRUCTURE, "infrastructure-components.yaml"),
        ),
        (
            "capwasm",
            "BootstrapProvider",
            url(BOOTSTRAP, "bootstrap-components.yaml"),
        ),
    ];
    if let Some(core) = core {
        providers.push((
            "cluster-api",
            "CoreProvider",
            format!(
                "file://{}/cluster-api/{CLUSTER_API_VERSION}/core-components.yaml",
                core.display()
            ),
        ));
    }
    Clusterctl::new(build, &providers).expect("clusterctl's configuration")
}

fn kind(object: &DynamicObject) -> &str {
    object.types.as_ref().map_or("", |t| t.kind.as_str())
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every file under `dir`, by path relative to it, with its bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).expect("a readable directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("a readable file");
                let relative = path.strip_prefix(dir).expect("under dir").to_path_buf();
                files.insert(relative, bytes);
            }
        }
    }
    files
}

/// The names of the CRDs among `objects`.
fn crd_names(objects: &[DynamicObject]) -> BTreeSet<String> {
    objects
        .iter()
        .filter(|o| kind(o) == "CustomResourceDefinition")
        .map(ResourceExt::name_any)
        .collect()
}

// === the artifacts ===

#[test]
fn release_is_the_same_bytes_twice_and_splits_the_install_in_two() {
    let out = tempfile::tempdir().unwrap();
    let (first, image) = release_into(&out.path().join("a"), VERSION);
    let (second, _) = release_into(&out.path().join("b"), VERSION);
    let (a, b) = (tree(&first), tree(&second));
    let names: Vec<String> = a.keys().map(|p| p.display().to_string()).collect();
    assert_eq!(
        names,
        [
            "bootstrap-capwasm/v0.2.0/bootstrap-components.yaml",
            "bootstrap-capwasm/v0.2.0/metadata.yaml",
            "capwasm/v0.2.0/SHA256SUMS",
            "capwasm/v0.2.0/bootstrap-components.yaml",
            "capwasm/v0.2.0/capwasm-linux-amd64",
            "capwasm/v0.2.0/cluster-template-aws-ec2.yaml",
            "capwasm/v0.2.0/cluster-template-machinepool-autoscaler.yaml",
            "capwasm/v0.2.0/cluster-template.yaml",
            "capwasm/v0.2.0/infrastructure-components.yaml",
            "capwasm/v0.2.0/metadata.yaml",
            "infrastructure-capwasm/v0.2.0/cluster-template-aws-ec2.yaml",
            "infrastructure-capwasm/v0.2.0/cluster-template-machinepool-autoscaler.yaml",
            "infrastructure-capwasm/v0.2.0/cluster-template.yaml",
            "infrastructure-capwasm/v0.2.0/infrastructure-components.yaml",
            "infrastructure-capwasm/v0.2.0/metadata.yaml",
        ]
    );
    for (path, bytes) in &a {
        assert!(
            b.get(path) == Some(bytes),
            "{} differs between two releases of the same sources",
            path.display()
        );
    }

    check_split(&first, &image);
}

/// The two components of the release in `repository`: each object labelled
/// as its provider's, one Namespace each, the bootstrap provider only its
/// CRD, every CRD in one of them, one operator by the image's digest.
fn check_split(repository: &Path, image: &OperatorImage) {
    let version_dir = |provider: &str| repository.join(provider).join(format!("v{VERSION}"));
    let infra = documents(&read(
        &version_dir(INFRASTRUCTURE).join("infrastructure-components.yaml"),
    ))
    .unwrap();
    let bootstrap = documents(&read(
        &version_dir(BOOTSTRAP).join("bootstrap-components.yaml"),
    ))
    .unwrap();
    for (objects, provider) in [(&infra, INFRASTRUCTURE), (&bootstrap, BOOTSTRAP)] {
        for object in objects {
            assert_eq!(
                object.labels().get(PROVIDER_LABEL).map(String::as_str),
                Some(provider),
                "{} {} lacks the provider label",
                kind(object),
                object.name_any()
            );
        }
        // One Namespace each: clusterctl's default target namespace, the same
        // for both, so that they are one install.
        let namespaces: Vec<String> = objects
            .iter()
            .filter(|o| kind(o) == "Namespace")
            .map(ResourceExt::name_any)
            .collect();
        assert_eq!(namespaces, ["capwasm-system"], "{provider}");
    }

    // The bootstrap provider is its CRD; the operator serving it is the
    // infrastructure provider's Deployment.
    let bootstrap_kinds: Vec<(String, String)> = bootstrap
        .iter()
        .map(|o| (kind(o).to_owned(), o.name_any()))
        .collect();
    assert_eq!(
        bootstrap_kinds,
        [
            ("Namespace".to_owned(), "capwasm-system".to_owned()),
            (
                "CustomResourceDefinition".to_owned(),
                "wasmbootstrapconfigs.bootstrap.cluster.x-k8s.io".to_owned()
            ),
        ]
    );
    // Every CRD of crds/ but those upstream's core serves, in exactly one
    // of the two files.
    let ours: BTreeSet<String> = testenv::kustomize::objects(Path::new(CRDS))
        .unwrap()
        .iter()
        .filter(|o| kind(o) == "CustomResourceDefinition")
        .map(ResourceExt::name_any)
        .filter(|name| name.split_once('.').map(|(_, group)| group) != Some("cluster.x-k8s.io"))
        .collect();
    let (infra_crds, bootstrap_crds) = (crd_names(&infra), crd_names(&bootstrap));
    assert!(
        infra_crds.is_disjoint(&bootstrap_crds),
        "a CRD in both files: {:?}",
        infra_crds.intersection(&bootstrap_crds).collect::<Vec<_>>()
    );
    let shipped: BTreeSet<String> = infra_crds.union(&bootstrap_crds).cloned().collect();
    assert_eq!(
        shipped, ours,
        "the CRDs shipped against crds/ (less Cluster and MachinePool)"
    );
    check_operator(&infra, image);
}

fn check_operator(infra: &[DynamicObject], image: &OperatorImage) {
    let deployments: Vec<&DynamicObject> =
        infra.iter().filter(|o| kind(o) == "Deployment").collect();
    assert_eq!(deployments.len(), 1, "one operator");
    let deployment: Deployment =
        serde_json::from_value(serde_json::to_value(deployments[0]).unwrap()).unwrap();
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    assert_eq!(
        container.name, "manager",
        "clusterctl's name for the controller"
    );
    assert_eq!(
        container.image.as_deref(),
        Some(format!("{}@{}", testenv::image::REPOSITORY, image.digest).as_str()),
        "the image by the layout's digest"
    );
    assert!(
        container
            .args
            .iter()
            .flatten()
            .any(|a| a == "--controllers=providers"),
        "provider mode: upstream's core runs Cluster and MachinePool"
    );
    // The default of CAPWASM_CREDENTIALS_NAMESPACE, which the kubelet expands.
    let pod_namespace = container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "POD_NAMESPACE")
        .and_then(|e| e.value_from.as_ref())
        .and_then(|from| from.field_ref.as_ref())
        .map(|field| field.field_path.as_str());
    assert_eq!(pod_namespace, Some("metadata.namespace"));
}

#[test]
fn release_refuses_what_it_cannot_release_and_writes_nothing() {
    let out = tempfile::tempdir().unwrap();
    let Err(error) = clusterctl::release(
        "0.9.0",
        out.path(),
        &["--image", "ghcr.io/capwasm/capwasm:0.9.0"],
    ) else {
        panic!("release.sh wrote a release metadata.yaml has no series for");
    };
    let message = error.to_string();
    assert!(
        message.contains("no release series 0.9 in deploy/clusterctl/metadata.yaml"),
        "{message}"
    );
    let Err(error) = clusterctl::release("0.2", out.path(), &[]) else {
        panic!("release.sh wrote a release of a version clusterctl cannot parse");
    };
    assert!(error.to_string().contains("is not x.y.z"), "{error}");
    for (args, refusal) in [
        (
            &["--push", "registry.example/capwasm/capwasm"][..],
            "--push needs the layout to push",
        ),
        (
            &["--image-layout", ".", "--push", "x"][..],
            "is not an image layout",
        ),
        (
            &["--key", "/nonexistent/cosign.key"][..],
            "--key needs a cosign private key file",
        ),
    ] {
        let Err(error) = clusterctl::release("0.2.0", out.path(), args) else {
            panic!("release.sh took {args:?}");
        };
        assert!(error.to_string().contains(refusal), "{args:?}: {error}");
    }
    let layout = OperatorImage::build().expect("the test image").layout;
    let layout = layout.to_string_lossy();
    for tagged in [
        "registry.example/capwasm/capwasm:0.2.0",
        "registry.example/capwasm/capwasm@sha256:00",
    ] {
        let Err(error) = clusterctl::release(
            "0.2.0",
            out.path(),
            &["--image-layout", &layout, "--push", tagged],
        ) else {
            panic!("release.sh pushed to {tagged}");
        };
        assert!(
            error.to_string().contains("--push takes a repository"),
            "{error}"
        );
    }
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "a refused release left files behind"
    );
}

// === clusterctl generate ===

#[test]
fn generate_provider_describes_both_providers_and_substitutes_their_variables() {
    let Released {
        clusterctl,
        image,
        _out,
        ..
    } = released();
    check_describe(&clusterctl, &image);
    check_substitution(&clusterctl);
}

/// `generate provider --describe` of both: version, namespace, variables,
/// the image.
fn check_describe(clusterctl: &Clusterctl, image: &OperatorImage) {
    let described = clusterctl
        .ok(
            &[
                "generate",
                "provider",
                "--infrastructure",
                &format!("capwasm:v{VERSION}"),
                "--describe",
            ],
            &[],
        )
        .unwrap();
    let field = |text: &str, name: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
            .trim()
            .to_owned()
    };
    assert_eq!(field(&described, "Type"), "InfrastructureProvider");
    assert_eq!(field(&described, "Version"), format!("v{VERSION}"));
    assert_eq!(field(&described, "TargetNamespace"), "capwasm-system");
    assert!(
        described
            .contains("Variables:\n  - CAPWASM_CONCURRENCY\n  - CAPWASM_CREDENTIALS_NAMESPACE\n"),
        "{described}"
    );
    assert!(
        described.contains(&format!(
            "Images:\n  - {}@{}",
            testenv::image::REPOSITORY,
            image.digest
        )),
        "{described}"
    );
    let described = clusterctl
        .ok(
            &[
                "generate",
                "provider",
                "--bootstrap",
                "capwasm",
                "--describe",
            ],
            &[],
        )
        .unwrap();
    assert_eq!(field(&described, "Type"), "BootstrapProvider");
    assert_eq!(field(&described, "Version"), format!("v{VERSION}"));
    assert_eq!(field(&described, "TargetNamespace"), "capwasm-system");
}

/// `generate provider --infrastructure`: the defaults, then each variable
/// set, then another namespace.
fn check_substitution(clusterctl: &Clusterctl) {
    let operator = |env: &[(&str, &str)], extra: &[&str]| {
        let mut args = vec!["generate", "provider", "--infrastructure", "capwasm"];
        args.extend_from_slice(extra);
        let text = clusterctl.ok(&args, env).unwrap();
        assert!(!text.contains("${"), "a variable left in\n{text}");
        let objects = documents(&text).unwrap();
        for object in &objects {
            let labels = object.labels();
            assert_eq!(
                labels.get(PROVIDER_LABEL).map(String::as_str),
                Some(INFRASTRUCTURE)
            );
            assert!(labels.contains_key("clusterctl.cluster.x-k8s.io"));
        }
        objects
    };
    let args_of = |objects: &[DynamicObject]| -> Vec<String> {
        let deployment = objects
            .iter()
            .find(|o| kind(o) == "Deployment")
            .expect("the operator's Deployment");
        let deployment: Deployment =
            serde_json::from_value(serde_json::to_value(deployment).unwrap()).unwrap();
        let container = deployment.spec.unwrap().template.spec.unwrap().containers[0].clone();
        let args = container.args.unwrap_or_default();
        // What the kubelet runs, $(POD_NAMESPACE) expanded: capwasm takes it.
        let expanded: Vec<String> = args
            .iter()
            .map(|a| {
                a.replace("$(POD_NAMESPACE)", "capwasm-system")
                    .replace("$(POD_NAME)", "pod-0")
            })
            .collect();
        if let Err(e) = capwasm::cli::Cli::try_parse_from(
            std::iter::once("capwasm".to_owned()).chain(expanded.clone()),
        ) {
            panic!("capwasm refuses the Deployment's args {expanded:?}:\n{e}");
        }
        args
    };
    let defaults = args_of(&operator(&[], &[]));
    assert!(
        defaults.contains(&"--concurrency=16".to_owned()),
        "{defaults:?}"
    );
    assert!(
        defaults.contains(&"--credentials-namespace=$(POD_NAMESPACE)".to_owned()),
        "{defaults:?}"
    );
    let set = args_of(&operator(
        &[
            ("CAPWASM_CONCURRENCY", "4"),
            ("CAPWASM_CREDENTIALS_NAMESPACE", "provider-credentials"),
        ],
        &[],
    ));
    assert!(set.contains(&"--concurrency=4".to_owned()), "{set:?}");
    assert!(
        set.contains(&"--credentials-namespace=provider-credentials".to_owned()),
        "{set:?}"
    );
    let moved = operator(&[], &["--target-namespace", "platform-capwasm"]);
    let mut subjects = 0;
    for object in &moved {
        match kind(object) {
            "Namespace" => assert_eq!(object.name_any(), "platform-capwasm"),
            "CustomResourceDefinition" | "ClusterRole" | "ClusterRoleBinding" => {
                assert_eq!(object.namespace(), None);
            }
            other => assert_eq!(
                object.namespace().as_deref(),
                Some("platform-capwasm"),
                "{other} {}",
                object.name_any()
            ),
        }
        for subject in object
            .data
            .get("subjects")
            .and_then(|s| s.as_array())
            .into_iter()
            .flatten()
        {
            subjects += 1;
            assert_eq!(
                subject["namespace"],
                "platform-capwasm",
                "{}",
                object.name_any()
            );
        }
    }
    // The ServiceAccount in the leader-election RoleBinding and the
    // ClusterRoleBinding.
    assert_eq!(subjects, 2);
}

#[test]
fn unset_variables_are_refused_by_clusterctl() {
    let Released {
        repository,
        clusterctl,
        _out,
        ..
    } = released();

    // A template's variable without a default, unset.
    let refused = clusterctl
        .run(
            &[
                "generate",
                "cluster",
                "demo",
                "--infrastructure",
                &format!("capwasm:v{VERSION}"),
                "--target-namespace",
                "team-a",
                "--kubernetes-version",
                "v1.36.3",
            ],
            &[
                ("SIM_CLOUD_ENDPOINT", "http://sim-cloud.example:8081"),
                ("KUBEADM_CA_CERT_HASH", TEMPLATE_VARIABLES[2].1),
            ],
        )
        .unwrap();
    assert!(
        !refused.status.success(),
        "clusterctl generated a cluster without SIM_CONTROL_PLANE_HOST"
    );
    assert!(
        refused.stdout.is_empty(),
        "a refused cluster printed manifests"
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("value for variables [SIM_CONTROL_PLANE_HOST] is not set"),
        "{stderr}"
    );

    // The components with a default taken out: clusterctl refuses to
    // install or print them until the variable is set.
    let components = repository
        .join(INFRASTRUCTURE)
        .join(format!("v{VERSION}"))
        .join("infrastructure-components.yaml");
    let text = read(&components);
    assert!(text.contains("${CAPWASM_CONCURRENCY:=16}"));
    std::fs::write(
        &components,
        text.replace("${CAPWASM_CONCURRENCY:=16}", "${CAPWASM_CONCURRENCY}"),
    )
    .unwrap();
    let refused = clusterctl
        .run(
            &["generate", "provider", "--infrastructure", "capwasm"],
            &[],
        )
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("value for variables [CAPWASM_CONCURRENCY] is not set"),
        "{stderr}"
    );
    let accepted = clusterctl
        .ok(
            &["generate", "provider", "--infrastructure", "capwasm"],
            &[("CAPWASM_CONCURRENCY", "8")],
        )
        .unwrap();
    assert!(accepted.contains("--concurrency=8"));
}

/// A management cluster's API server with `crds`, and its client.
async fn management(crds: PathBuf) -> (TestEnv, kube::Client) {
    let env = TestEnv::start(Options {
        workload: false,
        crds: vec![crds],
        ..Options::default()
    })
    .await
    .unwrap();
    let client = env.management().client().unwrap();
    (env, client)
}

/// The API server of a management cluster beside upstream's core: its
/// CRDs, its manager's admission webhooks, and capwasm's providers as
/// clusterctl renders them.
async fn management_with_upstream(
    clusterctl: &Clusterctl,
) -> (TestEnv, UpstreamManager, kube::Client) {
    let upstream = UpstreamBuild::locate().unwrap();
    let (env, client) = management(upstream.crds.clone()).await;
    for provider in ["--bootstrap", "--infrastructure"] {
        let text = clusterctl
            .ok(&["generate", "provider", provider, "capwasm"], &[])
            .unwrap();
        let file = clusterctl.file(&format!("{}.yaml", provider.trim_start_matches('-')));
        std::fs::write(&file, &text).unwrap();
        testenv::install_crds(&client, &[file]).await.unwrap();
        for object in documents(&text).unwrap() {
            if kind(&object) != "CustomResourceDefinition" {
                testenv::kustomize::apply(&client, &object, &PatchParams::apply("clusterctl-test"))
                    .await
                    .unwrap_or_else(|e| panic!("{} {}: {e}", kind(&object), object.name_any()));
            }
        }
    }
    let manager = UpstreamManager::start(&upstream, env.management())
        .await
        .unwrap();
    (env, manager, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_flavor_generates_a_cluster_upstreams_api_accepts() {
    let Released {
        clusterctl, _out, ..
    } = released();
    let (env, _manager, client) = management_with_upstream(&clusterctl).await;
    let ns = env
        .management()
        .create_namespace("clusterctl")
        .await
        .unwrap();

    let listed = clusterctl
        .ok(
            &[
                "generate",
                "cluster",
                "demo",
                "--infrastructure",
                &format!("capwasm:v{VERSION}"),
                "--target-namespace",
                &ns,
                "--list-variables",
                "--flavor",
                "machinepool-autoscaler",
            ],
            &[],
        )
        .unwrap();
    assert!(
        listed.contains("WORKER_MACHINE_MAX_COUNT       (defaults to \"5\")"),
        "{listed}"
    );

    for flavor in FLAVORS {
        check_flavor(&clusterctl, &client, &ns, flavor).await;
    }
    // A dry run stores nothing.
    let pools: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "cluster.x-k8s.io",
            "v1beta2",
            "MachinePool",
        )),
    );
    assert!(
        pools
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

/// One flavor generated for `ns` and applied (dry run): the kinds of a
/// Cluster and its pool, all accepted, the pool sized as the flavor says.
async fn check_flavor(clusterctl: &Clusterctl, client: &kube::Client, ns: &str, flavor: &str) {
    let name = if flavor.is_empty() {
        "sim".to_owned()
    } else {
        flavor.replace("machinepool-", "")
    };
    let infrastructure = format!("capwasm:v{VERSION}");
    let mut args = vec![
        "generate",
        "cluster",
        &name,
        "--infrastructure",
        &infrastructure,
        "--target-namespace",
        &ns,
        "--kubernetes-version",
        "v1.36.3",
        "--worker-machine-count",
        "3",
    ];
    if !flavor.is_empty() {
        args.extend_from_slice(&["--flavor", flavor]);
    }
    let text = clusterctl.ok(&args, &TEMPLATE_VARIABLES).unwrap();
    assert!(!text.contains("${"), "{flavor}: a variable left in\n{text}");
    let objects = documents(&text).unwrap();
    let kinds: BTreeSet<&str> = objects.iter().map(kind).collect();
    assert_eq!(
        kinds,
        BTreeSet::from([
            "Cluster",
            "MachinePool",
            "WasmBootstrapConfig",
            "WasmCluster",
            "WasmMachinePool"
        ]),
        "{flavor}"
    );
    let mut pool = None;
    for object in &objects {
        assert_eq!(object.namespace().as_deref(), Some(ns));
        let accepted = testenv::kustomize::apply(
            client,
            object,
            &PatchParams::apply("clusterctl-test").dry_run(),
        )
        .await
        .unwrap_or_else(|e| {
            panic!(
                "flavor {flavor:?}: {} {} refused: {e}",
                kind(object),
                object.name_any()
            )
        });
        if kind(object) == "MachinePool" {
            pool = Some(accepted);
        }
    }
    let pool = pool.expect("a MachinePool");
    let replicas = pool.data["spec"]["replicas"].as_i64();
    if flavor == "machinepool-autoscaler" {
        let annotations = pool.annotations();
        assert_eq!(
            annotations
                .get("cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size")
                .map(String::as_str),
            Some("2")
        );
        assert_eq!(
            annotations
                .get("cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size")
                .map(String::as_str),
            Some("5")
        );
        // Upstream's webhook sizes a new pool at the autoscaler's minimum.
        assert_eq!(replicas, Some(2), "{:?}", pool.data["spec"]);
    } else {
        assert_eq!(replicas, Some(3), "{flavor}");
    }
}

// === clusterctl init and upgrade plan ===

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_installs_both_providers_and_upgrade_plans_and_applies_a_newer_release() {
    let build = ClusterctlBuild::locate().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (repository, _) = release_into(out.path(), VERSION);
    add_core_provider(&build, &repository);
    let clusterctl = clusterctl_for(&build, &repository, VERSION, Some(&repository));
    // cert-manager's CRDs: what clusterctl init checks for before it would
    // install cert-manager (nothing here signs certificates: no Pod runs).
    let (env, client) = management(build.cert_manager_crds.clone()).await;
    let kubeconfig = clusterctl.file("kubeconfig");
    std::fs::write(&kubeconfig, env.management().kubeconfig_yaml().unwrap()).unwrap();
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();

    let started = std::time::Instant::now();
    let init = clusterctl
        .run(
            &[
                "init",
                "--kubeconfig",
                &kubeconfig,
                "--core",
                "cluster-api",
                "--bootstrap",
                "capwasm",
                "--infrastructure",
                "capwasm",
                "--control-plane",
                "-",
            ],
            &[("CAPWASM_CONCURRENCY", "8")],
        )
        .unwrap();
    let stderr = String::from_utf8_lossy(&init.stderr);
    let stdout = String::from_utf8_lossy(&init.stdout);
    assert!(
        init.status.success(),
        "clusterctl init failed:\n{stdout}\n{stderr}"
    );
    eprintln!("clusterctl init: {:?}\n{stdout}{stderr}", started.elapsed());
    assert!(
        stderr.contains("Skipping installing cert-manager as it is already installed")
            || stdout.contains("Skipping installing cert-manager as it is already installed")
    );

    // The namespace clusterctl made to check cert-manager, deleted: this
    // API server has no kube-controller-manager, whose namespace controller
    // would finish that, so the test does (or the next clusterctl would take
    // the namespace left Terminating for a cert-manager it must install).
    finish_deleting_namespace(&client, "cert-manager-test").await;

    let records = check_installed(&client).await;

    // A second init of the same version leaves the install as it is.
    let again = clusterctl
        .run(
            &[
                "init",
                "--kubeconfig",
                &kubeconfig,
                "--infrastructure",
                "capwasm",
            ],
            &[],
        )
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    finish_deleting_namespace(&client, "cert-manager-test").await;
    assert_eq!(inventory_records(&client).await, records);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "capwasm-system");
    assert_eq!(
        deployments
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    // The templates of the installed version, found through the inventory.
    let generated = clusterctl
        .ok(
            &[
                "generate",
                "cluster",
                "first",
                "--kubeconfig",
                &kubeconfig,
                "--infrastructure",
                "capwasm",
                "--target-namespace",
                "team-a",
                "--kubernetes-version",
                "v1.36.3",
                "--worker-machine-count",
                "1",
            ],
            &TEMPLATE_VARIABLES,
        )
        .unwrap();
    assert_eq!(documents(&generated).unwrap().len(), 5, "{generated}");

    check_upgrade_plan(&clusterctl, &kubeconfig, &repository);

    check_upgrade_apply(&clusterctl, &client, &kubeconfig).await;
}

/// `clusterctl upgrade apply`: both of capwasm's providers replaced by
/// 0.2.1's, still one operator.
async fn check_upgrade_apply(clusterctl: &Clusterctl, client: &kube::Client, kubeconfig: &str) {
    let applied = clusterctl
        .run(
            &[
                "upgrade",
                "apply",
                "--kubeconfig",
                kubeconfig,
                "--contract",
                "v1beta2",
            ],
            &[],
        )
        .unwrap();
    eprintln!(
        "{}{}",
        String::from_utf8_lossy(&applied.stdout),
        String::from_utf8_lossy(&applied.stderr)
    );
    assert!(applied.status.success(), "clusterctl upgrade apply failed");
    let upgraded: BTreeSet<(String, String)> = inventory_records(client)
        .await
        .into_iter()
        .map(|(_, name, version)| (name, version))
        .collect();
    assert_eq!(
        upgraded,
        BTreeSet::from([
            ("cluster-api".to_owned(), CLUSTER_API_VERSION.to_owned()),
            (BOOTSTRAP.to_owned(), "v0.2.1".to_owned()),
            (INFRASTRUCTURE.to_owned(), "v0.2.1".to_owned()),
        ])
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "capwasm-system");
    let operators = deployments
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(operators.len(), 1, "one operator after the upgrade");
}

/// The core provider in `repository`, as its release makes it.
fn add_core_provider(build: &ClusterctlBuild, repository: &Path) {
    let core = repository.join("cluster-api").join(CLUSTER_API_VERSION);
    std::fs::create_dir_all(&core).unwrap();
    for file in ["core-components.yaml", "metadata.yaml"] {
        std::fs::copy(build.core_release.join(file), core.join(file)).unwrap();
    }
}

/// What `clusterctl init` left: the inventory (returned), one operator
/// serving both providers' kinds with the variable set, each CRD labelled
/// as its provider's.
async fn check_installed(client: &kube::Client) -> BTreeSet<(String, String, String)> {
    // The inventory: one record per provider, capwasm's two in its namespace.
    let records = inventory_records(client).await;
    assert_eq!(
        records,
        BTreeSet::from([
            (
                "capi-system".to_owned(),
                "cluster-api".to_owned(),
                CLUSTER_API_VERSION.to_owned()
            ),
            (
                "capwasm-system".to_owned(),
                BOOTSTRAP.to_owned(),
                format!("v{VERSION}")
            ),
            (
                "capwasm-system".to_owned(),
                INFRASTRUCTURE.to_owned(),
                format!("v{VERSION}")
            ),
        ])
    );
    // One operator, serving both providers' kinds, with the variable set.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "capwasm-system");
    let list = deployments
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(list.len(), 1);
    let deployment = &list[0];
    assert_eq!(
        deployment.labels().get(PROVIDER_LABEL).map(String::as_str),
        Some(INFRASTRUCTURE)
    );
    let args = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .args
        .clone()
        .unwrap_or_default();
    assert!(
        args.contains(&"--controllers=providers".to_owned()),
        "{args:?}"
    );
    assert!(args.contains(&"--concurrency=8".to_owned()), "{args:?}");
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    let bootstrap_crd = crds
        .get("wasmbootstrapconfigs.bootstrap.cluster.x-k8s.io")
        .await
        .unwrap();
    assert_eq!(
        bootstrap_crd
            .labels()
            .get(PROVIDER_LABEL)
            .map(String::as_str),
        Some(BOOTSTRAP)
    );
    let infra_crd = crds
        .get("wasmmachinepools.infrastructure.cluster.x-k8s.io")
        .await
        .unwrap();
    assert_eq!(
        infra_crd.labels().get(PROVIDER_LABEL).map(String::as_str),
        Some(INFRASTRUCTURE)
    );
    records
}

/// `clusterctl upgrade plan`: nothing newer, then a patch release made
/// into the same repository.
fn check_upgrade_plan(clusterctl: &Clusterctl, kubeconfig: &str, repository: &Path) {
    let plan = clusterctl
        .ok(&["upgrade", "plan", "--kubeconfig", kubeconfig], &[])
        .unwrap();
    eprintln!("{plan}");
    assert!(plan.contains("You are already up to date!"), "{plan}");
    release_into(repository, "0.2.1");
    let plan = clusterctl
        .ok(&["upgrade", "plan", "--kubeconfig", kubeconfig], &[])
        .unwrap();
    eprintln!("{plan}");
    for (provider, kind) in [
        (BOOTSTRAP, "BootstrapProvider"),
        (INFRASTRUCTURE, "InfrastructureProvider"),
    ] {
        let row = plan
            .lines()
            .find(|l| l.starts_with(provider))
            .unwrap_or_else(|| panic!("no {provider} in\n{plan}"));
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            fields,
            [provider, "capwasm-system", kind, "v0.2.0", "v0.2.1"],
            "{plan}"
        );
    }
    assert!(
        plan.contains("clusterctl upgrade apply --contract v1beta2"),
        "{plan}"
    );
}

/// Does what the namespace controller does for a namespace being deleted
/// once it is empty: clears its finalizers through `finalize`.
async fn finish_deleting_namespace(client: &kube::Client, name: &str) {
    use k8s_openapi::api::core::v1::Namespace;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let Some(mut namespace) = namespaces.get_opt(name).await.unwrap() else {
        return;
    };
    assert!(
        namespace.metadata.deletion_timestamp.is_some(),
        "clusterctl left {name} in place"
    );
    if let Some(spec) = namespace.spec.as_mut() {
        spec.finalizers = None;
    }
    namespaces
        .replace_subresource(
            "finalize",
            name,
            &kube::api::PostParams::default(),
            &namespace,
        )
        .await
        .unwrap();
    for _ in 0..50 {
        if namespaces.get_opt(name).await.unwrap().is_none() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{name} was not deleted");
}

/// clusterctl's inventory: (namespace, name, version) of each provider.
async fn inventory_records(client: &kube::Client) -> BTreeSet<(String, String, String)> {
    let inventory: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "clusterctl.cluster.x-k8s.io",
            "v1alpha3",
            "Provider",
        )),
    );
    inventory
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| {
            (
                p.namespace().unwrap_or_default(),
                p.name_any(),
                p.data["version"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}
