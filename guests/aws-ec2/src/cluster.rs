//! A cluster's network: one VPC, a subnet per zone and one security group,
//! each found by the cluster's tag before it is created.

use alloc::collections::BTreeSet;

use capwasm_provider_sdk::config::JsonPath;
use capwasm_provider_sdk::infrastructure::{ClusterState, FailureDomain};
use capwasm_provider_sdk::log;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{DeleteOutcome, ProviderError};

use crate::cidr::Ipv4Net;
use crate::config::Config;
use crate::ec2::model::{Rule, SecurityGroup, Source, Subnet, Vpc};
use crate::ec2::query::Query;
use crate::ec2::{Client, Error, xml};
use crate::instances;
use crate::tags;

/// How soon to look again while a deletion waits for something to go.
const DELETE_POLL_SECONDS: u32 = 10;
/// EC2's limit on security group names.
const MAX_GROUP_NAME: usize = 255;

/// The cluster a call is for: its tag value and the parts of its names.
pub struct Cluster<'a> {
    /// `<namespace>/<name>`, the value of [`tags::CLUSTER`].
    pub tag: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

/// Brings the network to what `config` asks for.
pub fn reconcile(
    client: &Client,
    config: &Config,
    cluster: &Cluster<'_>,
) -> Result<ClusterState, ProviderError> {
    let vpc = ensure_vpc(client, config, cluster)?;
    let subnets = ensure_subnets(client, config, cluster, &vpc)?;
    ensure_security_group(client, config, cluster, &vpc)?;
    let failure_domains = config
        .zones
        .iter()
        .map(|zone| {
            let mut attributes = vec![("region".to_owned(), config.region.clone())];
            if let Some(subnet) = subnets.iter().find(|s| &s.zone == zone) {
                attributes.push(("subnet".to_owned(), subnet.id.clone()));
            }
            FailureDomain {
                name: zone.clone(),
                control_plane: true,
                attributes,
            }
        })
        .collect();
    Ok(ClusterState {
        control_plane_endpoint: None,
        failure_domains,
        ready: true,
        requeue_after_seconds: None,
    })
}

fn ensure_vpc(
    client: &Client,
    config: &Config,
    cluster: &Cluster<'_>,
) -> Result<Vpc, ProviderError> {
    let query = Query::new("DescribeVpcs").tag_filter(tags::CLUSTER, cluster.tag);
    let mut found = client.describe(&query, None, xml::vpcs)?;
    found.sort_by(|a, b| a.id.cmp(&b.id));
    let wanted = config.vpc_net()?;
    if let Some(vpc) = found.into_iter().next() {
        // A VPC's primary block is fixed when it is made.
        if Ipv4Net::parse(&vpc.cidr).ok() != Some(wanted) {
            return Err(ProviderError::invalid_config(
                JsonPath::root().key("vpcCidr"),
                format!(
                    "the cluster's VPC {} has block {}, and a VPC's block cannot change",
                    vpc.id, vpc.cidr
                ),
            ));
        }
        return Ok(vpc);
    }
    let name = tags::name(&[cluster.namespace, cluster.name]);
    let query = Query::new("CreateVpc")
        .param("CidrBlock", wanted.to_string())
        .tag_specification("vpc", &tags::for_resource(config, cluster.tag, name, &[]));
    let vpc = client.call(&query, xml::created_vpc)?;
    log::info("created VPC", &[("cluster", cluster.tag), ("vpc", &vpc.id)]);
    Ok(vpc)
}

/// The subnets of the configured zones, created where missing.
fn ensure_subnets(
    client: &Client,
    config: &Config,
    cluster: &Cluster<'_>,
    vpc: &Vpc,
) -> Result<Vec<Subnet>, ProviderError> {
    let query = Query::new("DescribeSubnets")
        .filter("vpc-id", &[vpc.id.as_str()])
        .tag_filter(tags::CLUSTER, cluster.tag);
    let mut subnets = client.describe(&query, None, xml::subnets)?;
    let vpc_net = config.vpc_net()?;
    for (index, zone) in config.zones.iter().enumerate() {
        if subnets.iter().any(|s| &s.zone == zone) {
            continue;
        }
        let taken: Vec<&str> = subnets.iter().map(|s| s.cidr.as_str()).collect();
        let cidr = subnet_block(vpc_net, index, &taken).ok_or_else(|| {
            ProviderError::invalid_config(
                JsonPath::root().key("vpcCidr"),
                format!("has no free /24 left for a subnet in {zone}"),
            )
        })?;
        let name = tags::name(&[cluster.namespace, cluster.name, zone]);
        let query = Query::new("CreateSubnet")
            .param("VpcId", vpc.id.as_str())
            .param("CidrBlock", cidr.to_string())
            .param("AvailabilityZone", zone.as_str())
            .tag_specification(
                "subnet",
                &tags::for_resource(config, cluster.tag, name, &[]),
            );
        let subnet = client
            .call(&query, xml::created_subnet)
            .map_err(|err| zone_error(err, index, zone))?;
        log::info(
            "created subnet",
            &[
                ("cluster", cluster.tag),
                ("subnet", &subnet.id),
                ("zone", zone),
            ],
        );
        subnets.push(subnet);
    }
    Ok(subnets)
}

/// The block for the subnet of the zone listed `index`-th: the VPC's
/// `index`-th /24, or, if a subnet of another zone holds it (the zones
/// were reordered), the lowest one free.
pub fn subnet_block(vpc: Ipv4Net, index: usize, taken: &[&str]) -> Option<Ipv4Net> {
    let taken: BTreeSet<Ipv4Net> = taken
        .iter()
        .filter_map(|c| Ipv4Net::parse(c).ok())
        .collect();
    let preferred = u32::try_from(index).ok().and_then(|i| vpc.subnet(i));
    preferred
        .filter(|block| !taken.contains(block))
        .or_else(|| {
            (0..vpc.subnet_count())
                .filter_map(|i| vpc.subnet(i))
                .find(|block| !taken.contains(block))
        })
}

/// EC2 refusing a zone is the config's fault, at `zones[index]`.
fn zone_error(err: Error, index: usize, zone: &str) -> ProviderError {
    let refused_zone = match err.code() {
        Some("InvalidAvailabilityZone" | "InvalidZone.NotFound") => true,
        Some("InvalidParameterValue") => {
            let message = err.message().to_ascii_lowercase();
            message.contains("availabilityzone") || message.contains(zone)
        }
        _ => false,
    };
    if refused_zone {
        return ProviderError::invalid_config(
            JsonPath::root().key("zones").index(index),
            format!(
                "EC2 does not accept availability zone {zone}: {}",
                ProviderError::from(err).message()
            ),
        );
    }
    err.into()
}

fn ensure_security_group(
    client: &Client,
    config: &Config,
    cluster: &Cluster<'_>,
    vpc: &Vpc,
) -> Result<(), ProviderError> {
    let query = Query::new("DescribeSecurityGroups")
        .filter("vpc-id", &[vpc.id.as_str()])
        .tag_filter(tags::CLUSTER, cluster.tag);
    let mut found = client.describe(&query, None, xml::security_groups)?;
    found.sort_by(|a, b| a.id.cmp(&b.id));
    let group = match found.into_iter().next() {
        Some(group) => group,
        None => create_security_group(client, config, cluster, vpc)?,
    };
    let wanted = ingress_rules(config, &group.id);
    let (missing, stale) = rule_changes(&wanted, &group.ingress);
    change_ingress(client, &group.id, "AuthorizeSecurityGroupIngress", &missing)?;
    change_ingress(client, &group.id, "RevokeSecurityGroupIngress", &stale)?;
    Ok(())
}

fn create_security_group(
    client: &Client,
    config: &Config,
    cluster: &Cluster<'_>,
    vpc: &Vpc,
) -> Result<SecurityGroup, ProviderError> {
    let name = group_name(cluster);
    let query = Query::new("CreateSecurityGroup")
        .param("GroupName", name.as_str())
        .param(
            "GroupDescription",
            format!("capwasm cluster {}", cluster.tag),
        )
        .param("VpcId", vpc.id.as_str())
        .tag_specification(
            "security-group",
            &tags::for_resource(config, cluster.tag, name.clone(), &[]),
        );
    let id = client.call(&query, xml::created_group_id)?;
    log::info(
        "created security group",
        &[("cluster", cluster.tag), ("group", &id)],
    );
    // A new group has no ingress.
    Ok(SecurityGroup {
        id,
        ingress: Vec::new(),
    })
}

/// `capwasm-<namespace>-<name>`, within EC2's limit (unique within the
/// cluster's own VPC either way).
fn group_name(cluster: &Cluster<'_>) -> String {
    tags::name(&[cluster.namespace, cluster.name])
        .chars()
        .take(MAX_GROUP_NAME)
        .collect()
}

/// The group's ingress: the API server port from each configured block,
/// and everything from members of the group itself.
pub fn ingress_rules(config: &Config, group_id: &str) -> Vec<Rule> {
    let mut rules: Vec<Rule> = config
        .api_server_cidrs
        .iter()
        .map(|cidr| Rule::tcp(config.api_server_port, Source::Cidr(cidr.clone())))
        .collect();
    rules.push(Rule::all(Source::Group(group_id.to_owned())));
    rules
}

/// What to authorize (wanted, not there) and what to revoke (there, not
/// wanted).
pub fn rule_changes(wanted: &[Rule], present: &[Rule]) -> (Vec<Rule>, Vec<Rule>) {
    let missing = wanted
        .iter()
        .filter(|r| !present.contains(r))
        .cloned()
        .collect();
    let stale = present
        .iter()
        .filter(|r| !wanted.contains(r))
        .cloned()
        .collect();
    (missing, stale)
}

/// Authorizes or revokes `rules`, all in one call. EC2 refuses the whole
/// call if one rule is already there (or already gone), so then each is
/// sent alone and that answer counts as done.
fn change_ingress(
    client: &Client,
    group_id: &str,
    action: &'static str,
    rules: &[Rule],
) -> Result<(), ProviderError> {
    if rules.is_empty() {
        return Ok(());
    }
    let done_already = if action == "AuthorizeSecurityGroupIngress" {
        "InvalidPermission.Duplicate"
    } else {
        "InvalidPermission.NotFound"
    };
    let send = |rules: &[Rule]| {
        let query = Query::new(action)
            .param("GroupId", group_id)
            .ip_permissions(rules);
        client.call(&query, xml::nothing)
    };
    match send(rules) {
        Ok(()) => {}
        Err(err) if err.code() == Some(done_already) && rules.len() > 1 => {
            for rule in rules {
                match send(core::slice::from_ref(rule)) {
                    Err(err) if err.code() != Some(done_already) => return Err(err.into()),
                    _ => {}
                }
            }
        }
        Err(err) if err.code() == Some(done_already) => {}
        Err(err) => return Err(err.into()),
    }
    log::info(
        "changed security group ingress",
        &[
            ("group", group_id),
            ("action", action),
            ("rules", &rules.len().to_string()),
        ],
    );
    Ok(())
}

/// Removes everything tagged for the cluster: its instances first (they
/// hold network interfaces in the subnets and the group), then the
/// group, the subnets and the VPC.
pub fn delete(client: &Client, cluster: &Cluster<'_>) -> Result<DeleteOutcome, ProviderError> {
    let listed = instances::list(client, tags::CLUSTER, cluster.tag)?;
    if !listed.is_empty() {
        let active: Vec<String> = listed
            .iter()
            .filter(|i| i.state != "shutting-down")
            .map(|i| i.id.clone())
            .collect();
        instances::terminate(client, &active)?;
        log::info(
            "waiting for the cluster's instances to terminate",
            &[
                ("cluster", cluster.tag),
                ("instances", &listed.len().to_string()),
            ],
        );
        return Ok(DeleteOutcome::InProgress(DELETE_POLL_SECONDS));
    }

    let mut waiting = false;
    let query = Query::new("DescribeSecurityGroups").tag_filter(tags::CLUSTER, cluster.tag);
    for group in client.describe(&query, None, xml::security_groups)? {
        let query = Query::new("DeleteSecurityGroup").param("GroupId", group.id.as_str());
        waiting |= delete_one(client, &query, &group.id, "InvalidGroup.NotFound")?;
    }
    let query = Query::new("DescribeSubnets").tag_filter(tags::CLUSTER, cluster.tag);
    for subnet in client.describe(&query, None, xml::subnets)? {
        let query = Query::new("DeleteSubnet").param("SubnetId", subnet.id.as_str());
        waiting |= delete_one(client, &query, &subnet.id, "InvalidSubnetID.NotFound")?;
    }
    if waiting {
        return Ok(DeleteOutcome::InProgress(DELETE_POLL_SECONDS));
    }
    let query = Query::new("DescribeVpcs").tag_filter(tags::CLUSTER, cluster.tag);
    for vpc in client.describe(&query, None, xml::vpcs)? {
        let query = Query::new("DeleteVpc").param("VpcId", vpc.id.as_str());
        waiting |= delete_one(client, &query, &vpc.id, "InvalidVpcID.NotFound")?;
    }
    Ok(if waiting {
        DeleteOutcome::InProgress(DELETE_POLL_SECONDS)
    } else {
        DeleteOutcome::Done
    })
}

/// Sends a delete; whether it has to wait for something else to go
/// first (`DependencyViolation`: network interfaces still detaching).
fn delete_one(client: &Client, query: &Query, id: &str, gone: &str) -> Result<bool, ProviderError> {
    match client.call(query, xml::nothing) {
        Ok(()) => {
            log::info("deleted", &[("resource", id)]);
            Ok(false)
        }
        Err(err) if err.code() == Some(gone) => Ok(false),
        Err(err) if err.code() == Some("DependencyViolation") => {
            log::info(
                "waiting for dependencies to go before deleting",
                &[("resource", id), ("ec2", err.message())],
            );
            Ok(true)
        }
        Err(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(text: &str) -> Ipv4Net {
        Ipv4Net::parse(text).expect(text)
    }

    #[test]
    fn subnet_blocks_follow_zone_order_and_avoid_taken_ones() {
        let vpc = net("10.0.0.0/16");
        assert_eq!(subnet_block(vpc, 0, &[]), Some(net("10.0.0.0/24")));
        assert_eq!(
            subnet_block(vpc, 2, &["10.0.0.0/24"]),
            Some(net("10.0.2.0/24"))
        );
        // Zone b moved to index 0 after a was removed: its old block stays
        // with its subnet, and a new zone at index 1 takes the lowest free.
        assert_eq!(
            subnet_block(vpc, 1, &["10.0.1.0/24", "10.0.2.0/24"]),
            Some(net("10.0.0.0/24"))
        );
        let small = net("10.0.0.0/23");
        assert_eq!(
            subnet_block(small, 0, &["10.0.0.0/24", "10.0.1.0/24"]),
            None
        );
    }

    #[test]
    fn ingress_is_the_api_port_from_each_block_and_all_from_the_group() {
        let config = crate::config::parse(
            r#"{"region": "us-east-1", "ami": "ami-12c6146b", "zones": ["us-east-1a"],
                "apiServerCidrs": ["203.0.113.0/24", "198.51.100.7/32"], "apiServerPort": 443}"#,
        )
        .expect("valid");
        assert_eq!(
            ingress_rules(&config, "sg-1"),
            [
                Rule::tcp(443, Source::Cidr("203.0.113.0/24".into())),
                Rule::tcp(443, Source::Cidr("198.51.100.7/32".into())),
                Rule::all(Source::Group("sg-1".into())),
            ]
        );
    }

    #[test]
    fn rule_changes_add_what_is_missing_and_revoke_what_is_not_wanted() {
        let api = Rule::tcp(6443, Source::Cidr("203.0.113.0/24".into()));
        let group = Rule::all(Source::Group("sg-1".into()));
        let ssh = Rule::tcp(22, Source::Cidr("0.0.0.0/0".into()));
        let (missing, stale) =
            rule_changes(&[api.clone(), group.clone()], &[group.clone(), ssh.clone()]);
        assert_eq!(missing, core::slice::from_ref(&api));
        assert_eq!(stale, [ssh]);
        let (missing, stale) = rule_changes(&[api.clone(), group.clone()], &[group, api]);
        assert!(missing.is_empty() && stale.is_empty());
    }

    #[test]
    fn group_names_fit_ec2s_limit() {
        let long = "n".repeat(300);
        let cluster = Cluster {
            tag: "ns/x",
            namespace: "ns",
            name: &long,
        };
        assert_eq!(group_name(&cluster).len(), MAX_GROUP_NAME);
        assert!(group_name(&cluster).starts_with("capwasm-ns-nnn"));
    }
}
