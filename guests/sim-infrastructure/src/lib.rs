//! capwasm infrastructure provider for the simulated cloud that
//! `capwasm sim-cloud` serves. Pools are provisioned through the cloud's
//! HTTP API (see [`api`]); the ordinal and request-token scheme that makes
//! repeated calls safe is in [`pool`]. Clusters need no cloud resources:
//! their endpoint and failure domains come from the config.
//!
//! `sim-infrastructure-v2` builds this same source as version 0.2.0 with
//! the `version-label` feature: the Nodes of the instances it creates carry
//! its version, so that a hot swap can be seen on the workload cluster.
#![no_std]

extern crate alloc;
// The unit tests run natively, with the standard library's harness.
#[cfg(test)]
extern crate std;

mod api;
mod config;
mod pool;

use alloc::borrow::Cow;
use alloc::collections::BTreeMap;

use capwasm_provider_sdk::infrastructure::{
    ClusterRequest, ClusterState, FailureDomain, InfrastructureProvider, NodeDescribeRequest,
    NodeShape, PoolDeleteRequest, PoolReconcileRequest, PoolRemoveRequest, PoolState,
};
use capwasm_provider_sdk::log;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{self, DeleteOutcome, Instance, ProviderError};

use api::{Client, CreateInstance, SimState};
use pool::Pool;

/// How long to wait for bootstrap data before asking again.
const BOOTSTRAP_RETRY_SECONDS: u32 = 15;

/// The Node label with the version of the provider that created the instance.
#[cfg(feature = "version-label")]
const VERSION_LABEL: &str = "sim.capwasm.dev/provider-version";

struct SimInfrastructure;

fn client<'a>(config: &config::Config, credentials: &'a [types::Credential]) -> Client<'a> {
    Client::new(config.region_url(), types::credential(credentials, "token"))
}

/// Labels for the Nodes of new instances: the config's, and with the
/// `version-label` feature this build's version (which wins).
fn node_labels(config: &config::Config) -> Cow<'_, BTreeMap<String, String>> {
    #[cfg(feature = "version-label")]
    {
        let mut labels = config.node_labels.clone();
        labels.insert(
            VERSION_LABEL.to_owned(),
            env!("CARGO_PKG_VERSION").to_owned(),
        );
        Cow::Owned(labels)
    }
    #[cfg(not(feature = "version-label"))]
    Cow::Borrowed(&config.node_labels)
}

/// The cloud's name for a pool: `<namespace>/<name>` of the pool object.
fn pool_name(object: &types::ObjectRef) -> String {
    format!("{}/{}", object.namespace, object.name)
}

impl InfrastructureProvider for SimInfrastructure {
    fn config_schema() -> String {
        include_str!("schema.json").to_owned()
    }

    fn reconcile_machine_pool(request: PoolReconcileRequest) -> Result<PoolState, ProviderError> {
        let config = config::parse(&request.config)?;
        let client = client(&config, &request.credentials);
        let pool_name = pool_name(&request.pool);
        let key = &request.idempotency_key;
        let listed = client.list(&pool_name)?;
        // Every create either adds an active instance or pins the ordinal of
        // one already listed, so this bounds the loop.
        let attempts = listed.len() + usize::try_from(request.replicas).unwrap_or(usize::MAX);
        let mut pool = Pool::new(key, &request.instances, listed);
        let node_labels = node_labels(&config);

        for _ in 0..=attempts {
            let Some(ordinal) = pool.next_ordinal(request.replicas) else {
                break;
            };
            let bootstrap = request.bootstrap_data.as_ref().ok_or_else(|| {
                ProviderError::retry_after(
                    BOOTSTRAP_RETRY_SECONDS,
                    format!(
                        "pool {pool_name} needs bootstrap data to create instances, and the bootstrap provider has not produced it yet"
                    ),
                )
            })?;
            let token = pool::request_token(key, ordinal);
            let failure_domain = match config.failure_domains.len() {
                0 => None,
                n => config
                    .failure_domains
                    .get(usize::try_from(ordinal).unwrap_or(0) % n)
                    .map(String::as_str),
            };
            let (instance, new) = client.create(&CreateInstance {
                request_token: &token,
                pool: &pool_name,
                bootstrap_data: CreateInstance::encode_bootstrap(&bootstrap.value),
                bootstrap_format: CreateInstance::format_name(bootstrap.format),
                failure_domain,
                node_labels: &node_labels,
                instance_type: config.instance_type.as_deref(),
                kubernetes_version: request.cluster.kubernetes_version.as_deref(),
            })?;
            let message = if new {
                "created instance"
            } else {
                "found the instance an earlier call created"
            };
            log::info(
                message,
                &[
                    ("pool", &pool_name),
                    ("instance", &instance.id),
                    ("ordinal", &ordinal.to_string()),
                ],
            );
            pool.created(ordinal, instance);
        }
        if pool.next_ordinal(request.replicas).is_some() {
            return Err(ProviderError::retry_after(
                config.poll_seconds,
                format!(
                    "pool {pool_name}: the cloud keeps answering creates with terminating instances"
                ),
            ));
        }

        for id in pool.surplus(request.replicas) {
            client.delete(&id)?;
            log::info(
                "terminating surplus instance",
                &[("pool", &pool_name), ("instance", &id)],
            );
            pool.terminating(&id);
        }
        Ok(pool.state(request.replicas, config.poll_seconds, |id| {
            config.provider_id(id)
        }))
    }

    fn delete_machine_pool(request: PoolDeleteRequest) -> Result<DeleteOutcome, ProviderError> {
        let config = config::parse(&request.config)?;
        let client = client(&config, &request.credentials);
        let pool_name = pool_name(&request.pool);
        let listed = client.list(&pool_name)?;
        if listed.is_empty() {
            return Ok(DeleteOutcome::Done);
        }
        for instance in listed.iter().filter(|i| i.state != SimState::Terminating) {
            client.delete(&instance.id)?;
            log::info(
                "terminating instance",
                &[("pool", &pool_name), ("instance", &instance.id)],
            );
        }
        Ok(DeleteOutcome::InProgress(config.poll_seconds))
    }

    fn remove_instances(request: PoolRemoveRequest) -> Result<PoolState, ProviderError> {
        let config = config::parse(&request.config)?;
        let client = client(&config, &request.credentials);
        let pool_name = pool_name(&request.pool);
        let listed = client.list(&pool_name)?;
        let mut pool = Pool::new(&request.idempotency_key, &request.instances, listed);
        for id in pool.active_of(&request.remove) {
            client.delete(&id)?;
            log::info(
                "terminating the instance whose Machine was deleted",
                &[("pool", &pool_name), ("instance", &id)],
            );
            pool.terminating(&id);
        }
        let left = u32::try_from(pool.active_count()).unwrap_or(u32::MAX);
        Ok(pool.state(left, config.poll_seconds, |id| config.provider_id(id)))
    }

    fn describe_nodes(request: NodeDescribeRequest) -> Result<NodeShape, ProviderError> {
        let config = config::parse(&request.config)?;
        let described =
            client(&config, &request.credentials).instance_type(&config.instance_type_url())?;
        Ok(NodeShape {
            capacity: described.capacity.into_iter().collect(),
            architecture: described.architecture,
            operating_system: described.operating_system,
        })
    }

    fn owns(provider_id: &str) -> bool {
        provider_id.starts_with("sim://")
    }

    fn provider_id(config: &str, instance: Instance) -> Result<String, ProviderError> {
        Ok(config::parse(config)?.provider_id(&instance.id))
    }

    fn reconcile_cluster(request: ClusterRequest) -> Result<ClusterState, ProviderError> {
        let config = config::parse(&request.config)?;
        let failure_domains = config
            .failure_domains
            .iter()
            .map(|name| FailureDomain {
                name: name.clone(),
                control_plane: true,
                attributes: vec![("region".to_owned(), config.region.clone())],
            })
            .collect();
        Ok(ClusterState {
            control_plane_endpoint: Some(config.control_plane_endpoint()),
            failure_domains,
            ready: true,
            requeue_after_seconds: None,
        })
    }
}

// Named explicitly: sim-infrastructure-v2 builds this source too.
capwasm_provider_sdk::export_infrastructure_provider!(
    SimInfrastructure,
    name = "sim-infrastructure"
);

#[cfg(test)]
mod tests {
    use serde_json::Value;

    #[test]
    fn schema_is_a_strict_json_schema_object() {
        let schema: Value =
            serde_json::from_str(include_str!("schema.json")).expect("schema is JSON");
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], serde_json::json!(["endpoint"]));
    }
}
