//! Every refusal, naming the field.

use super::*;

fn v1beta1_cluster_json(infrastructure_ref: &Value) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Cluster",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"infrastructureRef": infrastructure_ref},
    })
}

fn v1beta1_machine_pool_json(spec: &Value) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "MachinePool",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "clusterName": "c",
            "template": {"spec": spec},
        },
    })
}

fn refusal(object: Value, to: &str) -> String {
    convert(object, to, &versions).unwrap_err().to_string()
}

#[test]
fn a_core_group_reference_is_refused() {
    let object = v1beta1_cluster_json(&json!({"apiVersion": "v1", "kind": "Secret", "name": "s"}));
    assert_eq!(
        refusal(object, CLUSTER_API_VERSION),
        r#"spec.infrastructureRef.apiVersion: "v1" has no API group"#
    );
}

#[test]
fn a_reference_without_api_version_is_refused() {
    let object = v1beta1_cluster_json(&json!({"kind": "WasmCluster", "name": "c"}));
    assert_eq!(
        refusal(object, CLUSTER_API_VERSION),
        r#"spec.infrastructureRef.apiVersion: "" has no API group"#
    );
}

#[test]
fn an_api_version_with_two_slashes_is_refused() {
    let spec = json!({
        "clusterName": "c",
        "bootstrap": {"dataSecretName": "s"},
        "infrastructureRef": {"apiVersion": "a/b/c", "kind": "WasmMachinePool", "name": "p"},
    });
    assert_eq!(
        refusal(v1beta1_machine_pool_json(&spec), CLUSTER_API_VERSION),
        r#"spec.template.spec.infrastructureRef.apiVersion: "a/b/c" is not an API version such as group/version"#
    );
}

#[test]
fn a_reference_to_another_namespace_is_refused() {
    let object = v1beta1_cluster_json(&json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "WasmCluster",
        "name": "c",
        "namespace": "other",
    }));
    assert_eq!(
        refusal(object, CLUSTER_API_VERSION),
        r#"spec.infrastructureRef.namespace: "other" is not the Cluster's namespace "ns""#
    );
}

#[test]
fn a_reference_without_a_name_is_refused() {
    let spec = json!({
        "clusterName": "c",
        "bootstrap": {"configRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1alpha1", "kind": "WasmBootstrapConfig"}},
        "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "WasmMachinePool", "name": "p"},
    });
    assert_eq!(
        refusal(v1beta1_machine_pool_json(&spec), CLUSTER_API_VERSION),
        "spec.template.spec.bootstrap.configRef.name: must be set"
    );
}

#[test]
fn a_duration_go_cannot_read_is_refused() {
    let spec = json!({
        "clusterName": "c",
        "bootstrap": {"dataSecretName": "s"},
        "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "WasmMachinePool", "name": "p"},
        "nodeDeletionTimeout": "10",
    });
    assert_eq!(
        refusal(v1beta1_machine_pool_json(&spec), CLUSTER_API_VERSION),
        r#"spec.template.spec.nodeDeletionTimeout: "10" is not a duration such as "1h2m3s""#
    );
}

#[test]
fn an_unknown_referenced_kind_is_refused_with_its_cause() {
    let object = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"controlPlaneRef": {"apiGroup": "example.com", "kind": "Thing", "name": "t"}},
    });
    let error = convert(object, API_VERSION, &versions).unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"spec.controlPlaneRef: no version of Thing.example.com "t" to name in its apiVersion"#
    );
    assert_eq!(
        std::error::Error::source(&error).map(ToString::to_string),
        Some("no CustomResourceDefinition serves the kind".into())
    );
}

#[test]
fn a_contract_version_that_is_not_one_is_refused() {
    let cluster = Cluster::new(
        "c",
        ClusterSpec {
            infrastructure_ref: Some(ContractVersionedObjectReference::new(
                "infrastructure.cluster.x-k8s.io",
                "WasmCluster",
                "c",
            )),
            ..ClusterSpec::default()
        },
    );
    let slash = |_: &ContractVersionedObjectReference| -> Result<String, BoxError> {
        Ok("infrastructure.cluster.x-k8s.io/v1".into())
    };
    assert_eq!(
        cluster_to_v1beta1(&cluster, &slash)
            .unwrap_err()
            .to_string(),
        r#"spec.infrastructureRef: "infrastructure.cluster.x-k8s.io/v1", the version found for WasmCluster.infrastructure.cluster.x-k8s.io "c", is not a version"#
    );
}

#[test]
fn unreadable_conversion_data_is_refused() {
    let mut object = v1beta1_cluster_json(&json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "WasmCluster",
        "name": "c",
    }));
    object["metadata"]["annotations"] = json!({"cluster.x-k8s.io/conversion-data": "{"});
    assert_eq!(
        refusal(object, CLUSTER_API_VERSION),
        "annotation cluster.x-k8s.io/conversion-data: EOF while parsing an object at line 1 column 1"
    );
}

#[test]
fn other_kinds_and_versions_are_refused() {
    let wasm =
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "WasmCluster"});
    assert_eq!(
        refusal(wasm, API_VERSION),
        r#"cannot convert WasmCluster "infrastructure.cluster.x-k8s.io/v1alpha1" to "cluster.x-k8s.io/v1beta1""#
    );
    let cluster = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster"});
    assert_eq!(
        refusal(cluster, "cluster.x-k8s.io/v1alpha4"),
        r#"cannot convert Cluster "cluster.x-k8s.io/v1beta2" to "cluster.x-k8s.io/v1alpha4""#
    );
    assert_eq!(
        refusal(json!({"kind": "Cluster"}), API_VERSION),
        "apiVersion: must be set"
    );
}

#[test]
fn an_object_that_is_not_its_kind_is_refused_naming_the_field() {
    let spec = json!({
        "clusterName": "c",
        "bootstrap": {"dataSecretName": "s"},
        "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "WasmMachinePool", "name": "p"},
    });
    let mut object = v1beta1_machine_pool_json(&spec);
    object["spec"]["replicas"] = json!("three");
    assert_eq!(
        refusal(object, CLUSTER_API_VERSION),
        r#"spec.replicas: invalid type: string "three", expected i32"#
    );
}
