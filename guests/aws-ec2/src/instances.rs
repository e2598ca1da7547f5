//! The EC2 calls about instances: listing by tag, launching into the
//! cluster's network, terminating, and what their type and image offer.

use alloc::collections::BTreeMap;

use base64::Engine as _;
use capwasm_provider_sdk::config::JsonPath;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::ProviderError;

use crate::config::Config;
use crate::ec2::model::{Instance, InstanceType};
use crate::ec2::query::Query;
use crate::ec2::{Client, xml};
use crate::pool;
use crate::tags;

/// Instances per `DescribeInstances` page.
const PAGE_SIZE: u32 = 100;
/// How soon to look again for something another object makes.
const NETWORK_RETRY_SECONDS: u32 = 15;
const IMAGE_RETRY_SECONDS: u32 = 15;
/// EC2 takes at most this much user data, before base64.
const MAX_USER_DATA: usize = 16 * 1024;

/// The instances carrying tag `key` = `value`, terminated ones aside.
pub fn list(client: &Client, key: &str, value: &str) -> Result<Vec<Instance>, ProviderError> {
    let query = Query::new("DescribeInstances")
        .tag_filter(key, value)
        .filter("instance-state-name", &pool::LISTED_STATES);
    let listed = client.describe(&query, Some(PAGE_SIZE), xml::reservations)?;
    // Defensive: act on nothing a filter let through by mistake.
    Ok(listed
        .into_iter()
        .filter(|i| i.tag(key) == Some(value))
        .collect())
}

/// Starts terminating `ids`; instances already gone are fine.
pub fn terminate(client: &Client, ids: &[String]) -> Result<(), ProviderError> {
    const GONE: &str = "InvalidInstanceID.NotFound";
    if ids.is_empty() {
        return Ok(());
    }
    let send = |ids: &[String]| {
        client.call(
            &Query::new("TerminateInstances").list("InstanceId", ids),
            xml::nothing,
        )
    };
    match send(ids) {
        Ok(()) => Ok(()),
        // One unknown id fails the whole call: send each alone.
        Err(err) if err.code() == Some(GONE) => {
            for id in ids {
                match send(core::slice::from_ref(id)) {
                    Err(err) if err.code() != Some(GONE) => return Err(err.into()),
                    _ => {}
                }
            }
            Ok(())
        }
        Err(err) => Err(err.into()),
    }
}

/// The cluster network new instances go into: a subnet per zone and the
/// security group, made by the cluster's reconcile.
pub struct Network {
    subnets: BTreeMap<String, String>,
    group_id: String,
}

impl Network {
    /// Finds them by the cluster's tag; the cluster not reconciled yet is
    /// a reason to wait.
    pub fn find(client: &Client, config: &Config, cluster: &str) -> Result<Self, ProviderError> {
        let waiting = |what: String| {
            ProviderError::retry_after(
                NETWORK_RETRY_SECONDS,
                format!(
                    "{what} tagged {}={cluster} yet; the cluster's infrastructure (WasmCluster) makes it",
                    tags::CLUSTER
                ),
            )
        };
        let query = Query::new("DescribeSubnets")
            .tag_filter(tags::CLUSTER, cluster)
            .filter("availability-zone", &config.zones);
        let mut found = client.describe(&query, None, xml::subnets)?;
        found.sort_by(|a, b| a.id.cmp(&b.id));
        let mut subnets = BTreeMap::new();
        for subnet in found {
            subnets.entry(subnet.zone).or_insert(subnet.id);
        }
        if let Some(zone) = config.zones.iter().find(|z| !subnets.contains_key(*z)) {
            return Err(waiting(format!("no subnet in {zone}")));
        }
        let query = Query::new("DescribeSecurityGroups").tag_filter(tags::CLUSTER, cluster);
        let mut groups = client.describe(&query, None, xml::security_groups)?;
        groups.sort_by(|a, b| a.id.cmp(&b.id));
        let group_id = groups
            .into_iter()
            .next()
            .ok_or_else(|| waiting("no security group".to_owned()))?
            .id;
        Ok(Self { subnets, group_id })
    }
}

/// Checks that the config's image can be launched, before anything is:
/// not every EC2 implementation refuses an unknown image in `RunInstances`
/// (moto launches any id), and asking first gets the same answer from all.
pub fn check_image(client: &Client, config: &Config) -> Result<(), ProviderError> {
    let query = Query::new("DescribeImages").list("ImageId", &[config.ami.as_str()]);
    let images = client.describe(&query, None, xml::images)?;
    let at = || JsonPath::root().key("ami");
    match images.iter().find(|i| i.id == config.ami) {
        None => Err(ProviderError::invalid_config(
            at(),
            format!(
                "image {} does not exist or is not visible to this account",
                config.ami
            ),
        )),
        Some(image) if image.state == "available" => Ok(()),
        Some(image) if image.state == "pending" => Err(ProviderError::retry_after(
            IMAGE_RETRY_SECONDS,
            format!("image {} is still pending", config.ami),
        )),
        Some(image) => Err(ProviderError::invalid_config(
            at(),
            format!("image {} is {}, not available", config.ami, image.state),
        )),
    }
}

/// What the config's instance type offers. EC2 answers a type it does not
/// offer in the region with `InvalidInstanceType`; an empty list is taken
/// the same way.
pub fn instance_type(client: &Client, config: &Config) -> Result<InstanceType, ProviderError> {
    let name = config.instance_type.as_str();
    let unknown = |answer: &str| {
        ProviderError::terminal(
            "UnknownInstanceType",
            format!(
                "instance type {name} is not one EC2 at {} offers in {} (it answered DescribeInstanceTypes with {answer})",
                client.host(),
                config.region
            ),
        )
    };
    let query = Query::new("DescribeInstanceTypes").list("InstanceType", &[name]);
    match client.describe(&query, None, xml::instance_types) {
        Ok(types) => types
            .into_iter()
            .find(|t| t.name == name)
            .ok_or_else(|| unknown("no such type")),
        Err(err)
            if err
                .code()
                .is_some_and(|c| c.split('.').next() == Some("InvalidInstanceType")) =>
        {
            Err(unknown(err.code().unwrap_or_default()))
        }
        Err(err) => Err(err.into()),
    }
}

/// The architecture the config's image runs (EC2's name), if EC2 says.
pub fn image_architecture(
    client: &Client,
    config: &Config,
) -> Result<Option<String>, ProviderError> {
    let query = Query::new("DescribeImages").list("ImageId", &[config.ami.as_str()]);
    let images = client.describe(&query, None, xml::images)?;
    Ok(images
        .into_iter()
        .find(|i| i.id == config.ami)
        .and_then(|i| i.architecture))
}

/// One instance to launch.
pub struct Launch<'a> {
    pub ordinal: u32,
    /// The pool's idempotency key.
    pub key: &'a str,
    /// Names the instance: `capwasm-<namespace>-<pool>-<ordinal>`.
    pub pool_namespace: &'a str,
    pub pool_name: &'a str,
    pub cluster: &'a str,
    pub user_data: &'a [u8],
}

/// Launches one instance, tagged with its pool and ordinal in the same call.
pub fn run(
    client: &Client,
    config: &Config,
    network: &Network,
    launch: &Launch<'_>,
) -> Result<Instance, ProviderError> {
    let zone = config.zone_of(launch.ordinal).unwrap_or_default();
    let subnet = network.subnets.get(zone).ok_or_else(|| {
        ProviderError::retry_after(NETWORK_RETRY_SECONDS, format!("no subnet in {zone} yet"))
    })?;
    if launch.user_data.len() > MAX_USER_DATA {
        return Err(ProviderError::terminal(
            "BootstrapDataTooLarge",
            format!(
                "the bootstrap data is {} bytes; EC2 takes at most {MAX_USER_DATA} bytes of user data",
                launch.user_data.len()
            ),
        ));
    }
    let ordinal = launch.ordinal.to_string();
    let name = tags::name(&[launch.pool_namespace, launch.pool_name, &ordinal]);
    let own = [
        (tags::POOL, launch.key.to_owned()),
        (tags::ORDINAL, ordinal.clone()),
    ];
    let query = Query::new("RunInstances")
        .param("ImageId", config.ami.as_str())
        .param("InstanceType", config.instance_type.as_str())
        .param("MinCount", "1")
        .param("MaxCount", "1")
        .param("SubnetId", subnet.as_str())
        .list("SecurityGroupId", &[network.group_id.as_str()])
        .param(
            "UserData",
            base64::engine::general_purpose::STANDARD.encode(launch.user_data),
        )
        .param(
            "ClientToken",
            pool::client_token(launch.key, launch.ordinal),
        )
        .tag_specification(
            "instance",
            &tags::for_resource(config, launch.cluster, name, &own),
        );
    let mut launched = client.call(&query, xml::launched)?;
    match (launched.pop(), launched.is_empty()) {
        (Some(instance), true) => Ok(instance),
        _ => Err(ProviderError::retry_after(
            NETWORK_RETRY_SECONDS,
            "EC2 answered RunInstances without exactly one instance",
        )),
    }
}
