//! Round trips over generated objects in both directions (as upstream's fuzz
//! conversion tests), worked examples, and every refusal.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition as MetaCondition, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::jiff::Timestamp;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::api::cluster::{
    ClusterDeprecatedStatus, ClusterInitializationStatus, ClusterNetwork, ClusterSpec,
    ClusterStatus, ClusterV1Beta1Status, FailureDomain, FailureFields, NetworkRanges,
    WorkersStatus,
};
use crate::api::machinepool::{
    Bootstrap, MachineDeletionSpec, MachinePoolDeprecatedStatus, MachinePoolInitializationStatus,
    MachinePoolSpec, MachinePoolStatus, MachinePoolV1Beta1Status, MachineSpec, MachineTemplateSpec,
    TemplateMetadata,
};
use crate::api::v1beta1::{self, Duration};
use crate::api::{ApiEndpoint, ContractVersionedObjectReference};

/// Referenced kinds and the version their CRD's contract label picks (upstream's test kinds).
const KINDS: [(&str, &str, &str); 4] = [
    (
        "controlplane.cluster.x-k8s.io",
        "v1beta4",
        "KubeadmControlPlane",
    ),
    (
        "controlplane.cluster.x-k8s.io",
        "v1beta7",
        "AWSManagedControlPlane",
    ),
    ("infrastructure.cluster.x-k8s.io", "v1alpha1", "WasmCluster"),
    (
        "infrastructure.cluster.x-k8s.io",
        "v1alpha1",
        "WasmMachinePool",
    ),
];

fn versions(reference: &ContractVersionedObjectReference) -> Result<String, BoxError> {
    KINDS
        .iter()
        .find(|(group, _, kind)| *group == reference.api_group && *kind == reference.kind)
        .map(|(_, version, _)| (*version).to_owned())
        .ok_or_else(|| "no CustomResourceDefinition serves the kind".into())
}

fn to_value<T: Serialize>(object: &T) -> Value {
    serde_json::to_value(object).unwrap()
}

// ---- generated objects --------------------------------------------------

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,5}"
}

fn text() -> impl Strategy<Value = String> {
    "[A-Za-z0-9 ]{1,12}"
}

fn time() -> impl Strategy<Value = Time> {
    (0i64..4_000_000_000).prop_map(|s| Time(Timestamp::from_second(s).unwrap()))
}

fn namespace() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(Some("ns".to_owned())),
        Just(Some("other".to_owned())),
        Just(None)
    ]
}

fn metadata(namespace: Option<String>) -> BoxedStrategy<ObjectMeta> {
    (
        name(),
        option::of(btree_map(name(), text(), 1..3)),
        option::of(btree_map("[a-z]{1,4}\\.io/[a-z]{1,4}", text(), 1..3)),
        option::of(vec(name(), 1..3)),
        option::of(1i64..9),
        option::of((name(), name())),
    )
        .prop_map(
            move |(name, labels, annotations, finalizers, generation, owner)| ObjectMeta {
                name: Some(name),
                namespace: namespace.clone(),
                labels,
                annotations,
                finalizers,
                generation,
                owner_references: owner.map(|(name, uid)| {
                    vec![OwnerReference {
                        api_version: "cluster.x-k8s.io/v1beta2".into(),
                        kind: "Cluster".into(),
                        name,
                        uid,
                        ..OwnerReference::default()
                    }]
                }),
                ..ObjectMeta::default()
            },
        )
        .boxed()
}

fn reference() -> impl Strategy<Value = ContractVersionedObjectReference> {
    (0..KINDS.len(), name()).prop_map(|(i, name)| {
        let (group, _, kind) = KINDS[i];
        ContractVersionedObjectReference::new(group, kind, &name)
    })
}

fn v1beta1_reference(namespace: Option<String>) -> impl Strategy<Value = ObjectReference> {
    (0..KINDS.len(), name()).prop_map(move |(i, name)| {
        let (group, version, kind) = KINDS[i];
        ObjectReference {
            api_version: Some(format!("{group}/{version}")),
            kind: Some(kind.into()),
            name: Some(name),
            namespace: namespace.clone(),
            ..ObjectReference::default()
        }
    })
}

fn condition() -> impl Strategy<Value = MetaCondition> {
    (
        name(),
        prop_oneof![Just("True"), Just("False"), Just("Unknown")],
        name(),
        text(),
        time(),
        option::of(1i64..9),
    )
        .prop_map(
            |(type_, status, reason, message, last_transition_time, observed_generation)| {
                MetaCondition {
                    type_,
                    status: status.into(),
                    reason,
                    message,
                    last_transition_time,
                    observed_generation,
                }
            },
        )
}

fn v1beta1_condition() -> impl Strategy<Value = v1beta1::Condition> {
    (
        name(),
        prop_oneof![Just("True"), Just("False"), Just("Unknown")],
        option::of(prop_oneof![Just("Error"), Just("Warning"), Just("Info")]),
        time(),
        option::of(name()),
        option::of(text()),
    )
        .prop_map(
            |(type_, status, severity, last_transition_time, reason, message)| v1beta1::Condition {
                type_,
                status: status.into(),
                severity: severity.map(Into::into),
                last_transition_time,
                reason,
                message,
            },
        )
}

fn failure() -> impl Strategy<Value = FailureFields> {
    (option::of(name()), option::of(text())).prop_map(|(failure_reason, failure_message)| {
        FailureFields {
            failure_reason,
            failure_message,
        }
    })
}

fn counter() -> impl Strategy<Value = Option<i32>> {
    option::of(-2i32..9)
}

fn workers() -> impl Strategy<Value = WorkersStatus> {
    (counter(), counter(), counter(), counter(), counter()).prop_map(
        |(desired_replicas, replicas, ready_replicas, available_replicas, up_to_date_replicas)| {
            WorkersStatus {
                desired_replicas,
                replicas,
                ready_replicas,
                available_replicas,
                up_to_date_replicas,
            }
        },
    )
}

fn cluster_network() -> impl Strategy<Value = ClusterNetwork> {
    let ranges = || {
        option::of(vec("10\\.[0-9]\\.0\\.0/16", 0..3))
            .prop_map(|blocks| blocks.map(|cidr_blocks| NetworkRanges { cidr_blocks }))
    };
    (
        option::of(1i32..65536),
        ranges(),
        ranges(),
        option::of(name()),
    )
        .prop_map(
            |(api_server_port, services, pods, service_domain)| ClusterNetwork {
                api_server_port,
                services,
                pods,
                service_domain,
            },
        )
}

fn endpoint() -> impl Strategy<Value = (String, i32)> {
    ("[a-z0-9.]{0,8}", prop_oneof![Just(0), 1i32..65536])
}

fn cluster() -> BoxedStrategy<Cluster> {
    namespace()
        .prop_flat_map(|namespace| {
            let spec = (
                option::of(any::<bool>()),
                option::of(cluster_network()),
                option::of(endpoint()),
                option::of(reference()),
                option::of(reference()),
            )
                .prop_map(
                    |(paused, network, endpoint, control_plane, infrastructure)| ClusterSpec {
                        paused,
                        cluster_network: network,
                        control_plane_endpoint: endpoint
                            .map(|(host, port)| ApiEndpoint { host, port }),
                        control_plane_ref: control_plane,
                        infrastructure_ref: infrastructure,
                    },
                );
            (metadata(namespace), spec, option::of(cluster_status())).prop_map(
                |(metadata, spec, status)| Cluster {
                    metadata,
                    spec,
                    status,
                },
            )
        })
        .boxed()
}

fn cluster_status() -> BoxedStrategy<ClusterStatus> {
    let domain = (
        name(),
        option::of(any::<bool>()),
        btree_map(name(), name(), 0..2),
    )
        .prop_map(|(name, control_plane, attributes)| FailureDomain {
            name,
            control_plane,
            attributes,
        });
    let workers = workers();
    let deprecated = option::of(option::of((vec(v1beta1_condition(), 0..3), failure()))).prop_map(
        |deprecated| {
            deprecated.map(|v1beta1| ClusterDeprecatedStatus {
                v1beta1: v1beta1.map(|(conditions, failure)| ClusterV1Beta1Status {
                    conditions,
                    failure,
                }),
            })
        },
    );
    (
        vec(condition(), 0..3),
        option::of((option::of(any::<bool>()), option::of(any::<bool>()))),
        vec(domain, 0..4),
        option::of(workers),
        option::of(name()),
        option::of(1i64..9),
        deprecated,
    )
        .prop_map(
            |(
                conditions,
                initialization,
                failure_domains,
                workers,
                phase,
                generation,
                deprecated,
            )| {
                ClusterStatus {
                    conditions,
                    initialization: initialization.map(|(infrastructure, control_plane)| {
                        ClusterInitializationStatus {
                            infrastructure_provisioned: infrastructure,
                            control_plane_initialized: control_plane,
                        }
                    }),
                    failure_domains,
                    workers,
                    phase,
                    observed_generation: generation,
                    deprecated,
                }
            },
        )
        .boxed()
}

/// v1beta1 Clusters that convert: references of known kinds in the
/// Cluster's namespace, no empty `status.v1beta2` (upstream's fuzzer rules).
fn v1beta1_cluster() -> BoxedStrategy<v1beta1::Cluster> {
    namespace()
        .prop_flat_map(|namespace| {
            let spec = (
                option::of(any::<bool>()),
                option::of(cluster_network()),
                option::of(endpoint()),
                option::of(v1beta1_reference(namespace.clone())),
                option::of(v1beta1_reference(namespace.clone())),
            )
                .prop_map(
                    |(paused, network, endpoint, control_plane, infrastructure)| {
                        v1beta1::ClusterSpec {
                            paused,
                            cluster_network: network,
                            control_plane_endpoint: endpoint
                                .map(|(host, port)| v1beta1::ApiEndpoint { host, port }),
                            control_plane_ref: control_plane,
                            infrastructure_ref: infrastructure,
                        }
                    },
                );
            (
                metadata(namespace),
                spec,
                option::of(v1beta1_cluster_status()),
            )
                .prop_map(|(metadata, spec, status)| v1beta1::Cluster {
                    metadata,
                    spec,
                    status,
                })
        })
        .boxed()
}

fn v1beta1_cluster_status() -> BoxedStrategy<v1beta1::ClusterStatus> {
    let domain = (option::of(any::<bool>()), btree_map(name(), name(), 0..2)).prop_map(
        |(control_plane, attributes)| v1beta1::FailureDomainSpec {
            control_plane,
            attributes,
        },
    );
    let workers = workers();
    let v1beta2 =
        (vec(condition(), 0..3), option::of(workers)).prop_map(|(conditions, workers)| {
            (!conditions.is_empty() || workers.is_some()).then_some(v1beta1::ClusterV1Beta2Status {
                conditions,
                workers,
            })
        });
    (
        btree_map(name(), domain, 0..3),
        failure(),
        option::of(name()),
        any::<(bool, bool)>(),
        vec(v1beta1_condition(), 0..3),
        option::of(1i64..9),
        v1beta2,
    )
        .prop_map(
            |(failure_domains, failure, phase, ready, conditions, generation, v1beta2)| {
                v1beta1::ClusterStatus {
                    failure_domains,
                    failure,
                    phase,
                    infrastructure_ready: ready.0,
                    control_plane_ready: ready.1,
                    conditions,
                    observed_generation: generation,
                    v1beta2,
                }
            },
        )
        .boxed()
}

fn template_metadata() -> impl Strategy<Value = TemplateMetadata> {
    (
        btree_map(name(), text(), 0..2),
        btree_map(name(), text(), 0..2),
    )
        .prop_map(|(labels, annotations)| TemplateMetadata {
            labels,
            annotations,
        })
}

fn machine_pool() -> BoxedStrategy<MachinePool> {
    namespace()
        .prop_flat_map(|namespace| {
            let machine = (
                name(),
                option::of(reference()),
                option::of(name()),
                reference(),
                option::of("v1\\.3[0-9]\\.[0-9]"),
                option::of(0i32..600),
                option::of(option::of(any::<i32>())),
            )
                .prop_map(
                    |(
                        cluster_name,
                        config_ref,
                        secret,
                        infrastructure_ref,
                        version,
                        min_ready,
                        deletion,
                    )| {
                        MachineSpec {
                            cluster_name,
                            bootstrap: Bootstrap {
                                config_ref,
                                data_secret_name: secret,
                            },
                            infrastructure_ref,
                            version,
                            min_ready_seconds: min_ready,
                            deletion: deletion.map(|seconds| MachineDeletionSpec {
                                node_deletion_timeout_seconds: seconds,
                            }),
                        }
                    },
                );
            let spec = (
                machine,
                option::of(0i32..9),
                option::of(template_metadata()),
                vec(name(), 0..3),
                vec(name(), 0..3),
            )
                .prop_map(
                    |(machine, replicas, template_metadata, ids, domains)| MachinePoolSpec {
                        cluster_name: machine.cluster_name.clone(),
                        replicas,
                        template: MachineTemplateSpec {
                            metadata: template_metadata,
                            spec: machine,
                        },
                        provider_id_list: ids,
                        failure_domains: domains,
                    },
                );
            (metadata(namespace), spec, option::of(machine_pool_status())).prop_map(
                |(metadata, spec, status)| MachinePool {
                    metadata,
                    spec,
                    status,
                },
            )
        })
        .boxed()
}

fn node_ref() -> impl Strategy<Value = ObjectReference> {
    (name(), name()).prop_map(|(name, uid)| ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name),
        uid: Some(uid),
        ..ObjectReference::default()
    })
}

fn machine_pool_status() -> BoxedStrategy<MachinePoolStatus> {
    let deprecated = option::of(option::of((
        vec(v1beta1_condition(), 0..3),
        failure(),
        counter(),
        counter(),
        counter(),
    )))
    .prop_map(|deprecated| {
        deprecated.map(|v1beta1| MachinePoolDeprecatedStatus {
            v1beta1: v1beta1.map(|(conditions, failure, ready, available, unavailable)| {
                MachinePoolV1Beta1Status {
                    conditions,
                    failure,
                    ready_replicas: ready,
                    available_replicas: available,
                    unavailable_replicas: unavailable,
                }
            }),
        })
    });
    (
        vec(condition(), 0..3),
        option::of((option::of(any::<bool>()), option::of(any::<bool>()))),
        vec(node_ref(), 0..3),
        (counter(), counter(), counter(), counter()),
        option::of(name()),
        option::of(1i64..9),
        deprecated,
    )
        .prop_map(
            |(conditions, initialization, node_refs, counters, phase, generation, deprecated)| {
                MachinePoolStatus {
                    conditions,
                    initialization: initialization.map(|(bootstrap, infrastructure)| {
                        MachinePoolInitializationStatus {
                            bootstrap_data_secret_created: bootstrap,
                            infrastructure_provisioned: infrastructure,
                        }
                    }),
                    node_refs,
                    replicas: counters.0,
                    ready_replicas: counters.1,
                    available_replicas: counters.2,
                    up_to_date_replicas: counters.3,
                    phase,
                    observed_generation: generation,
                    deprecated,
                }
            },
        )
        .boxed()
}

/// v1beta1 MachinePools that convert: references of known kinds in the
/// pool's namespace, timeouts in whole seconds, no empty `status.v1beta2`.
fn v1beta1_machine_pool() -> BoxedStrategy<v1beta1::MachinePool> {
    namespace()
        .prop_flat_map(|namespace| {
            let machine = (
                name(),
                option::of(v1beta1_reference(namespace.clone())),
                option::of(name()),
                v1beta1_reference(namespace.clone()),
                option::of("v1\\.3[0-9]\\.[0-9]"),
                option::of(any::<i32>()),
            )
                .prop_map(
                    |(cluster_name, config_ref, secret, infrastructure_ref, version, timeout)| {
                        v1beta1::MachineSpec {
                            cluster_name,
                            bootstrap: v1beta1::Bootstrap {
                                config_ref,
                                data_secret_name: secret,
                            },
                            infrastructure_ref,
                            version,
                            node_deletion_timeout: timeout.map(Duration::from_seconds),
                        }
                    },
                );
            let spec = (
                machine,
                option::of(0i32..9),
                option::of(template_metadata()),
                option::of(0i32..600),
                vec(name(), 0..3),
                vec(name(), 0..3),
            )
                .prop_map(
                    |(machine, replicas, template_metadata, min_ready, ids, domains)| {
                        v1beta1::MachinePoolSpec {
                            cluster_name: machine.cluster_name.clone(),
                            replicas,
                            template: v1beta1::MachineTemplateSpec {
                                metadata: template_metadata,
                                spec: machine,
                            },
                            min_ready_seconds: min_ready,
                            provider_id_list: ids,
                            failure_domains: domains,
                        }
                    },
                );
            (
                metadata(namespace),
                spec,
                option::of(v1beta1_machine_pool_status()),
            )
                .prop_map(|(metadata, spec, status)| v1beta1::MachinePool {
                    metadata,
                    spec,
                    status,
                })
        })
        .boxed()
}

fn v1beta1_machine_pool_status() -> BoxedStrategy<v1beta1::MachinePoolStatus> {
    let v1beta2 = (vec(condition(), 0..3), counter(), counter(), counter()).prop_map(
        |(conditions, ready, available, up_to_date)| {
            let status = v1beta1::MachinePoolV1Beta2Status {
                conditions,
                ready_replicas: ready,
                available_replicas: available,
                up_to_date_replicas: up_to_date,
            };
            (status != v1beta1::MachinePoolV1Beta2Status::default()).then_some(status)
        },
    );
    (
        vec(node_ref(), 0..3),
        (counter(), counter(), counter(), counter()),
        failure(),
        option::of(name()),
        any::<(bool, bool)>(),
        option::of(1i64..9),
        vec(v1beta1_condition(), 0..3),
        v1beta2,
    )
        .prop_map(
            |(node_refs, counters, failure, phase, ready, generation, conditions, v1beta2)| {
                v1beta1::MachinePoolStatus {
                    node_refs,
                    replicas: counters.0,
                    ready_replicas: counters.1,
                    available_replicas: counters.2,
                    unavailable_replicas: counters.3,
                    failure,
                    phase,
                    bootstrap_ready: ready.0,
                    infrastructure_ready: ready.1,
                    observed_generation: generation,
                    conditions,
                    v1beta2,
                }
            },
        )
        .boxed()
}

/// `object` converted to the other version and back, typed and as JSON
/// through [`convert`] (to `there`, then `back`): the same each way.
fn there_and_back<A: Serialize, B: Serialize>(
    object: &A,
    to: impl Fn(&A) -> Result<B, ConversionError>,
    from: impl Fn(&B) -> Result<A, ConversionError>,
    there: &str,
    back: &str,
) -> Result<(), TestCaseError> {
    let other = to(object).unwrap();
    prop_assert_eq!(to_value(&from(&other).unwrap()), to_value(object));
    let json = convert(to_value(object), there, &versions).unwrap();
    prop_assert_eq!(&json, &to_value(&other));
    prop_assert_eq!(convert(json, back, &versions).unwrap(), to_value(object));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn cluster_v1beta2_to_v1beta1_and_back_is_the_same(cluster in cluster()) {
        there_and_back(&cluster, |c| cluster_to_v1beta1(c, &versions), cluster_from_v1beta1, API_VERSION, CLUSTER_API_VERSION)?;
    }

    #[test]
    fn cluster_v1beta1_to_v1beta2_and_back_is_the_same(cluster in v1beta1_cluster()) {
        there_and_back(&cluster, cluster_from_v1beta1, |c| cluster_to_v1beta1(c, &versions), CLUSTER_API_VERSION, API_VERSION)?;
    }

    #[test]
    fn machine_pool_v1beta2_to_v1beta1_and_back_is_the_same(pool in machine_pool()) {
        there_and_back(&pool, |p| machine_pool_to_v1beta1(p, &versions), machine_pool_from_v1beta1, API_VERSION, CLUSTER_API_VERSION)?;
    }

    #[test]
    fn machine_pool_v1beta1_to_v1beta2_and_back_is_the_same(pool in v1beta1_machine_pool()) {
        there_and_back(&pool, machine_pool_from_v1beta1, |p| machine_pool_to_v1beta1(p, &versions), CLUSTER_API_VERSION, API_VERSION)?;
    }

    /// What a v1beta1 client changes wins over the kept v1beta2 values.
    #[test]
    fn v1beta1_edits_win_over_kept_data(pool in machine_pool(), bootstrap in any::<bool>(), infrastructure in any::<bool>()) {
        let mut old = machine_pool_to_v1beta1(&pool, &versions).unwrap();
        let status = old.status.get_or_insert_with(Default::default);
        status.bootstrap_ready = bootstrap;
        status.infrastructure_ready = infrastructure;
        status.ready_replicas = Some(7);
        old.spec.template.spec.node_deletion_timeout = Some(Duration::from_seconds(42));
        let new = machine_pool_from_v1beta1(&old).unwrap();
        let init = new.status.as_ref().and_then(|s| s.initialization.clone()).unwrap_or_default();
        prop_assert_eq!(init.bootstrap_data_secret_created == Some(true), bootstrap);
        prop_assert_eq!(init.infrastructure_provisioned == Some(true), infrastructure);
        let deprecated = new.status.and_then(|s| s.deprecated).and_then(|d| d.v1beta1);
        prop_assert_eq!(deprecated.and_then(|v| v.ready_replicas), Some(7));
        prop_assert_eq!(new.spec.template.spec.deletion.and_then(|d| d.node_deletion_timeout_seconds), Some(42));
    }
}

// ---- worked examples ----------------------------------------------------

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
        crate::api::annotations::CONVERSION_DATA.to_owned(),
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

// ---- refusals -----------------------------------------------------------

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
