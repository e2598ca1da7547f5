//! The EC2 provider through the operator, against moto (signatures
//! checked; the host signs, the provider holds no key): a Cluster and a
//! 3-replica MachinePool reach Running with a Node per instance (the
//! harness's EC2 kubelets play the machines), scale 3 → 5 → 1, and the
//! Cluster's deletion leaves no instance, subnet, security group or VPC
//! tagged for it.

use capwasm::api::providermodule::{
    AwsSigV4, ModuleCapabilities, RequestAuth, SecretReference, World,
};
use capwasm::api::{MachinePool, ProviderModule};
use capwasm::testing::objects::{self, ClusterBuilder, MachinePoolBuilder, ProviderModuleBuilder};
use capwasm::testing::{KUBEADM_JOIN_CONFIG, guest_path};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};
use testenv::CREDENTIALS_NAMESPACE;
use testenv::ec2_kubelet::Ec2Kubelets;
use testenv::flows::{
    Providers, Scenario, create, create_pool, credentials_secret, scale, wait_for, wait_for_module,
    wait_for_pool,
};
use testenv::moto::Moto;

/// An image moto ships.
const AMI: &str = "ami-12c6146b";
/// Where the Cluster's machines join (the kubelets check their user data says so).
const ENDPOINT: (&str, i32) = ("10.0.0.10", 6443);

/// Prints `<instances> <vpcs> <subnets> <groups>` tagged for cluster `argv[2]`
/// and not terminated.
const TAGGED: &str = r#"
import sys, boto3
ec2 = boto3.client("ec2", endpoint_url=sys.argv[1])
tag = [{"Name": "tag:capwasm.dev/cluster", "Values": [sys.argv[2]]}]
live = ["pending", "running", "stopping", "stopped", "shutting-down"]
instances = sum(len(r["Instances"]) for r in ec2.describe_instances(
    Filters=tag + [{"Name": "instance-state-name", "Values": live}])["Reservations"])
print(instances, len(ec2.describe_vpcs(Filters=tag)["Vpcs"]),
      len(ec2.describe_subnets(Filters=tag)["Subnets"]),
      len(ec2.describe_security_groups(Filters=tag)["SecurityGroups"]))
"#;

/// What moto holds for `cluster`: instances, VPCs, subnets, security groups.
fn tagged(moto: &Moto, cluster: &str) -> [usize; 4] {
    let printed = moto.boto3(TAGGED, &[cluster]).unwrap();
    let counts: Vec<usize> = printed
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    counts.try_into().unwrap()
}

fn module(name: &str, secret: &str, moto: &Moto) -> ProviderModule {
    let mut module = ProviderModuleBuilder::file(
        name,
        World::Infrastructure,
        &guest_path("aws_ec2.wasm").to_string_lossy(),
    )
    .timeout_millis(20_000)
    .build();
    module.spec.capabilities = Some(moto.signed_capabilities(secret));
    module
}

/// Waits until moto has `instances` live instances for `cluster`.
async fn instances(moto: &Moto, cluster: &str, instances: usize) {
    let deadline = std::time::Instant::now() + testenv::flows::WAIT;
    loop {
        let found = tagged(moto, cluster)[0];
        if found == instances {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{cluster}: {found} live instances, not {instances}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn a_pool_on_ec2_runs_scales_and_its_cluster_leaves_nothing_behind() {
    let moto = Moto::start().await.expect("moto (tests/moto/install.sh)");
    let Scenario {
        env,
        client,
        ns,
        apis,
        modules,
        ..
    } = Scenario::new("ec2").await;
    let workload = env.workload().expect("a workload server");
    let kubelets = Ec2Kubelets::start(&moto, "us-east-1", workload.client().unwrap()).unwrap();
    let cluster = format!("{ns}/c1");
    kubelets
        .endpoints
        .lock()
        .unwrap()
        .insert(cluster.clone(), format!("{}:{}", ENDPOINT.0, ENDPOINT.1));

    let (ec2, secret) = (format!("{ns}-ec2"), format!("{ns}-aws"));
    credentials_secret(
        &client,
        &secret,
        &[
            ("AWS_ACCESS_KEY_ID", &moto.access_key_id),
            ("AWS_SECRET_ACCESS_KEY", &moto.secret_access_key),
        ],
    )
    .await;
    let api: Api<ProviderModule> = Api::all(client.clone());
    api.create(&PostParams::default(), &module(&ec2, &secret, &moto))
        .await
        .unwrap();
    wait_for_module(&api, &ec2, "Ready").await;

    let config = json!({
        "region": "us-east-1",
        "endpoint": format!("http://{}", moto.authority),
        "ami": AMI,
        "zones": ["us-east-1a", "us-east-1b"],
        "apiServerCidrs": ["10.0.0.0/8"],
    });
    create(&client, &workload.kubeconfig_secret(&ns, "c1").unwrap())
        .await
        .unwrap();
    create(
        &client,
        &objects::wasm_cluster(&ns, "c1", &ec2, config.clone()),
    )
    .await
    .unwrap();
    create(
        &client,
        &ClusterBuilder::new(&ns, "c1")
            .endpoint(ENDPOINT.0, ENDPOINT.1)
            .build(),
    )
    .await
    .unwrap();
    let kubeadm: Value = serde_json::from_str(KUBEADM_JOIN_CONFIG).unwrap();
    let providers = Providers {
        bootstrap: (modules.bootstrap.clone(), kubeadm),
        infrastructure: (ec2.clone(), config),
    };
    let pool = MachinePoolBuilder::new(&ns, "p1", "c1").replicas(3).build();
    create_pool(&client, &pool, &providers).await.unwrap();

    let running = wait_for_pool(&apis.pools, "p1", "Running", 3).await;
    assert!(
        running
            .spec
            .provider_id_list
            .iter()
            .all(|id| id.starts_with("aws:///us-east-1")),
        "{:?}",
        running.spec.provider_id_list
    );
    assert_eq!(tagged(&moto, &cluster), [3, 1, 2, 1]);

    scale(&apis.pools, "p1", 5).await.unwrap();
    wait_for_pool(&apis.pools, "p1", "Running", 5).await;
    instances(&moto, &cluster, 5).await;
    scale(&apis.pools, "p1", 1).await.unwrap();
    wait_for_pool(&apis.pools, "p1", "Running", 1).await;
    instances(&moto, &cluster, 1).await;

    apis.clusters
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&apis.clusters, "c1", "the Cluster is gone", |c| c.is_none()).await;
    let pools: &Api<MachinePool> = &apis.pools;
    assert!(pools.get_opt("p1").await.unwrap().is_none());
    assert_eq!(
        tagged(&moto, &cluster),
        [0, 0, 0, 0],
        "nothing tagged for the Cluster is left"
    );
}
