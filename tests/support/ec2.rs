//! An EC2 account in moto for tests through the operator, whichever core
//! runs Clusters and MachinePools: moto with signature checks on, kubelets
//! registering a Node per running instance in the workload cluster, the
//! credentials Secret, and the aws-ec2 ProviderModule whose requests the
//! host signs (the provider holds no key). What the provider made is
//! counted in moto with boto3, never through the provider.

use std::time::{Duration, Instant};

use capwasm::api::ProviderModule;
use capwasm::api::providermodule::World;
use capwasm::testing::objects::{self, ClusterBuilder, MachinePoolBuilder, ProviderModuleBuilder};
use capwasm::testing::{KUBEADM_JOIN_CONFIG, guest_path};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::ec2_kubelet::Ec2Kubelets;
use crate::flows::{Providers, WAIT, create, create_pool, credentials_secret};
use crate::moto::{Moto, signed_capabilities};
use crate::{ApiServer, Error, Result};

/// An image moto ships.
pub const AMI: &str = "ami-12c6146b";
/// Where every Cluster's machines join: the kubelets register a Node only
/// for an instance whose user data says so.
pub const ENDPOINT: (&str, i32) = ("10.0.0.10", 6443);
/// The zones a Cluster's network spans.
pub const ZONES: [&str; 2] = ["us-east-1a", "us-east-1b"];

/// Prints `<instances> <vpcs> <subnets> <groups>` tagged for cluster
/// `argv[2]` and not terminated.
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

/// moto, its kubelets, and the provider's module once [`Ec2::load`]ed.
pub struct Ec2 {
    /// The emulator.
    pub moto: Moto,
    /// The instances' kubelets.
    pub kubelets: Ec2Kubelets,
    /// The ProviderModule's name (`<namespace>-ec2`).
    pub module: String,
    /// The credentials Secret's name (`<namespace>-aws`).
    pub secret: String,
    /// Where the provider sends its requests: moto, or a proxy before it.
    pub authority: String,
}

impl Ec2 {
    /// Starts moto and the kubelets (registering Nodes through `workload`)
    /// and writes the credentials Secret with moto's key, for the objects
    /// of namespace `ns`; loads no module yet.
    pub async fn start(client: &Client, workload: Client, ns: &str) -> Result<Self> {
        let moto = Moto::start().await?;
        let kubelets = Ec2Kubelets::start(&moto, "us-east-1", workload)?;
        let secret = format!("{ns}-aws");
        credentials_secret(
            client,
            &secret,
            &[
                ("AWS_ACCESS_KEY_ID", &moto.access_key_id),
                ("AWS_SECRET_ACCESS_KEY", &moto.secret_access_key),
            ],
        )
        .await;
        Ok(Self {
            authority: moto.authority.clone(),
            moto,
            kubelets,
            module: format!("{ns}-ec2"),
            secret,
        })
    }

    /// Creates ProviderModule [`Ec2::module`] of the aws-ec2 provider,
    /// reaching `authority` (moto's own, or a proxy's in front of it), every
    /// request there signed by the host.
    pub async fn load(&mut self, client: &Client, authority: &str) -> Result<()> {
        authority.clone_into(&mut self.authority);
        let mut module = ProviderModuleBuilder::file(
            &self.module,
            World::Infrastructure,
            &guest_path("aws_ec2.wasm").to_string_lossy(),
        )
        .timeout_millis(20_000)
        .build();
        module.spec.capabilities = Some(signed_capabilities(authority, &self.secret));
        let api: Api<ProviderModule> = Api::all(client.clone());
        api.create(&PostParams::default(), &module).await?;
        Ok(())
    }

    /// The provider's config: the endpoint it reaches, an image moto ships,
    /// [`ZONES`], the API server open to 10.0.0.0/8.
    pub fn config(&self) -> Value {
        json!({
            "region": "us-east-1",
            "endpoint": format!("http://{}", self.authority),
            "ami": AMI,
            "zones": ZONES,
            "apiServerCidrs": ["10.0.0.0/8"],
        })
    }

    /// Creates Cluster `name` joined at [`ENDPOINT`], its kubeconfig Secret
    /// for `workload`, and its WasmCluster on EC2 with `config`.
    pub async fn cluster(
        &self,
        client: &Client,
        workload: &ApiServer,
        (ns, name): (&str, &str),
        config: Value,
    ) -> Result<()> {
        self.kubelets
            .endpoints
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(
                format!("{ns}/{name}"),
                format!("{}:{}", ENDPOINT.0, ENDPOINT.1),
            );
        create(client, &workload.kubeconfig_secret(ns, name)?).await?;
        create(
            client,
            &objects::wasm_cluster(ns, name, &self.module, config),
        )
        .await?;
        create(
            client,
            &ClusterBuilder::new(ns, name)
                .endpoint(ENDPOINT.0, ENDPOINT.1)
                .build(),
        )
        .await?;
        Ok(())
    }

    /// Creates MachinePool `name` of `cluster` with `replicas`, its
    /// WasmMachinePool on EC2 with `config` and its WasmBootstrapConfig of
    /// kubeadm module `bootstrap`.
    pub async fn pool(
        &self,
        client: &Client,
        (ns, name, cluster): (&str, &str, &str),
        replicas: i32,
        bootstrap: &str,
        config: Value,
    ) -> Result<()> {
        let providers = Providers {
            bootstrap: (
                bootstrap.to_owned(),
                serde_json::from_str(KUBEADM_JOIN_CONFIG).unwrap_or_default(),
            ),
            infrastructure: (self.module.clone(), config),
        };
        let pool = MachinePoolBuilder::new(ns, name, cluster)
            .replicas(replicas)
            .build();
        create_pool(client, &pool, &providers).await
    }

    /// What moto holds for Cluster `<namespace>/<name>`: [`tagged`].
    pub fn tagged(&self, cluster: &str) -> Result<[usize; 4]> {
        tagged(&self.moto, cluster)
    }

    /// Waits (at most [`WAIT`]) until moto holds `instances` live instances
    /// for `cluster`.
    pub async fn wait_for_instances(&self, cluster: &str, instances: usize) -> Result<()> {
        let deadline = Instant::now() + WAIT;
        loop {
            let found = self.tagged(cluster)?[0];
            if found == instances {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Tool(format!(
                    "{cluster}: {found} live instances after {WAIT:?}, not {instances}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// What `moto` holds for Cluster `<namespace>/<name>`, not terminated:
/// instances, VPCs, subnets, security groups.
///
/// # Errors
///
/// If boto3 fails or prints something else.
pub fn tagged(moto: &Moto, cluster: &str) -> Result<[usize; 4]> {
    let printed = moto.boto3(TAGGED, &[cluster])?;
    let counts: Vec<usize> = printed
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    counts
        .try_into()
        .map_err(|_| Error::Tool(format!("moto's inventory: four counts, not {printed:?}")))
}
