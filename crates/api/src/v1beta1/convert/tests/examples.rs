//! Worked examples: objects as clients write them, what the annotation
//! keeps, metadata, references, durations.

use super::*;

/// A v1beta1 Cluster as a Go client writes it (empty endpoint, both flags).
#[test]
fn a_go_written_v1beta1_cluster_converts_as_upstream() {
    let object = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Cluster",
        "metadata": {"name": "c", "namespace": "ns", "labels": {"a": "b"}},
        "spec": {
            "controlPlaneEndpoint": {"host": "", "port": 0},
            "infrastructureRef": {
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
                "kind": "WasmCluster",
                "name": "c",
                "namespace": "ns",
            },
        },
        "status": {
            "infrastructureReady": true,
            "controlPlaneReady": false,
            "failureDomains": {"b": {"controlPlane": true}, "a": {}},
            "conditions": [{"type": "Ready", "status": "False", "severity": "Info", "lastTransitionTime": "2024-01-02T03:04:05Z", "reason": "Waiting"}],
            "v1beta2": {"conditions": [{"type": "Available", "status": "False", "lastTransitionTime": "2024-01-02T03:04:05Z", "reason": "NotReady", "message": ""}]},
        },
    });
    let converted = convert(object, CLUSTER_API_VERSION, &versions).unwrap();
    assert_eq!(
        converted,
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Cluster",
            "metadata": {"name": "c", "namespace": "ns", "labels": {"a": "b"}},
            "spec": {
                "controlPlaneEndpoint": {},
                "infrastructureRef": {
                    "apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "WasmCluster",
                    "name": "c",
                },
            },
            "status": {
                "conditions": [{"type": "Available", "status": "False", "lastTransitionTime": "2024-01-02T03:04:05Z", "reason": "NotReady", "message": ""}],
                "initialization": {"infrastructureProvisioned": true},
                "failureDomains": [{"name": "a"}, {"name": "b", "controlPlane": true}],
                "deprecated": {"v1beta1": {"conditions": [{"type": "Ready", "status": "False", "severity": "Info", "lastTransitionTime": "2024-01-02T03:04:05Z", "reason": "Waiting"}]}},
            },
        })
    );
}

/// What v1beta1 cannot hold goes to the annotation, under v1beta2's paths.
#[test]
fn a_v1beta2_machine_pool_keeps_what_v1beta1_cannot_hold_in_the_annotation() {
    let object = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "MachinePool",
        "metadata": {"name": "p", "namespace": "ns", "annotations": {"keep": "me"}},
        "spec": {
            "clusterName": "c",
            "replicas": 3,
            "template": {"spec": {
                "clusterName": "c",
                "bootstrap": {"dataSecretName": "s"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "WasmMachinePool", "name": "p"},
                "minReadySeconds": 5,
                "deletion": {},
            }},
        },
        "status": {
            "initialization": {"bootstrapDataSecretCreated": true, "infrastructureProvisioned": false},
            "replicas": 3,
            "readyReplicas": 2,
            "deprecated": {"v1beta1": {"readyReplicas": 1, "unavailableReplicas": 2, "failureReason": "Boom"}},
        },
    });
    let converted = convert(object.clone(), API_VERSION, &versions).unwrap();
    let data = r#"{"spec":{"template":{"spec":{"deletion":{}}}},"status":{"initialization":{"bootstrapDataSecretCreated":true,"infrastructureProvisioned":false}}}"#;
    assert_eq!(
        converted,
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachinePool",
            "metadata": {"name": "p", "namespace": "ns", "annotations": {"keep": "me", "cluster.x-k8s.io/conversion-data": data}},
            "spec": {
                "clusterName": "c",
                "replicas": 3,
                "minReadySeconds": 5,
                "template": {"spec": {
                    "clusterName": "c",
                    "bootstrap": {"dataSecretName": "s"},
                    "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "WasmMachinePool", "name": "p", "namespace": "ns"},
                }},
            },
            "status": {
                "replicas": 3,
                "readyReplicas": 1,
                "unavailableReplicas": 2,
                "failureReason": "Boom",
                "bootstrapReady": true,
                "infrastructureReady": false,
                "v1beta2": {"readyReplicas": 2},
            },
        })
    );
    assert_eq!(
        convert(converted, CLUSTER_API_VERSION, &versions).unwrap(),
        object
    );
}

#[test]
fn the_timeout_moves_between_seconds_and_a_duration() {
    let mut pool = v1beta1::MachinePool::new("p", v1beta1::MachinePoolSpec::default());
    pool.metadata.namespace = Some("ns".into());
    pool.spec.template.spec.infrastructure_ref = ObjectReference {
        api_version: Some("infrastructure.cluster.x-k8s.io/v1alpha1".into()),
        kind: Some("WasmMachinePool".into()),
        name: Some("p".into()),
        ..ObjectReference::default()
    };
    pool.spec.template.spec.node_deletion_timeout = Some(Duration::parse("1m30.9s").unwrap());
    let new = machine_pool_from_v1beta1(&pool).unwrap();
    assert_eq!(
        new.spec.template.spec.deletion,
        Some(MachineDeletionSpec {
            node_deletion_timeout_seconds: Some(90)
        })
    );
    let old = to_value(&machine_pool_to_v1beta1(&new, &versions).unwrap());
    assert_eq!(
        old["spec"]["template"]["spec"]["nodeDeletionTimeout"],
        "1m30s"
    );
}

#[test]
fn metadata_is_kept_as_it_is() {
    let metadata = json!({
        "name": "c",
        "namespace": "ns",
        "uid": "0b4c",
        "resourceVersion": "42",
        "generation": 3,
        "creationTimestamp": "2024-01-02T03:04:05Z",
        "labels": {"cluster.x-k8s.io/cluster-name": "c"},
        "annotations": {"cluster.x-k8s.io/paused": ""},
        "finalizers": ["cluster.cluster.x-k8s.io"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "1"}],
        "managedFields": [{"manager": "capwasm", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
    });
    let object = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": metadata,
        "spec": {"paused": false},
    });
    let old = convert(object.clone(), API_VERSION, &versions).unwrap();
    assert_eq!(old["metadata"], metadata);
    assert_eq!(old["spec"], json!({"paused": false}));
    assert_eq!(
        convert(old, CLUSTER_API_VERSION, &versions).unwrap(),
        object
    );
}

#[test]
fn kept_data_that_no_longer_agrees_is_ignored() {
    let mut cluster = v1beta1::Cluster::new("c", v1beta1::ClusterSpec::default());
    cluster.metadata.annotations = Some(BTreeMap::from([(
        crate::annotations::CONVERSION_DATA.to_owned(),
        r#"{"status":{"initialization":{"infrastructureProvisioned":false},"failureDomains":[{"name":"gone"}]}}"#.to_owned(),
    )]));
    cluster.status = Some(v1beta1::ClusterStatus {
        infrastructure_ready: true,
        ..v1beta1::ClusterStatus::default()
    });
    let new = cluster_from_v1beta1(&cluster).unwrap();
    assert_eq!(new.metadata.annotations, None);
    let status = new.status.unwrap();
    assert_eq!(
        status.initialization,
        Some(ClusterInitializationStatus {
            infrastructure_provisioned: Some(true),
            control_plane_initialized: None,
        })
    );
    assert_eq!(status.failure_domains, vec![]);
}

#[test]
fn an_object_at_the_desired_version_is_returned_unchanged() {
    let object = json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachinePool", "spec": "not even a spec"});
    assert_eq!(
        convert(object.clone(), API_VERSION, &versions).unwrap(),
        object
    );
}

#[test]
fn refs_map_the_api_version_to_its_group_and_back() {
    let old = ObjectReference {
        api_version: Some("infrastructure.cluster.x-k8s.io/v1beta1".into()),
        kind: Some("WasmCluster".into()),
        name: Some("c".into()),
        namespace: Some("ns".into()),
        uid: Some("dropped".into()),
        resource_version: Some("dropped".into()),
        field_path: Some("dropped".into()),
    };
    let new = refs::from_v1beta1(&old, "spec.infrastructureRef", "Cluster", Some("ns")).unwrap();
    assert_eq!(
        new,
        ContractVersionedObjectReference::new(
            "infrastructure.cluster.x-k8s.io",
            "WasmCluster",
            "c"
        )
    );
    // No namespace: the referring object's.
    let same = ObjectReference {
        namespace: None,
        ..old.clone()
    };
    assert_eq!(
        refs::from_v1beta1(&same, "spec.infrastructureRef", "Cluster", Some("ns")).unwrap(),
        new
    );
    // Back: the version the contract picks, the object's namespace.
    assert_eq!(
        refs::to_v1beta1(&new, "spec.infrastructureRef", Some("ns"), &versions).unwrap(),
        ObjectReference {
            api_version: Some("infrastructure.cluster.x-k8s.io/v1alpha1".into()),
            kind: Some("WasmCluster".into()),
            name: Some("c".into()),
            namespace: Some("ns".into()),
            ..ObjectReference::default()
        }
    );
}

#[test]
fn deprecated_failure_fields_keep_their_shape() {
    let status = ClusterDeprecatedStatus {
        v1beta1: Some(ClusterV1Beta1Status {
            conditions: vec![],
            failure: FailureFields {
                failure_reason: Some("R".into()),
                failure_message: Some("M".into()),
            },
        }),
    };
    assert_eq!(
        to_value(&status),
        json!({"v1beta1": {"failureReason": "R", "failureMessage": "M"}})
    );
}
