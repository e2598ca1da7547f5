//! The CRDs in `crds/`, installed in a real API server, enforce what upstream's
//! webhooks enforce wherever a CRD can say it (CEL rules, defaults, subresources).

use capwasm::api::providermodule::{
    AnyOf, ConfigMapSource, KeySelector, KeylessIdentity, Signer, Verification, World,
};
use capwasm::api::{MachinePool, ProviderModule};
use capwasm::testing::objects::{MachinePoolBuilder, ProviderModuleBuilder};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde::Deserialize as _;
use serde_json::json;
use testenv::TestEnv;

/// The MachinePools of a new namespace, and its name.
async fn pools() -> (Api<MachinePool>, String) {
    let env = TestEnv::shared().await.unwrap();
    let ns = env
        .management()
        .create_namespace("validation")
        .await
        .unwrap();
    (Api::namespaced(env.management().client().unwrap(), &ns), ns)
}

fn rejection(result: Result<impl std::fmt::Debug, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            status.message
        }
        other => panic!("expected a 422 rejection, got {other:?}"),
    }
}

#[tokio::test]
async fn machinepool_replicas_and_node_deletion_timeout_are_defaulted() {
    let (api, ns) = pools().await;
    let pool = MachinePoolBuilder::new(&ns, "defaults", "c")
        .no_replicas()
        .build();
    let created = api.create(&PostParams::default(), &pool).await.unwrap();
    assert_eq!(created.spec.replicas, Some(1));
    let deletion = created.spec.template.spec.deletion.unwrap();
    assert_eq!(deletion.node_deletion_timeout_seconds, Some(10));
}

#[tokio::test]
async fn machinepool_with_another_template_cluster_name_is_rejected() {
    let (api, ns) = pools().await;
    let pool = MachinePoolBuilder::new(&ns, "mismatch", "c")
        .template_cluster("d")
        .build();
    let message = rejection(api.create(&PostParams::default(), &pool).await);
    assert!(
        message.contains("spec.template.spec.clusterName must equal spec.clusterName"),
        "{message}"
    );
}

#[tokio::test]
async fn machinepool_without_bootstrap_source_is_rejected() {
    let (api, ns) = pools().await;
    let pool = MachinePoolBuilder::new(&ns, "no-bootstrap", "c")
        .no_bootstrap()
        .build();
    let message = rejection(api.create(&PostParams::default(), &pool).await);
    assert!(
        message.contains("expected either configRef or dataSecretName"),
        "{message}"
    );
}

#[tokio::test]
async fn machinepool_cluster_name_is_immutable() {
    let (api, ns) = pools().await;
    let pool = MachinePoolBuilder::new(&ns, "immutable", "c").build();
    api.create(&PostParams::default(), &pool).await.unwrap();
    let change = json!({"spec": {"clusterName": "d", "template": {"spec": {"clusterName": "d"}}}});
    let message = rejection(
        api.patch("immutable", &PatchParams::default(), &Patch::Merge(change))
            .await,
    );
    assert!(message.contains("clusterName is immutable"), "{message}");
}

#[tokio::test]
async fn machinepool_negative_replicas_are_rejected() {
    let (api, ns) = pools().await;
    let pool = MachinePoolBuilder::new(&ns, "negative", "c")
        .replicas(-1)
        .build();
    let message = rejection(api.create(&PostParams::default(), &pool).await);
    assert!(message.contains("spec.replicas"), "{message}");
}

#[tokio::test]
async fn machinepool_scales_through_the_scale_subresource() {
    let (api, ns) = pools().await;
    let pool = MachinePoolBuilder::new(&ns, "scaled", "c")
        .replicas(3)
        .build();
    api.create(&PostParams::default(), &pool).await.unwrap();
    let patch = json!({"spec": {"replicas": 5}});
    let scale = api
        .patch_scale("scaled", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(5));
    assert_eq!(api.get("scaled").await.unwrap().spec.replicas, Some(5));
}

#[tokio::test]
async fn provider_module_needs_exactly_one_source() {
    let env = TestEnv::shared().await.unwrap();
    let api: Api<ProviderModule> = Api::all(env.management().client().unwrap());
    let mut module =
        ProviderModuleBuilder::file("two-sources", World::Bootstrap, "/x.wasm").build();
    module.spec.source.config_map = Some(ConfigMapSource {
        namespace: "default".into(),
        name: "m".into(),
        key: None,
    });
    let message = rejection(api.create(&PostParams::default(), &module).await);
    assert!(
        message.contains("set exactly one of configMap, file and oci"),
        "{message}"
    );
    let mut none = ProviderModuleBuilder::file("no-source", World::Bootstrap, "/x.wasm").build();
    none.spec.source.file = None;
    let message = rejection(api.create(&PostParams::default(), &none).await);
    assert!(
        message.contains("set exactly one of configMap, file and oci"),
        "{message}"
    );
    // Signatures live in a registry: verification needs an OCI source.
    let verified_file = ProviderModuleBuilder::file("verified-file", World::Bootstrap, "/x.wasm")
        .verified_by(&["-----BEGIN PUBLIC KEY-----"])
        .build();
    let message = rejection(api.create(&PostParams::default(), &verified_file).await);
    assert!(message.contains("it needs source.oci"), "{message}");
    let mut two_keys = ProviderModuleBuilder::file("two-key-sources", World::Bootstrap, "/x.wasm")
        .oci("127.0.0.1:5000/p:v1")
        .verified_by(&["-----BEGIN PUBLIC KEY-----"])
        .build();
    if let Some(verification) = two_keys.spec.verification.as_mut() {
        verification.public_keys[0].config_map = Some(KeySelector {
            namespace: "default".into(),
            name: "keys".into(),
            key: None,
        });
    }
    let message = rejection(api.create(&PostParams::default(), &two_keys).await);
    assert!(
        message.contains("set exactly one of pem, secret, configMap and keyless"),
        "{message}"
    );
    // A policy asking more signers than it lists, publicKeys beside anyOf,
    // and a keyless signer with two subjects.
    let signer = |pem: &str| Signer {
        pem: Some(pem.into()),
        ..Signer::default()
    };
    let policies = [
        (
            Verification {
                any_of: Some(AnyOf {
                    minimum_matches: Some(3),
                    signers: vec![signer("a"), signer("b")],
                }),
                ..Verification::default()
            },
            "minimumMatches is more than the signers listed",
        ),
        (
            Verification {
                public_keys: vec![signer("a")],
                any_of: Some(AnyOf {
                    minimum_matches: None,
                    signers: vec![signer("b")],
                }),
                ..Verification::default()
            },
            "publicKeys is anyOf with minimumMatches 1",
        ),
        (
            Verification {
                all_of: vec![Signer {
                    keyless: Some(KeylessIdentity {
                        issuer: "https://issuer.example".into(),
                        subject: Some("a@example.com".into()),
                        subject_prefix: Some("a@".into()),
                    }),
                    ..Signer::default()
                }],
                ..Verification::default()
            },
            "set exactly one of subject and subjectPrefix",
        ),
    ];
    for (i, (verification, expected)) in policies.into_iter().enumerate() {
        let mut module =
            ProviderModuleBuilder::file(&format!("policy-{i}"), World::Bootstrap, "/x.wasm")
                .oci("127.0.0.1:5000/p:v1")
                .build();
        module.spec.verification = Some(verification);
        let message = rejection(api.create(&PostParams::default(), &module).await);
        assert!(message.contains(expected), "{message}");
    }

    let bad_digest = ProviderModuleBuilder::file("bad-digest", World::Bootstrap, "/x.wasm")
        .sha256("abc")
        .build();
    let message = rejection(api.create(&PostParams::default(), &bad_digest).await);
    assert!(message.contains("spec.sha256"), "{message}");
}

#[tokio::test]
async fn provider_module_limits_outside_their_range_are_refused_naming_field_and_range() {
    let env = TestEnv::shared().await.unwrap();
    let client = env.management().client().unwrap();
    // Untyped, so that values no field type can hold (negative) reach the API server.
    let api: Api<DynamicObject> = Api::all_with(client, &ApiResource::erase::<ProviderModule>(&()));
    let module =
        ProviderModuleBuilder::file("absurd-limits", World::Infrastructure, "/x.wasm").build();
    // Zero, negative and absurd: a TiB of memory, a day's deadline, 10^9 requests.
    let cases = [
        (
            "memoryMiB",
            json!(1_048_576),
            "should be less than or equal to 4096",
        ),
        (
            "memoryMiB",
            json!(0),
            "should be greater than or equal to 1",
        ),
        (
            "timeoutMillis",
            json!(86_400_000),
            "should be less than or equal to 600000",
        ),
        (
            "timeoutMillis",
            json!(-5),
            "should be greater than or equal to 10",
        ),
        (
            "httpRequestsPerCall",
            json!(1_000_000_000),
            "should be less than or equal to 10000",
        ),
        (
            "httpInFlightPerCall",
            json!(0),
            "should be greater than or equal to 1",
        ),
        (
            "maxOutputKiB",
            json!(1_000_000_000),
            "should be less than or equal to 65536",
        ),
    ];
    for (field, value, range) in cases {
        let mut object = serde_json::to_value(&module).unwrap();
        // One good limit beside the bad one: the create is refused whole (422).
        object["spec"]["limits"] = json!({ "maxLogLines": 10, field: value });
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        let message = rejection(api.create(&PostParams::default(), &object).await);
        assert!(
            message.contains(&format!("spec.limits.{field}")) && message.contains(range),
            "{field}={value}: {message}"
        );
    }
}

#[tokio::test]
async fn provider_module_request_auth_must_name_an_allowed_host_one_scheme_and_a_secret() {
    let env = TestEnv::shared().await.unwrap();
    let client = env.management().client().unwrap();
    let api: Api<DynamicObject> = Api::all_with(client, &ApiResource::erase::<ProviderModule>(&()));
    let module = ProviderModuleBuilder::file("auth", World::Infrastructure, "/x.wasm").build();
    let secret = json!({ "namespace": "capwasm-system", "name": "aws" });
    let sigv4 = json!({ "service": "ec2", "region": "us-east-1" });
    let cases = [
        (
            json!({ "allowedHosts": ["ec2.example"], "credentialsSecret": secret,
                    "requestAuth": [{ "host": "elsewhere.example", "awsSigV4": sigv4 }] }),
            "every requestAuth host must be one of allowedHosts",
        ),
        (
            json!({ "allowedHosts": ["ec2.example"], "credentialsSecret": secret,
                    "requestAuth": [{ "host": "ec2.example", "awsSigV4": sigv4,
                                      "bearer": { "tokenKey": "token" } }] }),
            "set exactly one of awsSigV4 and bearer",
        ),
        (
            json!({ "allowedHosts": ["ec2.example"],
                    "requestAuth": [{ "host": "ec2.example", "awsSigV4": sigv4 }] }),
            "requestAuth takes its keys from credentialsSecret",
        ),
        (
            json!({ "allowedHosts": ["ec2.example"], "credentialsSecret": secret,
                    "requestAuth": [{ "host": "ec2.example", "awsSigV4": sigv4 },
                                    { "host": "ec2.example", "bearer": { "tokenKey": "t" } }] }),
            "one requestAuth rule per host",
        ),
    ];
    for (capabilities, refusal) in cases {
        let mut object = serde_json::to_value(&module).unwrap();
        object["spec"]["capabilities"] = capabilities.clone();
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        let message = rejection(api.create(&PostParams::default(), &object).await);
        assert!(message.contains(refusal), "{capabilities}: {message}");
    }
    assert!(
        api.get_opt("auth").await.unwrap().is_none(),
        "nothing was stored"
    );
}

/// A namespace rule the API server cannot read as one is refused when it is
/// written, naming what is wrong; so is a providerID prefix with no scheme.
#[tokio::test]
async fn provider_module_namespace_rule_and_provider_id_prefix_must_be_well_formed() {
    let env = TestEnv::shared().await.unwrap();
    let client = env.management().client().unwrap();
    let api: Api<DynamicObject> = Api::all_with(client, &ApiResource::erase::<ProviderModule>(&()));
    let module = ProviderModuleBuilder::file("rules", World::Infrastructure, "/x.wasm").build();
    let expression = |operator: &str, values: serde_json::Value| json!({ "selector": { "matchExpressions": [{ "key": "tier", "operator": operator, "values": values }] } });
    let cases = [
        (
            "allowedNamespaces",
            json!({ "list": ["Not_A_Namespace"] }),
            "spec.allowedNamespaces.list[0]",
        ),
        (
            "allowedNamespaces",
            expression("Equals", json!(["gold"])),
            "supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\"",
        ),
        (
            "allowedNamespaces",
            expression("In", json!([])),
            "In and NotIn take values, Exists and DoesNotExist take none",
        ),
        (
            "allowedNamespaces",
            expression("Exists", json!(["gold"])),
            "In and NotIn take values, Exists and DoesNotExist take none",
        ),
        (
            "capabilities",
            json!({ "providerIDPrefix": "i-0abc" }),
            "spec.capabilities.providerIDPrefix",
        ),
    ];
    for (field, value, refusal) in cases {
        let mut object = serde_json::to_value(&module).unwrap();
        object["spec"][field] = value.clone();
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        let message = rejection(api.create(&PostParams::default(), &object).await);
        assert!(message.contains(refusal), "{value}: {message}");
    }
}

/// The YAML of the README's "A first Cluster and pool", as a reader would
/// apply it (a digest where it says to paste one, the test's namespace for
/// `team-a`).
fn readme_manifests(namespace: &str) -> Vec<DynamicObject> {
    let readme = include_str!("../README.md");
    let section = readme
        .split("\n## ")
        .find(|section| section.starts_with("A first Cluster and pool"))
        .unwrap_or_default();
    let mut objects = Vec::new();
    for block in section.split("```yaml\n").skip(1) {
        let yaml = block.split("```").next().unwrap_or_default();
        let yaml = yaml
            .replace("<digest push printed>", &"0".repeat(64))
            .replace("namespace: team-a", &format!("namespace: {namespace}"));
        for document in serde_yaml_ng::Deserializer::from_str(&yaml) {
            let value = serde_json::Value::deserialize(document).unwrap();
            objects.push(serde_json::from_value(value).unwrap());
        }
    }
    objects
}

#[tokio::test]
async fn the_readme_manifests_are_accepted_as_written() {
    let env = TestEnv::shared().await.unwrap();
    let client = env.management().client().unwrap();
    let ns = env.management().create_namespace("readme").await.unwrap();
    let objects = readme_manifests(&ns);
    let kinds: Vec<&str> = objects
        .iter()
        .filter_map(|o| o.types.as_ref().map(|t| t.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            "ProviderModule",
            "ProviderModule",
            "Cluster",
            "WasmCluster",
            "MachinePool",
            "WasmBootstrapConfig",
            "WasmMachinePool"
        ],
        "the README's manifests, in its order"
    );
    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    // Strict: a field the CRD does not know is an error, not dropped.
    let params = PatchParams::apply("readme").dry_run().validation_strict();
    for object in objects {
        let types = object.types.clone().unwrap();
        let gvk = kube::api::GroupVersionKind::try_from(&types).unwrap();
        let (resource, capabilities) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("discovery serves {gvk:?}"));
        let api: Api<DynamicObject> = match capabilities.scope {
            kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
            kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(client.clone(), &ns, &resource)
            }
        };
        let name = object.metadata.name.clone().unwrap();
        let applied = api.patch(&name, &params, &Patch::Apply(&object)).await;
        assert!(applied.is_ok(), "{} {name}: {applied:?}", types.kind);
    }
}

/// Every kind capwasm serves has a short name, and no other resource the API
/// server serves takes it (`kubectl get pc` listed PriorityClasses): read
/// from the server's own discovery, built-in kinds included.
#[tokio::test]
async fn every_kind_has_a_short_name_no_other_resource_takes() {
    let env = TestEnv::shared().await.unwrap();
    let client = env.management().client().unwrap();
    let mut lists = Vec::new();
    for version in client.list_core_api_versions().await.unwrap().versions {
        lists.push(client.list_core_api_resources(&version).await.unwrap());
    }
    for group in client.list_api_groups().await.unwrap().groups {
        for version in group.versions {
            lists.push(
                client
                    .list_api_group_resources(&version.group_version)
                    .await
                    .unwrap(),
            );
        }
    }
    // Short name → the resources (plural.group) that take it, one entry
    // per resource whatever its versions.
    let mut taken: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        std::collections::BTreeMap::new();
    for list in &lists {
        let group = list.group_version.rsplit_once('/').map_or("", |(g, _)| g);
        for resource in &list.resources {
            for short in resource.short_names.iter().flatten() {
                taken
                    .entry(short.clone())
                    .or_default()
                    .insert(format!("{}.{group}", resource.name));
            }
        }
    }
    let crds = capwasm::api::published_crds().unwrap();
    for crd in &crds {
        let name = format!("{}.{}", crd.spec.names.plural, crd.spec.group);
        let shorts = crd.spec.names.short_names.clone().unwrap_or_default();
        assert!(!shorts.is_empty(), "{name} has no short name");
        for short in shorts {
            let takers = taken.get(&short).cloned().unwrap_or_default();
            assert!(
                takers.contains(&name),
                "{name}'s short name {short} is not served: {takers:?}"
            );
            assert_eq!(takers.len(), 1, "short name {short} is taken by {takers:?}");
        }
    }
}
