//! The aws-ec2 provider, loaded in the real runtime, against moto (the AWS
//! emulator, signatures checked): the host signs every request with keys
//! the guest never holds. What the provider made is counted in moto
//! directly, with boto3 from moto's virtualenv, never through the guest.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use capwasm::testing::{ec2, requests};
use capwasm::wasm::clusters::{ClusterRequest, ClusterState};
use capwasm::wasm::machine_pools::{DeleteRequest, PoolState, ReconcileRequest};
use capwasm::wasm::node_shapes::{DescribeRequest, NodeShape};
use capwasm::wasm::types::{Credential, DeleteOutcome, InstanceState, ProviderError};
use capwasm::wasm::{
    CallError, Capabilities, Limits, ProviderSource, ProviderSpec, Runtime, RuntimeSettings,
};
use serde::Deserialize;
use serde_json::{Value, json};
use testenv::guest_path;
use testenv::moto::Moto;

const PROVIDER: &str = "aws";
/// One of the images moto ships.
const AMI: &str = "ami-12c6146b";
/// The cluster of `requests::cluster_request` and `requests::reconcile_pool`.
const CLUSTER: &str = "default/demo";
const API_CIDR: &str = "203.0.113.0/24";
/// Base64 of the bootstrap data `requests::reconcile_pool` carries.
const USER_DATA: &str = "I2Nsb3VkLWNvbmZpZwo=";
/// Calls a test makes before it gives up on a state.
const ATTEMPTS: usize = 20;

/// Everything tagged for cluster `sys.argv[2]`, as JSON.
const INVENTORY: &str = r#"
import json, sys
import boto3
ec2 = boto3.client("ec2", endpoint_url=sys.argv[1])
tagged = [{"Name": "tag:capwasm.dev/cluster", "Values": [sys.argv[2]]}]
vpcs = [{"id": v["VpcId"], "cidr": v["CidrBlock"]} for v in ec2.describe_vpcs(Filters=tagged)["Vpcs"]]
subnets = [{"id": s["SubnetId"], "vpc": s["VpcId"], "zone": s["AvailabilityZone"], "cidr": s["CidrBlock"]}
           for s in ec2.describe_subnets(Filters=tagged)["Subnets"]]
groups = [{"id": g["GroupId"], "vpc": g["VpcId"], "ingress": g["IpPermissions"]}
          for g in ec2.describe_security_groups(Filters=tagged)["SecurityGroups"]]
instances = []
for page in ec2.get_paginator("describe_instances").paginate(Filters=tagged):
    for reservation in page["Reservations"]:
        for i in reservation["Instances"]:
            user_data = ec2.describe_instance_attribute(InstanceId=i["InstanceId"], Attribute="userData")
            instances.append({
                "id": i["InstanceId"], "state": i["State"]["Name"],
                "zone": i["Placement"]["AvailabilityZone"], "subnet": i.get("SubnetId"),
                "groups": [g["GroupId"] for g in i.get("SecurityGroups", [])],
                "tags": {t["Key"]: t["Value"] for t in i.get("Tags", [])},
                "userData": user_data.get("UserData", {}).get("Value", ""),
            })
print(json.dumps({"vpcs": vpcs, "subnets": subnets, "groups": groups, "instances": instances}))
"#;

/// Makes a VPC tagged for cluster `sys.argv[2]`; prints its id.
const FOREIGN_VPC: &str = r#"
import sys
import boto3
ec2 = boto3.client("ec2", endpoint_url=sys.argv[1])
vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16", TagSpecifications=[{"ResourceType": "vpc",
    "Tags": [{"Key": "capwasm.dev/cluster", "Value": sys.argv[2]}]}])
print(vpc["Vpc"]["VpcId"])
"#;

#[derive(Debug, Deserialize)]
struct Inventory {
    vpcs: Vec<Vpc>,
    subnets: Vec<Subnet>,
    groups: Vec<Group>,
    instances: Vec<Ec2Instance>,
}

#[derive(Debug, Deserialize)]
struct Vpc {
    id: String,
    cidr: String,
}

#[derive(Debug, Deserialize)]
struct Subnet {
    id: String,
    vpc: String,
    zone: String,
    cidr: String,
}

#[derive(Debug, Deserialize)]
struct Group {
    id: String,
    vpc: String,
    ingress: Vec<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Ec2Instance {
    id: String,
    state: String,
    zone: String,
    subnet: Option<String>,
    groups: Vec<String>,
    tags: BTreeMap<String, String>,
    user_data: String,
}

impl Inventory {
    /// The instances not terminated.
    fn live(&self) -> Vec<&Ec2Instance> {
        self.instances
            .iter()
            .filter(|i| i.state != "terminated")
            .collect()
    }
}

/// moto, and a runtime serving the provider with the host signing for it.
struct Env {
    moto: Moto,
    runtime: Runtime,
}

impl Env {
    async fn start() -> Self {
        let moto = Moto::start().await.expect("moto (tests/moto/install.sh)");
        let runtime = runtime(vec![moto.authority.clone()], Some(&moto.authority)).await;
        Self { moto, runtime }
    }

    /// The provider's config: moto's endpoint, two zones, `extra` on top.
    fn config(&self, extra: &Value) -> String {
        config(&format!("http://{}", self.moto.authority), extra)
    }

    /// moto's keys, under the names the signing rule reads.
    fn credentials(&self) -> Vec<Credential> {
        credentials(&self.moto.secret_access_key, &self.moto)
    }

    fn cluster_request(&self, config: &str) -> ClusterRequest {
        ClusterRequest {
            credentials: self.credentials(),
            ..requests::cluster_request(config)
        }
    }

    fn pool_request(&self, config: &str, replicas: u32) -> ReconcileRequest {
        ReconcileRequest {
            credentials: self.credentials(),
            ..requests::reconcile_pool(config, replicas)
        }
    }

    fn delete_pool_request(&self, config: &str) -> DeleteRequest {
        DeleteRequest {
            credentials: self.credentials(),
            ..requests::delete_pool(config)
        }
    }

    /// `node-shapes.describe` of the pool's nodes with `instance_type`.
    async fn describe_nodes(&self, instance_type: &str) -> Result<NodeShape, CallError> {
        let config = self.config(&json!({"instanceType": instance_type}));
        let request = DescribeRequest {
            pool: requests::reconcile_pool(&config, 0).pool,
            config,
            credentials: self.credentials(),
        };
        self.runtime.describe_nodes(PROVIDER, &request).await
    }

    /// What moto holds tagged for `cluster`.
    fn inventory(&self, cluster: &str) -> Inventory {
        let printed = self
            .moto
            .boto3(INVENTORY, &[cluster])
            .expect("the inventory script");
        serde_json::from_str(&printed).unwrap_or_else(|e| panic!("{e}: {printed}"))
    }

    async fn reconcile_cluster(&self, config: &str) -> ClusterState {
        self.runtime
            .reconcile_cluster(PROVIDER, &self.cluster_request(config))
            .await
            .expect("clusters.reconcile")
    }

    /// Reconciles like the host: each call gets the instances the last
    /// returned, until the pool is ready and settled.
    async fn settle_pool(&self, request: &mut ReconcileRequest) -> PoolState {
        for _ in 0..ATTEMPTS {
            let state = self
                .runtime
                .reconcile_pool(PROVIDER, request)
                .await
                .expect("machine-pools.reconcile");
            request.instances.clone_from(&state.instances);
            if state.ready && state.requeue_after_seconds.is_none() {
                return state;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the pool did not settle at {} replicas", request.replicas);
    }
}

/// A runtime serving the provider, allowed to reach `allowed`, signing
/// requests to `signed` with SigV4.
async fn runtime(allowed: Vec<String>, signed: Option<&str>) -> Runtime {
    let runtime = Runtime::new(RuntimeSettings::default(), None).expect("runtime");
    let capabilities = Capabilities {
        allowed_hosts: allowed,
        ..signed.map(ec2::signed_capabilities).unwrap_or_default()
    };
    let loaded = runtime
        .load(ProviderSpec {
            name: PROVIDER.into(),
            source: ProviderSource::File(guest_path("aws_ec2.wasm")),
            sha256: None,
            limits: Limits {
                deadline: Duration::from_secs(20),
                ..Limits::default()
            },
            capabilities,
        })
        .await
        .unwrap_or_else(|e| panic!("loading aws_ec2.wasm: {e:#?} (run `make guests`)"));
    runtime.registry().install(std::sync::Arc::new(loaded));
    runtime
}

fn config(endpoint: &str, extra: &Value) -> String {
    let mut config = json!({
        "region": "us-east-1",
        "endpoint": endpoint,
        "ami": AMI,
        "zones": ["us-east-1a", "us-east-1b"],
        "apiServerCidrs": [API_CIDR],
    });
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        config.extend(extra.clone());
    }
    config.to_string()
}

fn credentials(secret: &str, moto: &Moto) -> Vec<Credential> {
    ec2::credentials(&moto.access_key_id, secret)
}

/// The guest's own error, or a panic naming what came instead.
fn provider_error<T: std::fmt::Debug>(result: Result<T, CallError>) -> ProviderError {
    match result {
        Err(CallError::Provider { error, .. }) => error,
        other => panic!("expected the guest's own error, got {other:?}"),
    }
}

fn invalid_config_path<T: std::fmt::Debug>(result: Result<T, CallError>) -> String {
    match provider_error(result) {
        ProviderError::InvalidConfig(e) => e.path,
        other => panic!("expected invalid-config, got {other:?}"),
    }
}

/// The ingress permissions of a group, reduced to protocol, ports and
/// sources, sorted.
fn ingress(group: &Group) -> Vec<String> {
    let mut rules: Vec<String> = group
        .ingress
        .iter()
        .flat_map(|p| {
            let head = format!(
                "{} {}-{}",
                p["IpProtocol"].as_str().unwrap_or_default(),
                p["FromPort"],
                p["ToPort"]
            );
            let cidrs = p["IpRanges"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| format!("cidr {}", r["CidrIp"].as_str().unwrap_or_default()));
            let groups = p["UserIdGroupPairs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|g| format!("group {}", g["GroupId"].as_str().unwrap_or_default()));
            let ipv6 = p["Ipv6Ranges"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| format!("ipv6 {}", r["CidrIpv6"].as_str().unwrap_or_default()));
            cidrs
                .chain(groups)
                .chain(ipv6)
                .map(move |source| format!("{head} from {source}"))
                .collect::<Vec<_>>()
        })
        .collect();
    rules.sort();
    rules
}

#[tokio::test]
async fn cluster_network_is_made_once_and_found_by_its_tag() {
    let env = Env::start().await;
    let config = env.config(&json!({}));
    let first = env.reconcile_cluster(&config).await;
    let second = env.reconcile_cluster(&config).await;
    assert!(first.ready && second.ready);
    assert!(first.control_plane_endpoint.is_none());
    let zones: Vec<&str> = second
        .failure_domains
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(zones, ["us-east-1a", "us-east-1b"]);
    assert_eq!(
        format!("{:?}", first.failure_domains),
        format!("{:?}", second.failure_domains)
    );

    let found = env.inventory(CLUSTER);
    let [vpc] = &found.vpcs[..] else {
        panic!("one VPC: {found:?}");
    };
    assert_eq!(vpc.cidr, "10.0.0.0/16");
    let mut subnets: Vec<(&str, &str)> = found
        .subnets
        .iter()
        .map(|s| {
            assert_eq!(s.vpc, vpc.id);
            (s.zone.as_str(), s.cidr.as_str())
        })
        .collect();
    subnets.sort_unstable();
    assert_eq!(
        subnets,
        [("us-east-1a", "10.0.0.0/24"), ("us-east-1b", "10.0.1.0/24")]
    );
    let [group] = &found.groups[..] else {
        panic!("one security group: {found:?}");
    };
    assert_eq!(group.vpc, vpc.id);
    let mut expected = vec![
        format!("-1 null-null from group {}", group.id),
        format!("tcp 6443-6443 from cidr {API_CIDR}"),
    ];
    expected.sort();
    assert_eq!(ingress(group), expected);
    let subnet_of_a = found
        .subnets
        .iter()
        .find(|s| s.zone == "us-east-1a")
        .map(|s| s.id.clone());
    assert!(
        second.failure_domains[0]
            .attributes
            .contains(&("subnet".to_owned(), subnet_of_a.unwrap_or_default()))
    );

    // Another block and port: the group follows, the old rule goes.
    let changed = env.config(&json!({"apiServerCidrs": ["198.51.100.0/24"], "apiServerPort": 443}));
    env.reconcile_cluster(&changed).await;
    let found = env.inventory(CLUSTER);
    let mut expected = vec![
        format!("-1 null-null from group {}", found.groups[0].id),
        "tcp 443-443 from cidr 198.51.100.0/24".to_owned(),
    ];
    expected.sort();
    assert_eq!(ingress(&found.groups[0]), expected);
    assert_eq!((found.vpcs.len(), found.subnets.len()), (1, 2));
}

#[tokio::test]
async fn pool_scales_without_duplicates_and_keeps_its_lowest_ordinals() {
    let env = Env::start().await;
    let config = env.config(&json!({}));
    env.reconcile_cluster(&config).await;
    let mut request = env.pool_request(&config, 3);
    let key = request.idempotency_key.clone();
    let state = env.settle_pool(&mut request).await;

    let found = env.inventory(CLUSTER);
    let live = found.live();
    assert_eq!(live.len(), 3, "{found:?}");
    let group = &found.groups[0].id;
    for instance in &live {
        let ordinal: usize = instance.tags["capwasm.dev/ordinal"].parse().unwrap();
        assert_eq!(instance.tags["capwasm.dev/pool"], key);
        assert_eq!(instance.tags["capwasm.dev/cluster"], CLUSTER);
        assert_eq!(
            instance.tags["Name"],
            format!("capwasm-default-pool-a-{ordinal}")
        );
        assert_eq!(instance.user_data, USER_DATA);
        assert_eq!(instance.state, "running");
        let zone = ["us-east-1a", "us-east-1b"][ordinal % 2];
        assert_eq!(instance.zone, zone);
        let subnet = found.subnets.iter().find(|s| s.zone == zone).unwrap();
        assert_eq!(instance.subnet.as_deref(), Some(subnet.id.as_str()));
        assert_eq!(instance.groups, std::slice::from_ref(group));
    }
    let provider_ids: Vec<String> = state
        .instances
        .iter()
        .map(|i| i.provider_id.clone())
        .collect();
    for (ordinal, reported) in state.instances.iter().enumerate() {
        let zone = ["us-east-1a", "us-east-1b"][ordinal % 2];
        assert_eq!(
            reported.provider_id,
            format!("aws:///{zone}/{}", reported.id)
        );
        assert!(reported.id.starts_with("i-"));
        assert_eq!(reported.state, InstanceState::Running);
        assert_eq!(reported.failure_domain.as_deref(), Some(zone));
        assert_eq!(
            reported.request_token.as_deref(),
            Some(format!("{key}-{ordinal}").as_str())
        );
        assert!(!reported.addresses.is_empty());
    }

    // Again: nothing new.
    let again = env.settle_pool(&mut request).await;
    assert_eq!(env.inventory(CLUSTER).live().len(), 3);
    let ids: Vec<String> = again
        .instances
        .iter()
        .map(|i| i.provider_id.clone())
        .collect();
    assert_eq!(ids, provider_ids);

    // The provider-ids exports agree.
    assert!(env.runtime.owns(PROVIDER, &provider_ids[0]).await.unwrap());
    assert!(!env.runtime.owns(PROVIDER, "sim://local-1/x").await.unwrap());
    let derived = env
        .runtime
        .provider_id(PROVIDER, &config, &again.instances[1])
        .await
        .unwrap();
    assert_eq!(derived, provider_ids[1]);

    // Up to 12: a call launches at most 8 and asks to be called again.
    request.replicas = 12;
    let partial = env
        .runtime
        .reconcile_pool(PROVIDER, &request)
        .await
        .expect("machine-pools.reconcile");
    assert_eq!(partial.instances.len(), 11);
    assert!(!partial.ready && partial.requeue_after_seconds.is_some());
    request.instances = partial.instances;
    let twelve = env.settle_pool(&mut request).await;
    assert_eq!(twelve.instances.len(), 12);
    assert_eq!(env.inventory(CLUSTER).live().len(), 12);

    // Down to 1: the first instance survives.
    request.replicas = 1;
    let one = env.settle_pool(&mut request).await;
    let found = env.inventory(CLUSTER);
    let live = found.live();
    assert_eq!(live.len(), 1, "{found:?}");
    assert_eq!(live[0].tags["capwasm.dev/ordinal"], "0");
    assert_eq!(one.instances.len(), 1);
    assert_eq!(one.instances[0].id, live[0].id);
    assert_eq!(one.instances[0].provider_id, provider_ids[0]);
}

/// `(name, quantity)` pairs, as a node shape's capacity lists them.
fn capacity(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, quantity)| ((*name).to_owned(), (*quantity).to_owned()))
        .collect()
}

#[tokio::test]
async fn node_shapes_are_what_describe_instance_types_answers() {
    let env = Env::start().await;
    // No cluster needed: the shape is the instance type's alone.
    let shape = env.describe_nodes("m5.large").await.expect("m5.large");
    assert_eq!(
        shape.capacity,
        capacity(&[("cpu", "2"), ("memory", "8192Mi")])
    );
    assert_eq!(
        (shape.architecture.as_str(), shape.operating_system.as_str()),
        ("amd64", "linux")
    );

    // moto's g4dn.xlarge has one NVIDIA T4.
    let shape = env
        .describe_nodes("g4dn.xlarge")
        .await
        .expect("g4dn.xlarge");
    assert_eq!(
        shape.capacity,
        capacity(&[("cpu", "4"), ("memory", "16384Mi"), ("nvidia.com/gpu", "1")])
    );
    let shape = env.describe_nodes("m6g.large").await.expect("m6g.large");
    assert_eq!(shape.architecture, "arm64");
    // i386 and x86_64: a Kubernetes node runs the second.
    let shape = env.describe_nodes("t2.micro").await.expect("t2.micro");
    assert_eq!(shape.architecture, "amd64");

    // moto, like EC2, answers 400 InvalidInstanceType.
    let error = provider_error(env.describe_nodes("m5.huge").await);
    let ProviderError::Terminal(terminal) = &error else {
        panic!("expected terminal, got {error:?}");
    };
    assert_eq!(terminal.reason, "UnknownInstanceType");
    assert!(terminal.message.contains("m5.huge"), "{}", terminal.message);
}

/// Each instance's id, providerID and request token.
fn identities(state: &PoolState) -> Vec<(String, String, Option<String>)> {
    state
        .instances
        .iter()
        .map(|i| (i.id.clone(), i.provider_id.clone(), i.request_token.clone()))
        .collect()
}

#[tokio::test]
async fn a_lost_record_launches_nothing_twice() {
    let env = Env::start().await;
    let config = env.config(&json!({}));
    env.reconcile_cluster(&config).await;
    let mut request = env.pool_request(&config, 3);
    let settled = env.settle_pool(&mut request).await;

    // The host lost every record (a crash before it wrote the result).
    request.instances.clear();
    let state = env
        .runtime
        .reconcile_pool(PROVIDER, &request)
        .await
        .expect("machine-pools.reconcile");
    assert_eq!(env.inventory(CLUSTER).live().len(), 3);
    assert_eq!(identities(&state), identities(&settled));
    assert!(state.ready);

    // Or only some: the rest are found by their tags all the same.
    request.instances = vec![settled.instances[2].clone()];
    let state = env
        .runtime
        .reconcile_pool(PROVIDER, &request)
        .await
        .unwrap();
    assert_eq!(identities(&state), identities(&settled));
    assert_eq!(env.inventory(CLUSTER).instances.len(), 3);
}

#[tokio::test]
async fn deletion_removes_only_what_is_tagged_for_the_cluster() {
    let env = Env::start().await;
    let config = env.config(&json!({}));
    let foreign = env
        .moto
        .boto3(FOREIGN_VPC, &["default/other"])
        .expect("a VPC of another cluster");
    env.reconcile_cluster(&config).await;
    let mut request = env.pool_request(&config, 2);
    env.settle_pool(&mut request).await;

    // The pool goes.
    let delete = env.delete_pool_request(&config);
    let mut done = false;
    for _ in 0..ATTEMPTS {
        let outcome = env.runtime.delete_pool(PROVIDER, &delete).await.unwrap();
        done = matches!(outcome, DeleteOutcome::Done);
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(done, "the pool was not deleted");
    let found = env.inventory(CLUSTER);
    assert!(found.live().is_empty(), "{found:?}");
    assert_eq!(found.instances.len(), 2);

    // The cluster goes, with an instance still in it: that first.
    let mut request = env.pool_request(&config, 1);
    env.settle_pool(&mut request).await;
    let cluster = env.cluster_request(&config);
    let first = env
        .runtime
        .delete_cluster(PROVIDER, &cluster)
        .await
        .unwrap();
    assert!(matches!(first, DeleteOutcome::InProgress(_)), "{first:?}");
    assert_eq!(env.inventory(CLUSTER).vpcs.len(), 1, "the network waits");
    for _ in 0..ATTEMPTS {
        let outcome = env
            .runtime
            .delete_cluster(PROVIDER, &cluster)
            .await
            .unwrap();
        done = matches!(outcome, DeleteOutcome::Done);
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(done, "the cluster was not deleted");
    let found = env.inventory(CLUSTER);
    assert!(
        found.vpcs.is_empty() && found.subnets.is_empty() && found.groups.is_empty(),
        "{found:?}"
    );
    assert!(found.live().is_empty());
    let other = env.inventory("default/other");
    assert_eq!(
        other.vpcs.iter().map(|v| v.id.as_str()).collect::<Vec<_>>(),
        [foreign.trim()]
    );
    // Done stays done.
    let again = env
        .runtime
        .delete_cluster(PROVIDER, &cluster)
        .await
        .unwrap();
    assert!(matches!(again, DeleteOutcome::Done), "{again:?}");
}

#[tokio::test]
async fn config_ec2_refuses_is_invalid_config_at_its_path() {
    let env = Env::start().await;
    let bad_zone = env.config(&json!({"zones": ["us-east-1q"]}));
    let result = env
        .runtime
        .reconcile_cluster(PROVIDER, &env.cluster_request(&bad_zone))
        .await;
    assert_eq!(invalid_config_path(result), "$.zones[0]");

    let config = env.config(&json!({}));
    env.reconcile_cluster(&config).await;
    let bad_ami = env.config(&json!({"ami": "ami-0123456789abcdef0"}));
    let result = env
        .runtime
        .reconcile_pool(PROVIDER, &env.pool_request(&bad_ami, 1))
        .await;
    assert_eq!(invalid_config_path(result), "$.ami");
    assert!(env.inventory(CLUSTER).instances.is_empty());

    // A pool before its cluster's network: wait, naming what is missing.
    let elsewhere = env.config(&json!({"zones": ["us-east-1c"]}));
    let result = env
        .runtime
        .reconcile_pool(PROVIDER, &env.pool_request(&elsewhere, 1))
        .await;
    let ProviderError::RetryAfter(retry) = provider_error(result) else {
        panic!("expected retry-after");
    };
    assert!(retry.message.contains("us-east-1c"), "{}", retry.message);
}

#[tokio::test]
async fn refused_keys_are_terminal_and_name_the_host() {
    let env = Env::start().await;
    let mut request = env.cluster_request(&env.config(&json!({})));
    request.credentials = credentials("not-the-secret-access-key", &env.moto);
    let result = env.runtime.reconcile_cluster(PROVIDER, &request).await;
    let Err(CallError::CredentialsRejected { error, status, .. }) = result else {
        panic!("expected the host to see the keys refused, got {result:?}");
    };
    // moto answers a bad signature 401 AuthFailure, EC2 403.
    assert!(matches!(status, 401 | 403), "{status}");
    let ProviderError::Terminal(terminal) = error else {
        panic!("expected terminal, got {error:?}");
    };
    assert_eq!(terminal.reason, "Unauthorized");
    assert!(
        terminal.message.contains(&env.moto.authority),
        "{}",
        terminal.message
    );
    assert!(!terminal.message.contains("not-the-secret-access-key"));
}

/// Answers as a broken EC2 might, by path.
async fn broken_ec2() -> SocketAddr {
    const THROTTLED: &str = "<Response><Errors><Error><Code>RequestLimitExceeded</Code>\
        <Message>Request limit exceeded.</Message></Error></Errors><RequestID>r</RequestID></Response>";
    const TRUNCATED: &str = "<?xml version=\"1.0\"?><DescribeVpcsResponse \
        xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15\"><vpcSet><item><vpcId>vpc-1</vp";
    let app = Router::new()
        .route(
            "/500",
            post(|| async {
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "<html>upstream exploded</html>",
                )
            }),
        )
        .route(
            "/throttled",
            post(|| async { (StatusCode::SERVICE_UNAVAILABLE, THROTTLED) }),
        )
        .route("/truncated", post(|| async { TRUNCATED }))
        .route("/garbage", post(|| async { "{\"not\": \"xml\"}" }))
        .route(
            "/hang",
            post(|| async {
                tokio::time::sleep(Duration::from_secs(120)).await;
                ""
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test]
async fn a_broken_endpoint_is_retried_with_its_cause_never_a_trap() {
    let addr = broken_ec2().await;
    // A port nothing listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        listener.local_addr().expect("its address")
    };
    let runtime = runtime(vec![addr.to_string(), closed.to_string()], None).await;
    let cases = [
        (format!("http://{addr}/500"), "upstream exploded"),
        (format!("http://{addr}/throttled"), "RequestLimitExceeded"),
        (format!("http://{addr}/truncated"), "cannot be read"),
        (format!("http://{addr}/garbage"), "cannot be read"),
        (format!("http://{closed}"), "connection refused"),
    ];
    for (endpoint, cause) in cases {
        let config = config(&endpoint, &json!({}));
        let result = runtime
            .reconcile_cluster(PROVIDER, &requests::cluster_request(&config))
            .await;
        let error = provider_error(result);
        let ProviderError::RetryAfter(retry) = &error else {
            panic!("{endpoint}: expected retry-after, got {error:?}");
        };
        assert!(
            retry.message.contains(cause) && (2..=30).contains(&retry.seconds),
            "{endpoint}: {retry:?}"
        );
        let result = runtime
            .reconcile_pool(PROVIDER, &requests::reconcile_pool(&config, 2))
            .await;
        assert!(
            matches!(provider_error(result), ProviderError::RetryAfter(_)),
            "{endpoint}"
        );
    }
}

#[tokio::test]
async fn an_endpoint_that_never_answers_is_retried_naming_the_timeout() {
    let addr = broken_ec2().await;
    let runtime = runtime(vec![addr.to_string()], None).await;
    let config = config(&format!("http://{addr}/hang"), &json!({}));
    // The host cuts every HTTP phase at 10 s, inside the call's 20 s.
    let result = runtime
        .reconcile_cluster(PROVIDER, &requests::cluster_request(&config))
        .await;
    let error = provider_error(result);
    let ProviderError::RetryAfter(retry) = &error else {
        panic!("expected retry-after, got {error:?}");
    };
    assert!(retry.message.contains("timed out"), "{retry:?}");
}
