//! Providers from a real OCI registry (`crane registry serve`), signed by
//! cosign itself, through the operator (`capwasm run`): pulled by tag and
//! by digest, hot-swapped when the tag moves to a new signed digest,
//! refused when unsigned, signed by another key or by a signature of
//! another digest, served on when the registry goes down, and from the
//! precompiled cache after a restart with the registry down.

use capwasm::api::providermodule::{
    AnyOf, KeySelector, KeylessIdentity, ProvenanceRule, SecretReference, Signer, Verification,
    World,
};
use capwasm::api::{MachinePool, ProviderModule};
use capwasm::oci::{Auth, ImageRef, Pushed, push_component};
use capwasm::testing::guest_path;
use capwasm::testing::objects::ProviderModuleBuilder;
use k8s_openapi::api::core::v1::{ConfigMap, Event};
use kube::Api;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::flows::{Modules, condition, scale, wait_for, wait_for_pool};
use testenv::install::{Core, Install};
use testenv::registry::{KeyPair, PASSWORD, Registry, USERNAME};
use testenv::sigstore::Sigstore;

/// Pushes guest `file` to `image` on `registry`.
async fn push(registry: &Registry, file: &str, image: &str) -> Pushed {
    let image = ImageRef::parse(image, true).expect("a loopback reference");
    let bytes = std::fs::read(guest_path(file)).expect("the guest is built (make guests)");
    let pushed = push_component(&image, &Auth::Anonymous, bytes)
        .await
        .expect("pushed");
    assert!(
        pushed.image.starts_with(&registry.authority),
        "{}",
        pushed.image
    );
    pushed
}

/// Releases guest `file` as `tag` the way a publisher should: pushed under
/// a candidate tag, its digest signed with `key`, and only then `tag` moved
/// to it, so the tag never names an unsigned digest.
async fn publish(registry: &Registry, key: &KeyPair, file: &str, tag: &str) -> Pushed {
    let pushed = push(registry, file, &format!("{tag}-candidate")).await;
    registry
        .release(&pushed.image, key, tag)
        .expect("signed, and the tag moved");
    pushed
}

/// Creates sim-infrastructure module `name` from `image`, signed by `key`.
async fn create_module(install: &Install, name: &str, image: &str, key: &KeyPair) {
    let module = ProviderModuleBuilder::file(name, World::Infrastructure, "/unused")
        .oci(image)
        .verified_by(&[&key.public_pem])
        .allowed_hosts(&["127.0.0.1"])
        .build();
    Api::<ProviderModule>::all(install.client.clone())
        .create(&PostParams::default(), &module)
        .await
        .expect("the module created");
}

/// Waits until module `name` says `predicate`, showing its status if it never does.
async fn wait_for_module_status(
    api: &Api<ProviderModule>,
    name: &str,
    what: &str,
    predicate: impl Fn(&ProviderModule) -> bool,
) -> ProviderModule {
    wait_for(api, name, what, |m| m.is_some_and(&predicate))
        .await
        .unwrap_or_else(|| panic!("module {name} is gone while waiting until it {what}"))
}

fn ready(module: &ProviderModule) -> Option<(String, String, String)> {
    condition(&module.status.as_ref()?.conditions, "Ready")
}

fn active(module: &ProviderModule) -> Option<&str> {
    module.status.as_ref()?.active_digest.as_deref()
}

/// A Cluster and its 2-replica pool whose infrastructure is module `infrastructure`.
async fn cluster_and_pool(install: &Install, infrastructure: &str) -> Api<MachinePool> {
    let modules = Modules {
        bootstrap: install.modules.bootstrap.clone(),
        infrastructure: infrastructure.to_owned(),
    };
    let workload = install.env.workload().expect("a workload server");
    install
        .objects
        .create_cluster(&install.client, workload, &install.ns, "oci", &modules)
        .await
        .expect("the Cluster");
    install
        .objects
        .create_pool(&install.client, &install.ns, "oci-pool", "oci", 2, &modules)
        .await
        .expect("the pool");
    let pools: Api<MachinePool> = Api::namespaced(install.client.clone(), &install.ns);
    wait_for_pool(&pools, "oci-pool", "Running", 2).await;
    pools
}

/// Reconciles `name` now (a label change is a watch event).
async fn touch(api: &Api<ProviderModule>, name: &str, value: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"touched": value}}})),
    )
    .await
    .expect("the module labelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_tag_serves_a_pool_and_moving_it_to_a_new_signed_digest_hot_swaps() {
    let registry = Registry::start()
        .await
        .expect("a registry (tests/registry/build.sh)");
    let key = registry.key_pair("release").expect("a cosign key pair");
    let install = Install::with_core("oci-swap", Core::Capwasm).await;
    let tag = registry.image("providers/sim", "stable");
    let v1 = push(&registry, "sim_infrastructure.wasm", &tag).await;
    registry.sign(&v1.image, &key).expect("cosign signs v1");

    let name = format!("{}-oci-sim", install.ns);
    create_module(&install, &name, &tag, &key).await;
    let modules: Api<ProviderModule> = Api::all(install.client.clone());
    let module = wait_for_module_status(&modules, &name, "served v1", |m| {
        active(m) == Some(v1.component_digest.as_str())
    })
    .await;
    let status = module.status.clone().unwrap_or_default();
    assert_eq!(status.image.as_deref(), Some(v1.image.as_str()));
    assert_eq!(status.signed_by.as_deref(), Some("publicKeys[0]"));
    let (_, reason, message) = ready(&module).expect("a Ready condition");
    assert_eq!(reason, "Loaded", "{message}");
    assert!(message.contains(&v1.image), "{message}");

    let pools = cluster_and_pool(&install, &name).await;

    // The tag moves to v2, signed: the next resolution swaps it in.
    let v2 = publish(&registry, &key, "sim_infrastructure_v2.wasm", &tag).await;
    let module = wait_for_module_status(&modules, &name, "swapped to v2", |m| {
        active(m) == Some(v2.component_digest.as_str())
    })
    .await;
    let status = module.status.clone().unwrap_or_default();
    assert_eq!(
        status.previous_digest.as_deref(),
        Some(v1.component_digest.as_str())
    );
    assert_eq!(status.image.as_deref(), Some(v2.image.as_str()));
    scale(&pools, "oci-pool", 3).await.expect("scaled");
    wait_for_pool(&pools, "oci-pool", "Running", 3).await;

    // No failed load on the way: the module's Events are all Normal.
    let events: Api<Event> = Api::all(install.client.clone());
    let warnings: Vec<String> = events
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .expect("Events")
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| format!("{:?}: {:?}", e.reason, e.message))
        .collect();
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_wrongly_signed_and_misattributed_digests_are_refused_and_the_working_version_stays()
 {
    let registry = Registry::start()
        .await
        .expect("a registry (tests/registry/build.sh)");
    let key = registry.key_pair("release").expect("a cosign key pair");
    let stranger = registry.key_pair("stranger").expect("another key pair");
    let install = Install::with_core("oci-refuse", Core::Capwasm).await;
    let tag = registry.image("providers/sim", "stable");
    let v1 = push(&registry, "sim_infrastructure.wasm", &tag).await;
    // In both of cosign's layouts, to have each to misattribute.
    registry.sign(&v1.image, &key).expect("cosign signs v1");
    registry
        .sign_legacy(&v1.image, &key)
        .expect("cosign v2 signs v1");
    let name = format!("{}-oci-sim", install.ns);
    create_module(&install, &name, &tag, &key).await;
    let modules: Api<ProviderModule> = Api::all(install.client.clone());
    wait_for_module_status(&modules, &name, "served v1", |m| {
        active(m) == Some(v1.component_digest.as_str())
    })
    .await;

    // v2, not signed at all.
    let v2 = push(&registry, "sim_infrastructure_v2.wasm", &tag).await;
    let refused = |reason: &'static str| {
        let v1 = v1.component_digest.clone();
        move |m: &ProviderModule| {
            ready(m).is_some_and(|(status, r, _)| status == "False" && r == reason)
                && active(m) == Some(v1.as_str())
        }
    };
    let module =
        wait_for_module_status(&modules, &name, "refused v2", refused("SignatureNotFound")).await;
    let (_, _, message) = ready(&module).unwrap_or_default();
    assert!(message.contains(&v2.image), "names the image: {message}");
    assert!(message.contains("stays in service"), "{message}");

    // Signed, but by a key the module does not trust.
    registry
        .sign(&v2.image, &stranger)
        .expect("cosign signs v2 with another key");
    touch(&modules, &name, "stranger").await;
    wait_for_module_status(&modules, &name, "refused v2", refused("SignatureUntrusted")).await;

    // A real signature, of v1, put where v2's belongs.
    let v3 = push(&registry, "hostile_panic.wasm", &tag).await;
    let signature_of = |pushed: &Pushed| {
        format!(
            "{}:{}.sig",
            pushed.image.split('@').next().unwrap_or_default(),
            pushed.manifest_digest.replacen(':', "-", 1)
        )
    };
    let v3_signature = signature_of(&v3);
    let v3_tag = v3_signature.rsplit(':').next().unwrap_or_default();
    registry
        .crane(&["tag", &signature_of(&v1), v3_tag])
        .expect("v1's signature tagged as v3's");
    touch(&modules, &name, "misattributed").await;
    let module = wait_for_module_status(
        &modules,
        &name,
        "refused v3",
        refused("SignatureDigestMismatch"),
    )
    .await;
    let (_, _, message) = ready(&module).unwrap_or_default();
    assert!(
        message.contains(&v1.manifest_digest),
        "names what it signs: {message}"
    );

    // v1's bundles, listed under v4's referrers tag.
    let v4 = push(&registry, "hostile_infinite_loop.wasm", &tag).await;
    let referrers_tag = |pushed: &Pushed| {
        format!(
            "{}:{}",
            pushed.image.split('@').next().unwrap_or_default(),
            pushed.manifest_digest.replacen(':', "-", 1)
        )
    };
    let v4_tag = referrers_tag(&v4);
    registry
        .crane(&[
            "tag",
            &referrers_tag(&v1),
            v4_tag.rsplit(':').next().unwrap_or_default(),
        ])
        .expect("v1's referrers listed as v4's");
    touch(&modules, &name, "misattributed-bundle").await;
    let module =
        wait_for_module_status(&modules, &name, "refused v4", refused("SignatureMalformed")).await;
    let (_, _, message) = ready(&module).unwrap_or_default();
    assert!(
        message.contains(&format!(
            "refers to another image than {}",
            v4.manifest_digest
        )),
        "{message}"
    );

    only_served_is_cached(&install, &v1, &[&v2, &v3, &v4]);
}

/// Nothing of a `refused` image reached the precompiled cache; `served` did.
fn only_served_is_cached(install: &Install, served: &Pushed, refused: &[&Pushed]) {
    let cached: Vec<String> = std::fs::read_dir(&install.operator.cache_dir)
        .expect("the cache directory")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for refused in refused {
        let hex = refused.component_digest.trim_start_matches("sha256:");
        assert!(!cached.iter().any(|f| f.starts_with(hex)), "{cached:?}");
    }
    assert!(
        cached
            .iter()
            .any(|f| f.starts_with(served.component_digest.trim_start_matches("sha256:")))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_registry_down_a_pinned_digest_serves_on_and_after_a_restart_from_the_cache() {
    let mut registry = Registry::start()
        .await
        .expect("a registry (tests/registry/build.sh)");
    let key = registry.key_pair("release").expect("a cosign key pair");
    let mut install = Install::with_core("oci-down", Core::Capwasm).await;
    let v1 = push(
        &registry,
        "sim_infrastructure.wasm",
        &registry.image("providers/sim", "v1"),
    )
    .await;
    registry.sign(&v1.image, &key).expect("cosign signs v1");
    let name = format!("{}-oci-sim", install.ns);
    create_module(&install, &name, &v1.image, &key).await;
    let modules: Api<ProviderModule> = Api::all(install.client.clone());
    wait_for_module_status(&modules, &name, "served v1", |m| {
        active(m) == Some(v1.component_digest.as_str())
    })
    .await;
    let pools = cluster_and_pool(&install, &name).await;

    registry.stop();
    touch(&modules, &name, "down").await;
    let unreachable = |m: &ProviderModule| {
        m.status
            .as_ref()
            .and_then(|s| condition(&s.conditions, "SourceAvailable"))
            .is_some_and(|(status, reason, _)| status == "False" && reason == "RegistryUnreachable")
    };
    let module =
        wait_for_module_status(&modules, &name, "said the registry is down", unreachable).await;
    let (status, _, message) = ready(&module).unwrap_or_default();
    assert_eq!(status, "True", "still serving: {message}");
    assert!(
        message.contains("serving what was verified before"),
        "{message}"
    );

    // A new process, the registry still down: the pinned digest comes
    // from the record of its verification and the precompiled cache.
    install.kill_and_restart_operator().await;
    scale(&pools, "oci-pool", 3).await.expect("scaled");
    wait_for_pool(&pools, "oci-pool", "Running", 3).await;
    let module = modules.get(&name).await.expect("the module");
    let status = module.status.clone().unwrap_or_default();
    assert_eq!(
        status.active_digest.as_deref(),
        Some(v1.component_digest.as_str())
    );
    assert_eq!(status.from_cache, Some(true));
    assert!(unreachable(&module), "{status:?}");
}

/// Images crane pushes (file-system layers): one of two layers, one of one.
fn file_system_images(registry: &Registry) -> (String, String) {
    let dir = tempfile::tempdir().expect("a directory");
    let mut tars = Vec::new();
    for layer in ["one", "two"] {
        std::fs::write(dir.path().join(layer), layer).expect("a file");
        let tar = dir.path().join(format!("{layer}.tar"));
        let made = std::process::Command::new("tar")
            .arg("-cf")
            .arg(&tar)
            .arg("-C")
            .arg(dir.path())
            .arg(layer)
            .status()
            .expect("tar runs");
        assert!(made.success());
        tars.push(tar.display().to_string());
    }
    let two_layers = registry.image("providers/two", "v1");
    registry
        .crane(&["append", "-f", &tars[0], "-f", &tars[1], "-t", &two_layers])
        .expect("a two-layer image");
    let archive = registry.image("providers/archive", "v1");
    registry
        .crane(&["append", "-f", &tars[0], "-t", &archive])
        .expect("a one-layer file-system image");
    (two_layers, archive)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_references_and_images_are_conditions_naming_the_cause() {
    let registry = Registry::start()
        .await
        .expect("a registry (tests/registry/build.sh)");
    let install = Install::with_core("oci-bad", Core::Capwasm).await;
    let modules: Api<ProviderModule> = Api::all(install.client.clone());
    let not_a_component = {
        let image =
            ImageRef::parse(&registry.image("providers/text", "v1"), true).expect("a reference");
        push_component(&image, &Auth::Anonymous, b"not a component".to_vec())
            .await
            .expect("pushed")
    };
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port")
        .to_string();
    let (two_layers, archive) = file_system_images(&registry);
    let cases = [
        (
            "two-layers",
            two_layers,
            "ImageInvalid",
            "has 2 layers; a provider image has exactly one",
        ),
        (
            "archive",
            archive,
            "ImageInvalid",
            "is a file-system archive",
        ),
        (
            "no-tag",
            format!("{}/providers/sim", registry.authority),
            "ImageInvalid",
            "neither a tag nor a digest",
        ),
        (
            "unknown-registry",
            format!("{closed}/providers/sim:v1"),
            "RegistryUnreachable",
            "is unreachable",
        ),
        (
            "missing-tag",
            registry.image("providers/sim", "absent"),
            "FetchFailed",
            "refused",
        ),
        (
            "forbidden-pull-secret",
            registry.image("providers/sim", "v1"),
            "CredentialsNotAllowed",
            "credentials are read only from namespace",
        ),
        (
            "not-a-component",
            not_a_component.image.clone(),
            "ModuleInvalid",
            "not a WebAssembly component",
        ),
    ];
    for (suffix, image, _, _) in &cases {
        let mut module = ProviderModuleBuilder::file(
            &format!("{}-{suffix}", install.ns),
            World::Infrastructure,
            "/unused",
        )
        .oci(image)
        .build();
        if *suffix == "forbidden-pull-secret"
            && let Some(oci) = module.spec.source.oci.as_mut()
        {
            oci.pull_secret = Some(SecretReference {
                namespace: "default".into(),
                name: "registry".into(),
            });
        }
        modules
            .create(&PostParams::default(), &module)
            .await
            .expect("the module created");
    }
    for (suffix, _, reason, words) in cases {
        let name = format!("{}-{suffix}", install.ns);
        let module = wait_for_module_status(&modules, &name, reason, |m| {
            ready(m).is_some_and(|(status, r, _)| status == "False" && r == reason)
        })
        .await;
        let (_, _, message) = ready(&module).unwrap_or_default();
        assert!(message.contains(words), "{suffix}: {message}");
        assert_eq!(active(&module), None, "{suffix}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authors_push_and_inspect_from_the_command_line() {
    let registry = Registry::start()
        .await
        .expect("a registry (tests/registry/build.sh)");
    let image = registry.image("providers/sim", "cli");
    let run = |args: &[&str]| {
        let output = std::process::Command::new(testenv::operator::binary())
            .args(args)
            .output()
            .expect("capwasm runs");
        assert!(
            output.status.success(),
            "capwasm {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let guest = guest_path("sim_infrastructure.wasm").display().to_string();
    let pushed = run(&["provider", "push", &guest, &image, "--plain-http"]);
    let line = |key: &str| {
        pushed
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map_or_else(|| panic!("no {key} in {pushed}"), str::trim)
            .to_owned()
    };
    let (pinned, component) = (line("image:"), line("component:"));
    assert!(pinned.starts_with(&format!("{}/providers/sim@sha256:", registry.authority)));
    // cosign v3's commands, with a key, offline, keyless and the provenance.
    for (key, command) in [
        ("sign it:", "cosign sign --key cosign.key "),
        (
            "  offline:",
            "cosign sign --key cosign.key --signing-config offline.json ",
        ),
        ("  keyless:", "cosign sign --yes "),
        ("attest it:", "cosign attest --type slsaprovenance1 "),
    ] {
        let printed = line(key);
        assert!(
            printed.contains(command) && printed.contains(&pinned),
            "{printed}"
        );
    }
    // The pinned reference and the tag describe the same component.
    for reference in [&pinned, &image] {
        let described: serde_json::Value = serde_json::from_str(&run(&[
            "provider",
            "inspect",
            reference,
            "--plain-http",
            "--output",
            "json",
        ]))
        .expect("JSON");
        assert_eq!(described["digest"], component.as_str(), "{reference}");
        assert_eq!(described["file"], pinned.as_str(), "{reference}");
        assert_eq!(described["name"], "sim-infrastructure");
    }
    // A file that is not a provider never reaches the registry.
    let output = std::process::Command::new(testenv::operator::binary())
        .args([
            "provider",
            "push",
            "/etc/hostname",
            &registry.image("providers/junk", "v1"),
            "--plain-http",
        ])
        .output()
        .expect("capwasm runs");
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("not a WebAssembly component"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        registry
            .crane(&["digest", &registry.image("providers/junk", "v1")])
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_from_a_secret_and_a_config_map_admit_bundles_found_through_the_referrers_api() {
    let registry = Registry::start_with_referrers_api()
        .await
        .expect("a registry (tests/registry/build-referrers.sh)");
    let team = registry.key_pair("team").expect("a cosign key pair");
    let release = registry.key_pair("release").expect("another key pair");
    let install = Install::with_core("oci-keys", Core::Capwasm).await;
    let secret = format!("{}-keys", install.ns);
    testenv::flows::credentials_secret(
        &install.client,
        &secret,
        &[("cosign.pub", &team.public_pem)],
    )
    .await;
    // Keys, like credentials, are read only from the credentials namespace.
    let keys = format!("{}-keys", install.ns);
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(keys.clone()),
            ..ObjectMeta::default()
        },
        data: Some([("release.pub".to_owned(), release.public_pem.clone())].into()),
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(install.client.clone(), testenv::CREDENTIALS_NAMESPACE)
        .create(&PostParams::default(), &config_map)
        .await
        .expect("the keys ConfigMap");
    let tag = registry.image("providers/sim", "stable");
    let v1 = push(&registry, "sim_infrastructure.wasm", &tag).await;
    registry
        .sign(&v1.image, &release)
        .expect("signed with the release key");
    // cosign wrote no referrers tag: only the referrers API finds the bundle.
    let tags = registry
        .crane(&["ls", &format!("{}/providers/sim", registry.authority)])
        .expect("the tags listed");
    assert!(tags.lines().any(|t| t == "stable"), "{tags}");
    assert!(!tags.contains("sha256-"), "{tags}");

    let name = format!("{}-oci-sim", install.ns);
    let mut module = ProviderModuleBuilder::file(&name, World::Infrastructure, "/unused")
        .oci(&tag)
        .allowed_hosts(&["127.0.0.1"])
        .build();
    module.spec.verification = Some(Verification {
        public_keys: vec![
            Signer {
                secret: Some(KeySelector {
                    namespace: testenv::CREDENTIALS_NAMESPACE.into(),
                    name: secret.clone(),
                    key: None,
                }),
                ..Signer::default()
            },
            Signer {
                config_map: Some(KeySelector {
                    namespace: testenv::CREDENTIALS_NAMESPACE.into(),
                    name: keys.clone(),
                    key: Some("release.pub".into()),
                }),
                ..Signer::default()
            },
        ],
        ..Verification::default()
    });
    let modules: Api<ProviderModule> = Api::all(install.client.clone());
    modules
        .create(&PostParams::default(), &module)
        .await
        .expect("the module created");
    let served = wait_for_module_status(&modules, &name, "served v1", |m| {
        active(m) == Some(v1.component_digest.as_str())
    })
    .await;
    assert_eq!(
        served.status.and_then(|s| s.signed_by).as_deref(),
        Some(
            format!(
                "ConfigMap {}/{keys}[release.pub]",
                testenv::CREDENTIALS_NAMESPACE
            )
            .as_str()
        )
    );

    a_changed_key_is_seen_at_once(&install, &module, &v1, &team).await;

    // The tag moves to a digest only the Secret's key signed.
    let v2 = publish(&registry, &team, "sim_infrastructure_v2.wasm", &tag).await;
    let served = wait_for_module_status(&modules, &name, "served v2", |m| {
        active(m) == Some(v2.component_digest.as_str())
    })
    .await;
    assert_eq!(
        served.status.and_then(|s| s.signed_by).as_deref(),
        Some(
            format!(
                "Secret {}/{secret}[cosign.pub]",
                testenv::CREDENTIALS_NAMESPACE
            )
            .as_str()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_asking_for_credentials_gets_those_of_the_pull_secret() {
    let registry = Registry::start_authenticated()
        .await
        .expect("a registry (tests/distribution/build.sh)");
    let install = Install::with_core("oci-auth", Core::Capwasm).await;
    let tag = registry.image("providers/sim", "v1");
    let image = ImageRef::parse(&tag, true).expect("a loopback reference");
    let user = Auth::Basic {
        username: USERNAME.into(),
        password: PASSWORD.into(),
    };
    let bytes = std::fs::read(guest_path("sim_infrastructure.wasm")).expect("the guest");
    assert!(
        push_component(&image, &Auth::Anonymous, bytes.clone())
            .await
            .is_err(),
        "the registry takes no anonymous push"
    );
    let v1 = push_component(&image, &user, bytes).await.expect("pushed");
    for (secret, password) in [("right", PASSWORD), ("wrong", "not-the-password")] {
        let config = json!({"auths": {registry.authority.clone(): {"username": USERNAME, "password": password}}});
        testenv::flows::credentials_secret(
            &install.client,
            &format!("{}-{secret}", install.ns),
            &[(".dockerconfigjson", &config.to_string())],
        )
        .await;
    }
    let modules: Api<ProviderModule> = Api::all(install.client.clone());
    for secret in [Some("right"), Some("wrong"), None] {
        let name = format!("{}-{}", install.ns, secret.unwrap_or("none"));
        let mut module = ProviderModuleBuilder::file(&name, World::Infrastructure, "/unused")
            .oci(&tag)
            .build();
        if let (Some(secret), Some(oci)) = (secret, module.spec.source.oci.as_mut()) {
            oci.pull_secret = Some(SecretReference {
                namespace: testenv::CREDENTIALS_NAMESPACE.into(),
                name: format!("{}-{secret}", install.ns),
            });
        }
        modules
            .create(&PostParams::default(), &module)
            .await
            .expect("the module created");
    }
    wait_for_module_status(
        &modules,
        &format!("{}-right", install.ns),
        "served v1",
        |m| active(m) == Some(v1.component_digest.as_str()),
    )
    .await;
    for refused in ["wrong", "none"] {
        let name = format!("{}-{refused}", install.ns);
        let module = wait_for_module_status(&modules, &name, "was refused", |m| {
            ready(m).is_some_and(|(status, reason, _)| status == "False" && reason == "FetchFailed")
        })
        .await;
        let (_, _, message) = ready(&module).unwrap_or_default();
        assert!(message.contains("refused the tag"), "{refused}: {message}");
        assert!(!message.contains(PASSWORD), "{message}");
        assert_eq!(active(&module), None);
    }
}

/// A module pinned to `v1`'s digest, trusting only `module`'s ConfigMap
/// key: replaced by `other`, it is seen at once (ConfigMaps are watched),
/// not at a resync.
async fn a_changed_key_is_seen_at_once(
    install: &Install,
    module: &ProviderModule,
    v1: &Pushed,
    other: &KeyPair,
) {
    let modules: Api<ProviderModule> = Api::all(install.client.clone());
    let pinned = format!(
        "{}-pinned",
        module.metadata.name.clone().unwrap_or_default()
    );
    let mut module = module.clone();
    module.metadata.name = Some(pinned.clone());
    module.metadata.resource_version = None;
    if let Some(oci) = module.spec.source.oci.as_mut() {
        oci.image.clone_from(&v1.image);
    }
    if let Some(verification) = module.spec.verification.as_mut() {
        verification.public_keys.remove(0);
    }
    modules
        .create(&PostParams::default(), &module)
        .await
        .expect("the pinned module created");
    wait_for_module_status(&modules, &pinned, "served v1", |m| {
        active(m) == Some(v1.component_digest.as_str())
            && ready(m).is_some_and(|(status, _, _)| status == "True")
    })
    .await;
    Api::<ConfigMap>::namespaced(install.client.clone(), testenv::CREDENTIALS_NAMESPACE)
        .patch(
            &format!("{}-keys", install.ns),
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"release.pub": other.public_pem}})),
        )
        .await
        .expect("the key replaced");
    wait_for_module_status(&modules, &pinned, "distrusted v1", |m| {
        ready(m)
            .is_some_and(|(status, reason, _)| status == "False" && reason == "SignatureUntrusted")
            && active(m) == Some(v1.component_digest.as_str())
    })
    .await;
}

/// A key of `pair` named `name`, inline.
fn named_key(name: &str, pair: &KeyPair) -> Signer {
    Signer {
        name: Some(name.to_owned()),
        pem: Some(pair.public_pem.clone()),
        ..Signer::default()
    }
}

/// Two of three release managers must sign, and the security team's key
/// too: one signature is refused naming who signed; two (a cosign v3
/// bundle and a v2 `.sig`) of the three, with the team's, admit the image,
/// and the status names them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_three_release_managers_and_the_security_team_must_sign() {
    let registry = Registry::start()
        .await
        .expect("a registry (tests/registry/build.sh)");
    let [alice, bob, carol, security] = ["alice", "bob", "carol", "security"]
        .map(|n| registry.key_pair(n).expect("a cosign key pair"));
    let install = Install::with_core("oci-policy", Core::Capwasm).await;
    let tag = registry.image("providers/sim", "stable");
    let v1 = push(&registry, "sim_infrastructure.wasm", &tag).await;
    registry.sign(&v1.image, &alice).expect("alice signs");
    registry
        .sign(&v1.image, &security)
        .expect("the security team signs");

    let name = format!("{}-oci-sim", install.ns);
    let mut module = ProviderModuleBuilder::file(&name, World::Infrastructure, "/unused")
        .oci(&tag)
        .allowed_hosts(&["127.0.0.1"])
        .build();
    module.spec.verification = Some(Verification {
        all_of: vec![named_key("security", &security)],
        any_of: Some(AnyOf {
            minimum_matches: Some(2),
            signers: vec![
                named_key("alice", &alice),
                named_key("bob", &bob),
                named_key("carol", &carol),
            ],
        }),
        ..Verification::default()
    });
    let modules: Api<ProviderModule> = Api::all(install.client.clone());
    modules
        .create(&PostParams::default(), &module)
        .await
        .expect("the module created");
    let module = wait_for_module_status(&modules, &name, "refused with one manager", |m| {
        ready(m)
            .is_some_and(|(status, reason, _)| status == "False" && reason == "SignatureUntrusted")
    })
    .await;
    let (_, _, message) = ready(&module).unwrap_or_default();
    assert!(
        message.contains("all of [security] and 2 of [alice, bob, carol]")
            && message.contains("signed by security, alice of its signers"),
        "{message}"
    );
    assert!(active(&module).is_none(), "nothing served");

    // Bob signs in the layout before cosign v3.
    registry.sign_legacy(&v1.image, &bob).expect("bob signs");
    touch(&modules, &name, "bob-signed").await;
    let served = wait_for_module_status(&modules, &name, "served v1", |m| {
        active(m) == Some(v1.component_digest.as_str())
    })
    .await;
    assert_eq!(
        served.status.and_then(|s| s.signed_by).as_deref(),
        Some("security, alice, bob")
    );
}

/// A keyless release: the module trusts the release workflow of
/// `acme/providers` as certified by the test's own Fulcio (its trust root
/// in a ConfigMap) and asks for the workflow's SLSA provenance from that
/// repository. An image signed by another identity is refused naming it;
/// signed by the workflow and attested, it serves; a next version whose
/// provenance names another repository is refused and the first stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_release_workflow_and_its_provenance_admit_what_they_signed() {
    let registry = Registry::start()
        .await
        .expect("a registry (tests/registry/build.sh)");
    let sigstore = Sigstore::start()
        .await
        .expect("a Sigstore (tests/sigstore/build.sh)");
    // The operator's own trust root serves modules that name none.
    let flag = [
        "--trusted-root".to_owned(),
        sigstore.trusted_root().display().to_string(),
    ];
    let install = Install::with_args("oci-keyless", Core::Capwasm, &flag).await;
    let root = trust_root_config_map(&install, sigstore.trusted_root_json()).await;
    let (repository, workflow) = (
        "acme/providers",
        ".github/workflows/release.yml@refs/heads/main",
    );
    let subject = Sigstore::workflow_subject(repository, workflow);
    let source = format!("https://github.com/{repository}");
    let release = sigstore
        .workflow_token(repository, workflow)
        .expect("a workflow token");

    let tag = registry.image("providers/sim", "stable");
    let v1 = push(&registry, "sim_infrastructure.wasm", &tag).await;
    let mallory = sigstore
        .token(&sigstore.email_issuer(), "mallory@example.com")
        .expect("a token");
    sigstore
        .sign(&registry, &v1.image, &mallory)
        .expect("mallory signs keyless");
    let name = format!("{}-oci-sim", install.ns);
    let module = keyless_module(
        &name,
        &tag,
        &sigstore.github_issuer(),
        &root,
        (&subject, &source),
    );
    let modules: Api<ProviderModule> = Api::all(install.client.clone());
    modules
        .create(&PostParams::default(), &module)
        .await
        .expect("the module created");
    let refused = |reason: &'static str| {
        move |m: &ProviderModule| {
            ready(m).is_some_and(|(status, r, _)| status == "False" && r == reason)
        }
    };
    let module = wait_for_module_status(
        &modules,
        &name,
        "refused mallory",
        refused("SignatureUntrusted"),
    )
    .await;
    let (_, _, message) = ready(&module).unwrap_or_default();
    assert!(
        message.contains("mallory@example.com") && message.contains(&sigstore.email_issuer()),
        "names the identity that signed: {message}"
    );

    // The release workflow signs and attests where it built from.
    sigstore
        .sign(&registry, &v1.image, &release)
        .and_then(|()| {
            sigstore.attest_provenance(&registry, &v1.image, &release, &subject, &source)
        })
        .expect("the workflow signs keyless and attests its provenance");
    touch(&modules, &name, "released").await;
    let served = wait_for_module_status(&modules, &name, "served v1", |m| {
        active(m) == Some(v1.component_digest.as_str())
    })
    .await;
    assert_eq!(
        served.status.and_then(|s| s.signed_by).as_deref(),
        Some("release")
    );

    // v2, signed by the workflow, but built (it says) from another
    // repository: signed and attested before the tag moves to it.
    let v2 = push(
        &registry,
        "sim_infrastructure_v2.wasm",
        &format!("{tag}-candidate"),
    )
    .await;
    let evil = "https://github.com/evil/providers";
    sigstore
        .sign(&registry, &v2.image, &release)
        .and_then(|()| sigstore.attest_provenance(&registry, &v2.image, &release, &subject, evil))
        .expect("v2 signed, and attested from another repository");
    registry
        .crane(&["tag", &v2.image, "stable"])
        .expect("the tag moved to v2");
    touch(&modules, &name, "evil-provenance").await;
    let module = wait_for_module_status(&modules, &name, "refused v2", |m| {
        refused("ProvenanceMismatch")(m) && active(m) == Some(v1.component_digest.as_str())
    })
    .await;
    let (_, _, message) = ready(&module).unwrap_or_default();
    assert!(message.contains(evil), "{message}");
    only_served_is_cached(&install, &v1, &[&v2]);

    served_by_the_operators_trust_root(&install, &name, &v1, (&sigstore, &root, &subject, &source))
        .await;
}

/// v1 again, for a module naming no trust root: `--trusted-root`'s serves.
async fn served_by_the_operators_trust_root(
    install: &Install,
    name: &str,
    v1: &Pushed,
    (sigstore, root, subject, source): (&Sigstore, &str, &str, &str),
) {
    let modules: Api<ProviderModule> = Api::all(install.client.clone());
    let by_default = format!("{name}-default");
    let mut module = keyless_module(
        &by_default,
        &v1.image,
        &sigstore.github_issuer(),
        root,
        (subject, source),
    );
    if let Some(verification) = module.spec.verification.as_mut() {
        verification.trusted_root = None;
    }
    modules
        .create(&PostParams::default(), &module)
        .await
        .expect("the module naming no trust root created");
    wait_for_module_status(&modules, &by_default, "served v1", |m| {
        active(m) == Some(v1.component_digest.as_str())
    })
    .await;
}

/// The trust root `json` in a ConfigMap of the credentials namespace; its name.
async fn trust_root_config_map(install: &Install, json: String) -> String {
    testenv::flows::credentials_namespace(&install.client).await;
    let root = format!("{}-sigstore", install.ns);
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(root.clone()),
            ..ObjectMeta::default()
        },
        data: Some([("trusted_root.json".to_owned(), json)].into()),
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(install.client.clone(), testenv::CREDENTIALS_NAMESPACE)
        .create(&PostParams::default(), &config_map)
        .await
        .expect("the trust root ConfigMap");
    root
}

/// Module `name` of `tag` that admits what the workflows of `source`
/// signed (certified by `issuer`'s tokens, checked against the trust root
/// ConfigMap `root`), with their provenance built by `builder` from
/// `source`.
fn keyless_module(
    name: &str,
    tag: &str,
    issuer: &str,
    root: &str,
    (builder, source): (&str, &str),
) -> ProviderModule {
    let workflow_signer = Signer {
        keyless: Some(KeylessIdentity {
            issuer: issuer.to_owned(),
            subject_prefix: Some(format!("{source}/")),
            ..KeylessIdentity::default()
        }),
        ..Signer::default()
    };
    let mut module = ProviderModuleBuilder::file(name, World::Infrastructure, "/unused")
        .oci(tag)
        .allowed_hosts(&["127.0.0.1"])
        .build();
    module.spec.verification = Some(Verification {
        all_of: vec![Signer {
            name: Some("release".into()),
            ..workflow_signer.clone()
        }],
        trusted_root: Some(KeySelector {
            namespace: testenv::CREDENTIALS_NAMESPACE.into(),
            name: root.to_owned(),
            key: None,
        }),
        provenance: Some(ProvenanceRule {
            signer: workflow_signer,
            builder_id: builder.to_owned(),
            source_repository: source.to_owned(),
        }),
        ..Verification::default()
    });
    module
}
