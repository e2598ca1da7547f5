//! capwasm infrastructure provider for Amazon EC2, over the EC2 Query API.
//!
//! A cluster gets a VPC, a subnet in each configured zone and a security
//! group ([`cluster`]); a machine pool gets instances in them ([`pool`],
//! [`instances`]). Everything is tagged with its cluster when created and
//! found again by tag before anything is created ([`tags`]): the tags, not
//! the host's records, say what exists, so a call repeated after a crash
//! at any point creates nothing twice.
//!
//! The provider never holds AWS keys: the host signs its requests (the
//! ProviderModule's `requestAuth`), and [`ec2`] sends them unsigned.
#![no_std]

extern crate alloc;
// The unit tests run natively, with the standard library's harness.
#[cfg(test)]
extern crate std;

mod cidr;
mod cluster;
mod config;
mod ec2;
mod instances;
mod pool;
mod tags;

use capwasm_provider_sdk::infrastructure::{
    ClusterRequest, ClusterState, InfrastructureProvider, NodeDescribeRequest, NodeShape,
    PoolDeleteRequest, PoolReconcileRequest, PoolRemoveRequest, PoolState,
};
use capwasm_provider_sdk::log;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{self, DeleteOutcome, Instance, ProviderError};

use cluster::Cluster;
use ec2::Client;
use instances::{Launch, Network};
use pool::Pool;

/// How soon to look again while instances start or terminate.
const POLL_SECONDS: u32 = 5;
/// Instances one call launches; the pool's state asks for the next call
/// for the rest. Each launch takes EC2 about a second, and a call has a
/// deadline (10 s by default) and a budget of requests (100).
const MAX_LAUNCHES_PER_CALL: usize = 8;
/// How long to wait for bootstrap data before asking again.
const BOOTSTRAP_RETRY_SECONDS: u32 = 15;
/// The prefix of every providerID this provider makes.
const PROVIDER_ID_PREFIX: &str = "aws:///";

struct AwsEc2;

/// `<namespace>/<name>` of a pool object, as the logs name it.
fn pool_name(pool: &types::ObjectRef) -> String {
    format!("{}/{}", pool.namespace, pool.name)
}

fn client(config: &config::Config) -> Client {
    Client::new(config.url(), config.host())
}

impl InfrastructureProvider for AwsEc2 {
    fn config_schema() -> String {
        include_str!("schema.json").to_owned()
    }

    fn reconcile_cluster(request: ClusterRequest) -> Result<ClusterState, ProviderError> {
        let config = config::parse(&request.config)?;
        let tag = tags::cluster_value(&request.cluster);
        let cluster = Cluster {
            tag: &tag,
            namespace: &request.cluster.namespace,
            name: &request.cluster.name,
        };
        cluster::reconcile(&client(&config), &config, &cluster)
    }

    fn delete_cluster(request: ClusterRequest) -> Result<DeleteOutcome, ProviderError> {
        let config = config::parse(&request.config)?;
        let tag = tags::cluster_value(&request.cluster);
        let cluster = Cluster {
            tag: &tag,
            namespace: &request.cluster.namespace,
            name: &request.cluster.name,
        };
        cluster::delete(&client(&config), &cluster)
    }

    fn reconcile_machine_pool(request: PoolReconcileRequest) -> Result<PoolState, ProviderError> {
        let config = config::parse(&request.config)?;
        let client = client(&config);
        let key = &request.idempotency_key;
        let cluster = tags::cluster_value(&request.cluster);
        let pool_name = pool_name(&request.pool);
        // The tags, not request.instances, say what exists: an instance
        // launched just before a crash is listed here all the same.
        let mut pool = Pool::new(key, instances::list(&client, tags::POOL, key)?);

        let missing = pool.missing(request.replicas);
        if !missing.is_empty() {
            let bootstrap = request.bootstrap_data.as_ref().ok_or_else(|| {
                ProviderError::retry_after(
                    BOOTSTRAP_RETRY_SECONDS,
                    format!(
                        "pool {pool_name} needs bootstrap data to launch instances, and the bootstrap provider has not produced it yet"
                    ),
                )
            })?;
            instances::check_image(&client, &config)?;
            let network = Network::find(&client, &config, &cluster)?;
            for ordinal in missing.into_iter().take(MAX_LAUNCHES_PER_CALL) {
                let launch = Launch {
                    ordinal,
                    key,
                    pool_namespace: &request.pool.namespace,
                    pool_name: &request.pool.name,
                    cluster: &cluster,
                    user_data: &bootstrap.value,
                };
                let instance = instances::run(&client, &config, &network, &launch)?;
                log::info(
                    "launched instance",
                    &[
                        ("pool", &pool_name),
                        ("instance", &instance.id),
                        ("ordinal", &ordinal.to_string()),
                    ],
                );
                pool.launched(ordinal, instance);
            }
        }

        let surplus = pool.surplus(request.replicas);
        if !surplus.is_empty() {
            instances::terminate(&client, &surplus)?;
            for id in &surplus {
                log::info(
                    "terminating surplus instance",
                    &[("pool", &pool_name), ("instance", id)],
                );
            }
            pool.terminating(&surplus);
        }
        Ok(pool.state(request.replicas, POLL_SECONDS))
    }

    fn remove_instances(request: PoolRemoveRequest) -> Result<PoolState, ProviderError> {
        let config = config::parse(&request.config)?;
        let client = client(&config);
        let key = &request.idempotency_key;
        // Listed by the pool's tag: an id of another pool is never found.
        let mut pool = Pool::new(key, instances::list(&client, tags::POOL, key)?);
        let removing: Vec<String> = pool
            .all_active()
            .into_iter()
            .filter(|id| request.remove.contains(id))
            .collect();
        if !removing.is_empty() {
            instances::terminate(&client, &removing)?;
            for id in &removing {
                log::info(
                    "terminating the instance whose Machine was deleted",
                    &[("pool", &pool_name(&request.pool)), ("instance", id)],
                );
            }
            pool.terminating(&removing);
        }
        let left = u32::try_from(pool.all_active().len()).unwrap_or(u32::MAX);
        Ok(pool.state(left, POLL_SECONDS))
    }

    fn delete_machine_pool(request: PoolDeleteRequest) -> Result<DeleteOutcome, ProviderError> {
        let config = config::parse(&request.config)?;
        let client = client(&config);
        let key = &request.idempotency_key;
        let pool = Pool::new(key, instances::list(&client, tags::POOL, key)?);
        if pool.is_empty() {
            return Ok(DeleteOutcome::Done);
        }
        let active = pool.all_active();
        instances::terminate(&client, &active)?;
        for id in &active {
            log::info(
                "terminating instance",
                &[("pool", &pool_name(&request.pool)), ("instance", id)],
            );
        }
        Ok(DeleteOutcome::InProgress(POLL_SECONDS))
    }

    /// From the instance type, as `DescribeInstanceTypes` tells it.
    fn describe_nodes(request: NodeDescribeRequest) -> Result<NodeShape, ProviderError> {
        let config = config::parse(&request.config)?;
        let client = client(&config);
        let instance_type = instances::instance_type(&client, &config)?;
        let offered = pool::architectures(&instance_type);
        // Only a type of several architectures leaves the choice to the
        // image; one request more then.
        let image = if offered.len() > 1 {
            instances::image_architecture(&client, &config)?
        } else {
            None
        };
        let architecture = pool::architecture(&offered, image.as_deref()).ok_or_else(|| {
            ProviderError::terminal(
                "UnsupportedInstanceType",
                format!(
                    "instance type {} runs on {}, none an architecture Kubernetes nodes on Linux run on (x86_64, arm64)",
                    instance_type.name,
                    instance_type.architectures.join(", ")
                ),
            )
        })?;
        Ok(pool::node_shape(&instance_type, architecture))
    }

    fn owns(provider_id: &str) -> bool {
        provider_id.starts_with(PROVIDER_ID_PREFIX)
    }

    /// `aws:///<zone>/<id>`; the config plays no part.
    fn provider_id(_config: &str, instance: Instance) -> Result<String, ProviderError> {
        match instance.failure_domain.as_deref() {
            Some(zone) if !zone.is_empty() => Ok(pool::provider_id(zone, &instance.id)),
            _ if instance.provider_id.starts_with(PROVIDER_ID_PREFIX) => Ok(instance.provider_id),
            _ => Err(ProviderError::terminal(
                "UnknownProviderId",
                format!(
                    "instance {} has no availability zone to make its providerID from",
                    instance.id
                ),
            )),
        }
    }
}

capwasm_provider_sdk::export_infrastructure_provider!(AwsEc2);
