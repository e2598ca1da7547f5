//! A whole install on an API server of its own, as a user has it: capwasm
//! alone (`capwasm run`, capwasm's CRDs), or upstream Cluster API's manager
//! with `capwasm run --controllers providers` beside it (upstream's CRDs and
//! capwasm's provider kinds); a workload API server, a simulated cloud, and
//! the provider modules in service.

use std::path::PathBuf;
use std::time::Duration;

use capwasm::api::{Cluster, MachinePool};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client, CustomResourceExt as _};

use crate::flows::{
    Modules, Objects, create_pool_providers, create_v1beta1, v1beta1_cluster, v1beta1_pool,
    wait_for,
};
use crate::operator::{Launch, OperatorProcess};
use crate::upstream::{UpstreamBuild, UpstreamManager};
use crate::{CREDENTIALS_NAMESPACE, Options, TestEnv};
use capwasm::simcloud;

/// The log target saying which object a process reconciles, at debug.
pub const RECONCILES: &str = "capwasm_operator::controllers::reconciler";

/// capwasm's CRDs a provider-mode install has: the provider kinds and
/// ProviderModule, not Cluster or MachinePool.
pub fn provider_crds() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../crds"));
    [
        "bootstrap.cluster.x-k8s.io_wasmbootstrapconfigs.yaml",
        "controlplane.cluster.x-k8s.io_wasmcontrolplanes.yaml",
        "infrastructure.cluster.x-k8s.io_wasmclusters.yaml",
        "infrastructure.cluster.x-k8s.io_wasmmachinepools.yaml",
        "infrastructure.cluster.x-k8s.io_wasmmachines.yaml",
        "runtime.capwasm.dev_providermodules.yaml",
        "platform.capwasm.dev_platformclusters.yaml",
        "platform.capwasm.dev_clustertemplates.yaml",
    ]
    .iter()
    .map(|file| dir.join(file))
    .collect()
}

/// Which controllers run Cluster and MachinePool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Core {
    /// Upstream's manager, with `capwasm run --controllers providers` beside it.
    Upstream,
    /// `capwasm run` alone, with capwasm's own CRDs.
    Capwasm,
}

/// Who `capwasm run` is to the API server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// The admin.
    Admin,
    /// The ServiceAccount of `deploy/provider-mode/`, holding its roles.
    ProviderModeRoles,
}

/// An install with its own API server, a workload server and a simulated
/// cloud: upstream's core and capwasm's providers, or capwasm alone.
pub struct Install {
    /// The management and workload API servers.
    pub env: TestEnv,
    /// The simulated cloud.
    pub cloud: simcloud::RunningSimCloud,
    /// Makes objects the cloud and modules serve.
    pub objects: Objects,
    /// The provider modules in service.
    pub modules: Modules,
    /// An admin client of the management server.
    pub client: Client,
    /// The namespace of the objects.
    pub ns: String,
    /// Upstream's manager, with [`Core::Upstream`].
    pub upstream: Option<UpstreamManager>,
    /// `capwasm run` (shard 0 of a [`Install::sharded`] install).
    pub operator: OperatorProcess,
    /// The other shards, as the caller starts them ([`Install::start_shard`]).
    pub shards: Vec<OperatorProcess>,
    /// Its flags.
    args: Vec<String>,
    /// Its `RUST_LOG`.
    log: String,
    /// Its precompiled cache, kept across restarts.
    _cache: tempfile::TempDir,
}

impl Install {
    /// Creates Cluster `name` (v1beta2) served by the modules.
    ///
    /// # Panics
    ///
    /// If it cannot be created.
    pub async fn cluster(&self, name: &str) {
        let workload = self.env.workload().expect("a part of the install");
        self.objects
            .create_cluster(&self.client, workload, &self.ns, name, &self.modules)
            .await
            .expect("a part of the install");
    }

    /// Creates Cluster `cluster` and its 2-replica MachinePool `pool` from
    /// `cluster.x-k8s.io/v1beta1` manifests as users write them, with what
    /// they need besides (kubeconfig Secret, provider objects).
    ///
    /// # Panics
    ///
    /// If any of them cannot be created.
    pub async fn v1beta1_cluster_and_pool(&self, cluster: &str, pool: &str) {
        let (client, ns) = (&self.client, &self.ns);
        let workload = self.env.workload().expect("a workload server");
        self.objects
            .create_cluster_infrastructure(client, workload, ns, cluster, &self.modules)
            .await
            .expect("the Cluster's kubeconfig and WasmCluster");
        create_v1beta1(client, ns, &v1beta1_cluster(ns, cluster))
            .await
            .expect("a v1beta1 Cluster");
        create_pool_providers(client, ns, pool, &self.objects.providers(&self.modules))
            .await
            .expect("the pool's provider objects");
        create_v1beta1(client, ns, &v1beta1_pool(ns, pool, cluster, 2))
            .await
            .expect("a v1beta1 MachinePool");
    }

    /// capwasm alone, once the operator has pointed the Cluster and
    /// MachinePool CRDs at its conversion webhook.
    ///
    /// # Panics
    ///
    /// If any part cannot start, or the CRDs are not pointed at the webhook
    /// in time.
    pub async fn standalone(prefix: &str) -> Self {
        let install = Box::pin(Self::with_core(prefix, Core::Capwasm)).await;
        let crds: Api<CustomResourceDefinition> = Api::all(install.client.clone());
        for name in [Cluster::crd_name(), MachinePool::crd_name()] {
            wait_for(
                &crds,
                name,
                "the CRD converts through the webhook's URL",
                |crd| {
                    crd.and_then(|c| c.spec.conversion.as_ref())
                        .and_then(|c| c.webhook.as_ref())
                        .and_then(|w| w.client_config.as_ref())
                        .is_some_and(|c| c.url.is_some() && c.ca_bundle.is_some())
                },
            )
            .await;
        }
        install
    }

    /// Where `capwasm run` serves its webhook (`host:port`), when it does.
    pub fn webhook_address(&self) -> Option<&str> {
        self.args
            .iter()
            .find_map(|a| a.strip_prefix("--webhook-bind-address="))
    }

    /// Upstream's core with capwasm's providers, objects in namespace
    /// `<prefix>-<random>`.
    ///
    /// # Panics
    ///
    /// If any part cannot start.
    pub async fn start(prefix: &str) -> Self {
        Self::with_core(prefix, Core::Upstream).await
    }

    /// `core` with `capwasm run` as the admin.
    ///
    /// # Panics
    ///
    /// If any part cannot start.
    pub async fn with_core(prefix: &str, core: Core) -> Self {
        Self::with(prefix, core, Identity::Admin).await
    }

    /// `core` with `capwasm run` as the admin, given `args` besides.
    ///
    /// # Panics
    ///
    /// If any part cannot start.
    pub async fn with_args(prefix: &str, core: Core, args: &[String]) -> Self {
        Self::build(prefix, core, Identity::Admin, args, "info").await
    }

    /// `core` with `capwasm run` as `identity`.
    ///
    /// # Panics
    ///
    /// If any part cannot start.
    pub async fn with(prefix: &str, core: Core, identity: Identity) -> Self {
        Self::build(prefix, core, identity, &[], "info").await
    }

    /// capwasm alone as shard 0 of `shards` (the others started with
    /// [`Install::start_shard`]), logging as `log` says ([`RECONCILES`] at
    /// debug: which objects each reconciles).
    ///
    /// # Panics
    ///
    /// If any part cannot start.
    pub async fn sharded(prefix: &str, shards: u32, log: &str) -> Self {
        let args = [format!("--shards={shards}"), "--shard-index=0".to_owned()];
        Self::build(prefix, Core::Capwasm, Identity::Admin, &args, log).await
    }

    /// capwasm alone as `shards` shards, each leading on its own Lease:
    /// shard 0 as [`Install::operator`], the others in [`Install::shards`].
    ///
    /// # Panics
    ///
    /// If any part cannot start.
    pub async fn with_shards(prefix: &str, shards: u32, log: &str) -> Self {
        let mut install = Self::sharded(prefix, shards, log).await;
        for index in 1..shards {
            let shard = install.start_shard(index, &shard_name(index), true).await;
            install.shards.push(shard);
        }
        install
    }

    /// Every `capwasm run` of the install: shard 0 (or the only one) first.
    pub fn operators(&self) -> impl Iterator<Item = &OperatorProcess> {
        std::iter::once(&self.operator).chain(&self.shards)
    }

    /// Starts `capwasm run` as shard `index` of a [`Install::sharded`]
    /// install, named `instance`; waits until it leads if `wait_to_lead`.
    ///
    /// # Panics
    ///
    /// As [`OperatorProcess::launch`].
    pub async fn start_shard(
        &self,
        index: u32,
        instance: &str,
        wait_to_lead: bool,
    ) -> OperatorProcess {
        let mut args: Vec<String> = self
            .args
            .iter()
            .filter(|a| {
                !a.starts_with("--shard-index=") && !a.starts_with("--webhook-bind-address=")
            })
            .cloned()
            .collect();
        args.push(format!("--shard-index={index}"));
        // Its own webhook listener; the API server calls shard 0's.
        args.push(format!(
            "--webhook-bind-address={}",
            crate::operator::free_address()
        ));
        self.launch(instance, &args, wait_to_lead).await
    }

    async fn launch(&self, instance: &str, args: &[String], wait_to_lead: bool) -> OperatorProcess {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let launch = Launch {
            log: &self.log,
            wait_to_lead,
            ..Launch::default()
        };
        OperatorProcess::launch(self.env.management(), &self.ns, instance, &args, launch).await
    }

    async fn build(
        prefix: &str,
        core: Core,
        identity: Identity,
        extra: &[String],
        log: &str,
    ) -> Self {
        let build = (core == Core::Upstream)
            .then(|| UpstreamBuild::locate().expect("a part of the install"));
        let crds = match &build {
            Some(build) => std::iter::once(build.crds.clone())
                .chain(provider_crds())
                .collect(),
            None => Options::default().crds,
        };
        let env = TestEnv::start(Options {
            crds,
            ..Options::default()
        })
        .await
        .expect("a part of the install");
        let upstream = match &build {
            Some(build) => Some(
                UpstreamManager::start(build, env.management())
                    .await
                    .expect("a part of the install"),
            ),
            None => None,
        };
        let client = env.management().client().expect("a part of the install");
        let ns = env
            .management()
            .create_namespace(prefix)
            .await
            .expect("a part of the install");
        let (cloud, objects) = Objects::start_cloud(
            env.workload()
                .expect("a part of the install")
                .client()
                .expect("a part of the install"),
        )
        .await
        .expect("a part of the install");
        // Standalone, the API server calls the v1beta1 conversion webhook
        // at a loopback URL.
        let webhook = crate::operator::free_address();
        let webhook_args = [
            format!("--webhook-bind-address={webhook}"),
            format!(
                "--webhook-url=https://{webhook}{}",
                capwasm::api::WEBHOOK_PATH
            ),
        ];
        let mut args: Vec<String> = match core {
            Core::Upstream => vec!["--controllers=providers".into()],
            Core::Capwasm => webhook_args.to_vec(),
        };
        let cache = tempfile::tempdir().expect("a cache directory");
        args.push(format!("--cache-dir={}", cache.path().display()));
        args.extend_from_slice(extra);
        let operator = match identity {
            Identity::Admin => {
                // Credentials Secrets where the tests' flows write them.
                args.push(format!("--credentials-namespace={CREDENTIALS_NAMESPACE}"));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let launch = Launch {
                    log,
                    ..Launch::default()
                };
                OperatorProcess::launch(env.management(), &ns, "capwasm", &args, launch).await
            }
            Identity::ProviderModeRoles => {
                let (sa_namespace, name) = install_provider_mode_rbac(&client).await;
                let account = Some((sa_namespace.as_str(), name.as_str()));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                OperatorProcess::start_as(
                    env.management(),
                    account,
                    &sa_namespace,
                    "capwasm",
                    &args,
                )
                .await
            }
        };
        let modules = objects
            .modules(&client, &ns)
            .await
            .expect("a part of the install");
        Self {
            env,
            cloud,
            objects,
            modules,
            client,
            ns,
            upstream,
            operator,
            shards: Vec::new(),
            args,
            log: log.to_owned(),
            _cache: cache,
        }
    }

    /// Kills `capwasm run` (SIGKILL: no shutdown, its leader Lease left
    /// held) and starts it again with the same flags, as the admin; waits
    /// until the new process leads.
    ///
    /// # Panics
    ///
    /// If it cannot be killed, or the new one does not lead within a minute.
    pub async fn kill_and_restart_operator(&mut self) {
        self.operator.kill().await;
        self.start_operator_again().await;
    }

    /// [`Install::kill_and_restart_operator`] for shard `index` of a
    /// [`Install::with_shards`] install (0 is [`Install::operator`]).
    ///
    /// # Panics
    ///
    /// If there is no such shard, it cannot be killed, or the new process
    /// does not lead within a minute.
    pub async fn kill_and_restart_shard(&mut self, index: u32) {
        let Some(other) = index.checked_sub(1) else {
            return self.kill_and_restart_operator().await;
        };
        let other = usize::try_from(other).expect("a shard index");
        self.shards[other].kill().await;
        self.shards[other] = self.start_shard(index, &shard_name(index), true).await;
    }

    /// Stops `capwasm run` as Kubernetes does (SIGTERM: it finishes its
    /// reconciles and gives up its Lease) and starts it again with the same
    /// flags, as the admin; waits until the new process leads.
    ///
    /// # Panics
    ///
    /// If it does not stop within 30 s, or the new one does not lead within a minute.
    pub async fn restart_operator(&mut self) {
        self.operator.terminate(Duration::from_secs(30)).await;
        self.start_operator_again().await;
    }

    async fn start_operator_again(&mut self) {
        self.operator = self.launch("capwasm", &self.args.clone(), true).await;
    }
}

/// The instance name of shard `index` (beside shard 0, `capwasm`).
fn shard_name(index: u32) -> String {
    format!("shard-{index}")
}

/// Applies the RBAC objects `kubectl apply -k deploy/provider-mode/` makes
/// (and their Namespace) for real; its ServiceAccount, as (namespace, name).
async fn install_provider_mode_rbac(client: &Client) -> (String, String) {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/provider-mode"
    ));
    let objects = crate::kustomize::objects(&dir).expect("deploy/provider-mode/ renders");
    crate::kustomize::apply_rbac(client, &objects, "capwasm-tests")
        .await
        .expect("the provider-mode RBAC applied")
        .expect("deploy/provider-mode/ has a ServiceAccount")
}
