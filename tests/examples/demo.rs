//! `make demo`: capwasm end to end on this machine, in a few minutes.
//!
//! Starts a management and a workload control plane (real kube-apiserver
//! and etcd), the simulated cloud (its instances register as Nodes in the
//! workload cluster, as kubelets would), a local OCI registry and the
//! operator; pushes the kubeadm-bootstrap and sim-infrastructure providers
//! to the registry and signs them with cosign; then creates a Cluster and a
//! 3-replica MachinePool they serve, scales it, hot-swaps the
//! infrastructure provider to version 0.2.0 (which labels the Nodes it
//! makes) by moving its signed tag, scales again, and deletes everything;
//! then a PlatformCluster of two node groups, composed from a
//! ClusterTemplate by the sim-platform provider, rolls up to Ready and is
//! deleted. With `--ec2` (`make demo EC2=1`) it then
//! does the same on Amazon EC2's API as moto emulates it: the aws-ec2
//! provider, holding no key (the operator signs its requests), makes the
//! Cluster's network and a 3-replica pool's instances, and the Cluster's
//! deletion leaves nothing tagged for it. Each step is checked; the exit
//! code says whether all held, and a failure names the step. Ctrl-C cleans
//! up.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use capwasm::api::providermodule::World;
use capwasm::api::{Cluster, MachinePool, ProviderModule};
use capwasm::controllers::{Controllers, Settings};
use capwasm::oci::{Auth, ImageRef, push_component};
use capwasm::operator::{Config, Operator};
use capwasm::simcloud::{self, SimCloud};
use capwasm::testing::objects::{self, ClusterBuilder, MachinePoolBuilder, ProviderModuleBuilder};
use capwasm::testing::{KUBEADM_JOIN_CONFIG, guest_path};
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use testenv::ec2::Ec2;
use testenv::registry::{KeyPair, Registry};
use testenv::{CREDENTIALS_NAMESPACE, TestEnv};

#[path = "demo_platform.rs"]
mod platform;

const NAMESPACE: &str = "demo";
const STEP_LIMIT: Duration = Duration::from_secs(180);

#[tokio::main]
async fn main() {
    let started = Instant::now();
    let ec2 = std::env::args().skip(1).any(|arg| arg == "--ec2");
    let outcome = tokio::select! {
        outcome = run(ec2) => Some(outcome),
        _ = tokio::signal::ctrl_c() => None,
    };
    // `run` has been dropped here, and with it everything it started: the
    // control planes, the cloud and the operator stop on success, on
    // failure and on Ctrl-C alike.
    match outcome {
        None => {
            eprintln!("\ninterrupted: the control planes, the cloud and the operator are stopped");
            std::process::exit(130);
        }
        Some(Ok(steps)) => {
            println!("\nsummary");
            for (step, took) in &steps {
                println!("  ok   {step:<66} {:>6.1}s", took.as_secs_f64());
            }
            println!(
                "\nall {} steps held in {:.0}s",
                steps.len(),
                started.elapsed().as_secs_f64()
            );
        }
        Some(Err(error)) => {
            let causes: Vec<String> = error.chain().map(ToString::to_string).collect();
            eprintln!("\ndemo failed: {}", causes.join(": "));
            std::process::exit(1);
        }
    }
}

/// The steps, each checked (the EC2 leg's too with `ec2`); returns their
/// names and durations.
async fn run(ec2: bool) -> anyhow::Result<Vec<(String, Duration)>> {
    let mut steps = Steps::default();
    let env = steps
        .run("start management and workload control planes", async {
            Box::pin(TestEnv::start(testenv::Options::default()))
                .await
                .context("cannot start kube-apiserver and etcd (run `make controlplane`)")
        })
        .await?;
    let client = env.management().client()?;
    let workload = env.workload().context("no workload server")?;
    let (cloud, endpoint) = steps
        .run("start the simulated cloud", async {
            let running = SimCloud::new(simcloud::Settings {
                // Long enough to watch machines boot and the pool scale.
                boot_delay: Duration::from_secs(3),
                termination_delay: Duration::from_secs(1),
                nodes: Some(workload.client()?),
                ..simcloud::Settings::default()
            })
            .start_on_loopback()
            .await?;
            let endpoint = running.endpoint();
            anyhow::Ok((running, endpoint))
        })
        .await?;
    let operator = operator(&env)?;
    let filled = operator.readiness().check("caches");
    let operator = tokio::spawn(operator.run(filled, std::future::pending()));
    println!("  operator running (all controllers); simulated cloud at {endpoint}");

    let (registry, key) = steps
        .run(
            "start a local OCI registry; make a cosign key pair",
            async {
                let registry = Registry::start().await.context(
                    "cannot start the registry (tests/registry/build.sh, tests/cosign/build.sh)",
                )?;
                let key = registry.key_pair("demo")?;
                anyhow::Ok((registry, key))
            },
        )
        .await?;
    steps
        .run(
            "push, sign and load kubeadm-bootstrap and sim-infrastructure",
            async { create_modules(&client, &registry, &key).await },
        )
        .await?;
    steps
        .run("create Cluster demo and a 3-replica MachinePool", async {
            create_cluster(&client, workload, &endpoint).await
        })
        .await?;
    steps
        .run(
            "MachinePool reaches Running with 3 Nodes",
            watch_pool(&client, (NAMESPACE, "workers"), 3),
        )
        .await?;
    steps
        .run("scale to 5: Running with 5 Nodes", scale(&client, 5))
        .await?;
    steps
        .run(
            "sim's signed tag moved to 0.2.0: hot-swapped (no restart)",
            async { swap(&client, &registry, &key).await },
        )
        .await?;
    steps
        .run(
            "scale to 6: the new Node is made by 0.2.0",
            scale(&client, 6),
        )
        .await?;
    steps
        .run(
            "the new Node carries 0.2.0's label, the others not",
            check_labels(&client, workload),
        )
        .await?;
    steps
        .run(
            "delete the Cluster: pools, Nodes and instances go",
            delete(&client, &cloud),
        )
        .await?;
    Box::pin(platform::leg(&mut steps, &client, workload, &endpoint)).await?;
    if ec2 {
        ec2_leg(&mut steps, &client, workload).await?;
    }
    operator.abort();
    Ok(steps.done)
}

/// The operator with every controller, on `env`'s management server.
fn operator(env: &TestEnv) -> anyhow::Result<Operator> {
    let config = Config {
        controllers: Controllers::All,
        settings: Settings {
            credentials_namespace: Some(CREDENTIALS_NAMESPACE.into()),
            ..Settings::default()
        },
        ..Config::default()
    };
    Ok(Operator::new(env.management().config().clone(), config)?)
}

/// A Cluster and a 3-replica pool on EC2 (moto), then deleted.
async fn ec2_leg(
    steps: &mut Steps,
    client: &Client,
    workload: &testenv::ApiServer,
) -> anyhow::Result<()> {
    let ec2 = steps
        .run(
            "start moto (EC2) and load aws-ec2; the operator signs its requests",
            async {
                let mut ec2 = Ec2::start(client, workload.client()?, NAMESPACE)
                    .await
                    .context("starting moto (tests/moto/install.sh installs it)")?;
                let authority = ec2.moto.authority.clone();
                ec2.load(client, &authority).await?;
                print_module(client, &ec2.module).await?;
                anyhow::Ok(ec2)
            },
        )
        .await?;
    let cluster = format!("{NAMESPACE}/ec2");
    steps
        .run(
            "create Cluster ec2 and a 3-replica MachinePool on EC2",
            async {
                ec2.cluster(client, workload, (NAMESPACE, "ec2"), ec2.config())
                    .await?;
                ec2.pool(
                    client,
                    (NAMESPACE, "ec2-workers", "ec2"),
                    3,
                    "kubeadm",
                    ec2.config(),
                )
                .await?;
                anyhow::Ok(())
            },
        )
        .await?;
    steps
        .run(
            "MachinePool reaches Running with 3 Nodes, one per instance",
            watch_pool(client, (NAMESPACE, "ec2-workers"), 3),
        )
        .await?;
    steps
        .run("EC2 holds a VPC, 2 subnets, a security group, 3 instances", async {
            let [instances, vpcs, subnets, groups] = ec2.tagged(&cluster)?;
            println!(
                "    tagged for {cluster}: {instances} instances, {vpcs} VPC, {subnets} subnets, {groups} security group"
            );
            if [instances, vpcs, subnets, groups] != [3, 1, 2, 1] {
                bail!("expected 3 instances, 1 VPC, 2 subnets, 1 security group");
            }
            Ok(())
        })
        .await?;
    steps
        .run(
            "delete the Cluster: nothing tagged for it is left in EC2",
            async {
                let clusters: Api<Cluster> = Api::namespaced(client.clone(), NAMESPACE);
                clusters.delete("ec2", &DeleteParams::default()).await?;
                until_gone(&clusters, "ec2").await?;
                let left = ec2.tagged(&cluster)?;
                println!("    left tagged for {cluster}: {left:?}");
                if left != [0, 0, 0, 0] {
                    bail!("EC2 still holds {left:?} (instances, VPCs, subnets, groups)");
                }
                Ok(())
            },
        )
        .await?;
    Ok(())
}

#[derive(Default)]
struct Steps {
    done: Vec<(String, Duration)>,
}

impl Steps {
    /// Runs one step within [`STEP_LIMIT`], printing it as it starts and ends.
    async fn run<T>(
        &mut self,
        name: &str,
        step: impl std::future::Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<T> {
        println!("\n==> {name}");
        let started = Instant::now();
        let value = tokio::time::timeout(STEP_LIMIT, step)
            .await
            .map_err(|_| anyhow::anyhow!("did not finish within {STEP_LIMIT:?}"))
            .and_then(|r| r)
            .with_context(|| format!("step \"{name}\""))?;
        println!("    done in {:.1}s", started.elapsed().as_secs_f64());
        self.done.push((name.to_owned(), started.elapsed()));
        Ok(value)
    }
}

async fn create_modules(client: &Client, registry: &Registry, key: &KeyPair) -> anyhow::Result<()> {
    let modules: Api<ProviderModule> = Api::all(client.clone());
    let mut made = Vec::new();
    for (name, world, file) in [
        ("kubeadm", World::Bootstrap, "kubeadm_bootstrap.wasm"),
        ("sim", World::Infrastructure, "sim_infrastructure.wasm"),
    ] {
        let tag = registry.image(&format!("providers/{name}"), "stable");
        publish(registry, key, file, &tag).await?;
        let module = ProviderModuleBuilder::file(name, world, "/unused")
            .oci(&tag)
            .verified_by(&[&key.public_pem]);
        made.push(match world {
            World::Infrastructure | World::ControlPlane => module.allowed_hosts(&["127.0.0.1"]),
            World::Bootstrap | World::Platform => module,
        });
    }
    for module in made {
        modules
            .create(&PostParams::default(), &module.build())
            .await?;
    }
    for name in ["kubeadm", "sim"] {
        print_module(client, name).await?;
    }
    Ok(())
}

/// Releases guest `file` as `tag`: pushed under a candidate tag, its digest
/// signed with cosign, and only then `tag` moved to it (a tag never names an
/// unsigned digest).
async fn publish(registry: &Registry, key: &KeyPair, file: &str, tag: &str) -> anyhow::Result<()> {
    let image = ImageRef::parse(&format!("{tag}-candidate"), true)?;
    let pushed = push_component(&image, &Auth::Anonymous, std::fs::read(guest_path(file))?).await?;
    registry.release(&pushed.image, key, tag)?;
    println!("    {tag} -> {} (signed)", pushed.manifest_digest);
    Ok(())
}

/// Waits until module `name` is Ready, and says what it serves.
async fn print_module(client: &Client, name: &str) -> anyhow::Result<()> {
    let modules: Api<ProviderModule> = Api::all(client.clone());
    let module = until(&modules, name, |m: &ProviderModule| {
        let status = m.status.clone().unwrap_or_default();
        if status.phase.as_deref() == Some("Failed") {
            return Err(status.message.unwrap_or_default());
        }
        Ok(status.phase.as_deref() == Some("Ready"))
    })
    .await?;
    let status = module.status.unwrap_or_default();
    println!(
        "    {name}: {} {} {} (loaded in {} ms)",
        status.provider_name.unwrap_or_default(),
        status.version.unwrap_or_default(),
        status.active_digest.unwrap_or_default(),
        status.load_time_millis.unwrap_or_default()
    );
    Ok(())
}

async fn create_cluster(
    client: &Client,
    workload: &testenv::ApiServer,
    endpoint: &str,
) -> anyhow::Result<()> {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let namespace = k8s_openapi::api::core::v1::Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(NAMESPACE.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await?;
    // The simulated cloud boots and terminates in a fraction of a second.
    let sim = json!({ "endpoint": endpoint, "region": "local-1", "pollSeconds": 1 });
    let mut cluster_config = sim.clone();
    cluster_config["controlPlaneHost"] = json!("127.0.0.1");
    testenv::flows::create(client, &workload.kubeconfig_secret(NAMESPACE, "demo")?).await?;
    testenv::flows::create(
        client,
        &objects::wasm_cluster(NAMESPACE, "demo", "sim", cluster_config),
    )
    .await?;
    testenv::flows::create(client, &ClusterBuilder::new(NAMESPACE, "demo").build()).await?;
    let kubeadm: serde_json::Value = serde_json::from_str(KUBEADM_JOIN_CONFIG)?;
    testenv::flows::create(
        client,
        &objects::bootstrap_config(NAMESPACE, "workers", "kubeadm", kubeadm),
    )
    .await?;
    testenv::flows::create(
        client,
        &objects::wasm_machine_pool(NAMESPACE, "workers", "sim", sim),
    )
    .await?;
    testenv::flows::create(
        client,
        &MachinePoolBuilder::new(NAMESPACE, "workers", "demo")
            .replicas(3)
            .build(),
    )
    .await?;
    Ok(())
}

/// Prints pool `(namespace, name)`'s progress on every change until it is
/// Running with `replicas` Nodes.
async fn watch_pool(
    client: &Client,
    (namespace, name): (&str, &str),
    replicas: i32,
) -> anyhow::Result<()> {
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), namespace);
    let mut last = String::new();
    until(&pools, name, |pool: &MachinePool| {
        let status = pool.status.clone().unwrap_or_default();
        let phase = status.phase.clone().unwrap_or_else(|| "-".into());
        let ready = status.ready_replicas.unwrap_or(0);
        let line = format!(
            "    {:<13} {} {ready}/{} Nodes Ready  (machines {})",
            phase,
            bar(ready, pool.spec.replicas.unwrap_or(0)),
            pool.spec.replicas.unwrap_or(0),
            status.replicas.unwrap_or(0),
        );
        if line != last {
            println!("{line}");
            last = line;
        }
        Ok(phase == "Running"
            && ready == replicas
            && status.node_refs.len() == usize::try_from(replicas).unwrap_or(0))
    })
    .await
    .map(drop)
}

fn bar(done: i32, of: i32) -> String {
    let width = usize::try_from(of.max(1)).unwrap_or(1);
    let filled = usize::try_from(done.clamp(0, of.max(0))).unwrap_or(0);
    format!(
        "[{}{}]",
        "#".repeat(filled),
        ".".repeat(width.saturating_sub(filled))
    )
}

async fn scale(client: &Client, replicas: i32) -> anyhow::Result<()> {
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NAMESPACE);
    pools
        .patch_scale(
            "workers",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": replicas } })),
        )
        .await?;
    watch_pool(client, (NAMESPACE, "workers"), replicas).await
}

async fn swap(client: &Client, registry: &Registry, key: &KeyPair) -> anyhow::Result<()> {
    let modules: Api<ProviderModule> = Api::all(client.clone());
    let before = modules
        .get("sim")
        .await?
        .status
        .unwrap_or_default()
        .active_digest
        .unwrap_or_default();
    let tag = registry.image("providers/sim", "stable");
    publish(registry, key, "sim_infrastructure_v2.wasm", &tag).await?;
    let swapped = until(&modules, "sim", |m: &ProviderModule| {
        let status = m.status.clone().unwrap_or_default();
        Ok(status.phase.as_deref() == Some("Ready") && status.version.as_deref() == Some("0.2.0"))
    })
    .await?;
    let status = swapped.status.unwrap_or_default();
    println!(
        "    sim: {} -> {} (version {})",
        before,
        status.active_digest.unwrap_or_default(),
        status.version.unwrap_or_default()
    );
    Ok(())
}

async fn check_labels(client: &Client, workload: &testenv::ApiServer) -> anyhow::Result<()> {
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NAMESPACE);
    let nodes: Api<Node> = Api::all(workload.client()?);
    let refs = pools
        .get("workers")
        .await?
        .status
        .unwrap_or_default()
        .node_refs;
    let mut by_version: BTreeMap<String, usize> = BTreeMap::new();
    for node_ref in &refs {
        let node = nodes
            .get(node_ref.name.as_deref().unwrap_or_default())
            .await?;
        let version = node
            .metadata
            .labels
            .unwrap_or_default()
            .get("sim.capwasm.dev/provider-version")
            .cloned()
            .unwrap_or_else(|| "0.1.0 (no label)".into());
        *by_version.entry(version).or_default() += 1;
    }
    for (version, count) in &by_version {
        println!("    {count} Node(s) made by {version}");
    }
    if by_version.get("0.2.0").copied().unwrap_or(0) == 0 {
        bail!("no Node carries the 0.2.0 label");
    }
    Ok(())
}

async fn delete(client: &Client, cloud: &simcloud::RunningSimCloud) -> anyhow::Result<()> {
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NAMESPACE);
    clusters.delete("demo", &DeleteParams::default()).await?;
    let mut last = String::new();
    loop {
        let pools: Api<MachinePool> = Api::namespaced(client.clone(), NAMESPACE);
        let left = pools
            .list(&kube::api::ListParams::default())
            .await?
            .items
            .len();
        let instances = cloud
            .cloud()
            .instances_of(&format!("{NAMESPACE}/workers"))
            .len();
        let gone = clusters.get_opt("demo").await?.is_none();
        let line = format!(
            "    MachinePools left: {left}, cloud instances left: {instances}, Cluster gone: {gone}"
        );
        if line != last {
            println!("{line}");
            last = line;
        }
        if gone && left == 0 && instances == 0 {
            return Ok(());
        }
        // Progress is shown from the API and the cloud; a short pause between looks is enough here.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until object `name` is gone.
async fn until_gone<K>(api: &Api<K>, name: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    kube::runtime::wait::await_condition(api.clone(), name, |o: Option<&K>| o.is_none()).await?;
    Ok(())
}

/// Watches `name` until `check` says done (or fails with a message).
async fn until<K>(
    api: &Api<K>,
    name: &str,
    mut check: impl FnMut(&K) -> Result<bool, String>,
) -> anyhow::Result<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    use futures::StreamExt as _;
    use kube::runtime::{WatchStreamExt as _, watcher};
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut changes = watcher(api.clone(), config).applied_objects().boxed();
    while let Some(change) = changes.next().await {
        let Ok(object) = change else { continue };
        match check(&object) {
            Ok(true) => return Ok(object),
            Ok(false) => {}
            Err(message) => bail!("{name}: {message}"),
        }
    }
    bail!("the watch on {name} ended")
}
