//! Generated objects of both versions, within what converts (upstream's
//! fuzzer rules).

use super::*;

pub(super) fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,5}"
}

pub(super) fn text() -> impl Strategy<Value = String> {
    "[A-Za-z0-9 ]{1,12}"
}

pub(super) fn time() -> impl Strategy<Value = Time> {
    (0i64..4_000_000_000).prop_map(|s| Time(Timestamp::from_second(s).unwrap()))
}

pub(super) fn namespace() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(Some("ns".to_owned())),
        Just(Some("other".to_owned())),
        Just(None)
    ]
}

pub(super) fn metadata(namespace: Option<String>) -> BoxedStrategy<ObjectMeta> {
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

pub(super) fn reference() -> impl Strategy<Value = ContractVersionedObjectReference> {
    (0..KINDS.len(), name()).prop_map(|(i, name)| {
        let (group, _, kind) = KINDS[i];
        ContractVersionedObjectReference::new(group, kind, &name)
    })
}

pub(super) fn v1beta1_reference(
    namespace: Option<String>,
) -> impl Strategy<Value = ObjectReference> {
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

pub(super) fn condition() -> impl Strategy<Value = MetaCondition> {
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

pub(super) fn v1beta1_condition() -> impl Strategy<Value = v1beta1::Condition> {
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

pub(super) fn failure() -> impl Strategy<Value = FailureFields> {
    (option::of(name()), option::of(text())).prop_map(|(failure_reason, failure_message)| {
        FailureFields {
            failure_reason,
            failure_message,
        }
    })
}

pub(super) fn counter() -> impl Strategy<Value = Option<i32>> {
    option::of(-2i32..9)
}

pub(super) fn status_versions() -> impl Strategy<Value = Vec<StatusVersion>> {
    vec((name(), 1i32..9), 0..3).prop_map(|versions| {
        versions
            .into_iter()
            .map(|(version, replicas)| StatusVersion { version, replicas })
            .collect()
    })
}

pub(super) fn workers() -> impl Strategy<Value = WorkersStatus> {
    (
        counter(),
        counter(),
        counter(),
        counter(),
        counter(),
        status_versions(),
    )
        .prop_map(
            |(
                desired_replicas,
                replicas,
                ready_replicas,
                available_replicas,
                up_to_date_replicas,
                versions,
            )| {
                WorkersStatus {
                    desired_replicas,
                    replicas,
                    ready_replicas,
                    available_replicas,
                    up_to_date_replicas,
                    versions,
                }
            },
        )
}

pub(super) fn cluster_network() -> impl Strategy<Value = ClusterNetwork> {
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

pub(super) fn endpoint() -> impl Strategy<Value = (String, i32)> {
    ("[a-z0-9.]{0,8}", prop_oneof![Just(0), 1i32..65536])
}

pub(super) fn cluster() -> BoxedStrategy<Cluster> {
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

pub(super) fn cluster_status() -> BoxedStrategy<ClusterStatus> {
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
pub(super) fn v1beta1_cluster() -> BoxedStrategy<v1beta1::Cluster> {
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

pub(super) fn v1beta1_cluster_status() -> BoxedStrategy<v1beta1::ClusterStatus> {
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

pub(super) fn template_metadata() -> impl Strategy<Value = TemplateMetadata> {
    (
        btree_map(name(), text(), 0..2),
        btree_map(name(), text(), 0..2),
    )
        .prop_map(|(labels, annotations)| TemplateMetadata {
            labels,
            annotations,
        })
}

pub(super) fn machine_pool() -> BoxedStrategy<MachinePool> {
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

pub(super) fn node_ref() -> impl Strategy<Value = ObjectReference> {
    (name(), name()).prop_map(|(name, uid)| ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name),
        uid: Some(uid),
        ..ObjectReference::default()
    })
}

pub(super) fn machine_pool_status() -> BoxedStrategy<MachinePoolStatus> {
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
        status_versions(),
    )
        .prop_map(
            |(
                conditions,
                initialization,
                node_refs,
                counters,
                phase,
                generation,
                deprecated,
                versions,
            )| {
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
                    versions,
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
pub(super) fn v1beta1_machine_pool() -> BoxedStrategy<v1beta1::MachinePool> {
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

pub(super) fn v1beta1_machine_pool_status() -> BoxedStrategy<v1beta1::MachinePoolStatus> {
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
