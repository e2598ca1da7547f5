//! A real one-node Kubernetes for the tests that need Pods: etcd,
//! kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
//! kube-proxy (built from the pinned k8s.io/kubernetes module), containerd,
//! runc and the CNI plugins (Debian's), all in a network namespace of their
//! own. The tests reach the API server at [`NODE_ADDRESS`]; Pods reach what
//! the tests serve at [`HOST_ADDRESS`].
//!
//! The kubelet and containerd write outside any directory of a test's own
//! (Pod cgroups, `/run/netns`), so there is one node per machine at a time:
//! [`Node::start`] waits for a machine-wide lock, and leftovers of a killed
//! run are swept before a node starts and after it stops.

mod config;
mod network;
mod sweep;

use std::fs::File;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node as NodeObject, ServiceAccount};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use nix::fcntl::{Flock, FlockArg};

pub use config::PAUSE_IMAGE;
pub use network::{HOST_ADDRESS, KUBERNETES_SERVICE_IP, NODE_ADDRESS, POD_SUBNET};

use crate::binaries::build_script;
use crate::certs::{self, Ca};
use crate::process::Process;
use crate::rundir::write;
use crate::{Binaries, Error, Result};

/// The Node object's name.
pub const NODE_NAME: &str = "capwasm-node";
const API_PORT: u16 = 6443;
/// A second API server on the node's etcd: the workload cluster of the
/// Clusters the tests make (its Nodes are the simulated cloud's, which no
/// scheduler may place a Pod on).
const WORKLOAD_PORT: u16 = 6444;
const LOCK: &str = "/run/capwasm-node.lock";
/// From nothing to a Ready node with its ServiceAccounts; on two busy cores.
const START_TIMEOUT: Duration = Duration::from_secs(180);
const POLL: Duration = Duration::from_millis(250);

/// The node's programs beside kube-apiserver and etcd.
#[derive(Clone, Debug)]
pub struct NodeBinaries {
    dir: PathBuf,
}

impl NodeBinaries {
    /// `CAPWASM_NODE_DIR`, else what `tests/node/build.sh` builds (the
    /// first time) and prints.
    ///
    /// # Errors
    ///
    /// If the build fails or a program is missing.
    pub fn locate() -> Result<Self> {
        let dir = match std::env::var_os("CAPWASM_NODE_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => build_script("node/build.sh")?,
        };
        for program in [
            "kubelet",
            "kube-controller-manager",
            "kube-scheduler",
            "kube-proxy",
            "pause.tar",
        ] {
            if !dir.join(program).is_file() {
                return Err(Error::Binaries(format!(
                    "{} is missing; run tests/node/build.sh",
                    dir.join(program).display()
                )));
            }
        }
        Ok(Self { dir })
    }

    fn program(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// A running node, stopped and swept on drop.
pub struct Node {
    /// In start order; stopped in reverse.
    processes: Vec<Process>,
    config: Config,
    kubeconfig: Kubeconfig,
    workload: Kubeconfig,
    ca_pem: String,
    /// Held for the node's life: one node per machine.
    _lock: Flock<File>,
}

impl Node {
    /// Waits for the machine's node lock, sweeps what an earlier run left,
    /// starts every part and waits until the Node is Ready and the
    /// `default` ServiceAccount exists; imports `images` (OCI archives)
    /// into containerd first.
    ///
    /// # Errors
    ///
    /// If this process is not root, a part is missing or does not start in time.
    pub async fn start(images: &[&Path]) -> Result<Self> {
        if !nix::unistd::Uid::effective().is_root() {
            return Err(Error::Node(
                "a node needs root (the kubelet, containerd and network namespaces)".into(),
            ));
        }
        let control_plane = Binaries::locate()?;
        let binaries = NodeBinaries::locate()?;
        let lock = tokio::task::spawn_blocking(take_lock)
            .await
            .map_err(|e| Error::Node(format!("waiting for the node lock: {e}")))??;
        sweep::all();
        let mut node = Self::launch(&control_plane, &binaries, images, lock).await;
        if node.is_err() {
            sweep::all();
        }
        if let Ok(started) = &mut node {
            started.wait_ready().await?;
        }
        node
    }

    async fn launch(
        control_plane: &Binaries,
        binaries: &NodeBinaries,
        images: &[&Path],
        lock: Flock<File>,
    ) -> Result<Self> {
        let root = PathBuf::from(sweep::ROOT);
        let pki = root.join("pki");
        for dir in [
            &logs(),
            &pki,
            &root.join("cni"),
            &root.join("pod-logs"),
            &PathBuf::from(sweep::STATE),
        ] {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                path: dir.clone(),
                source,
            })?;
        }
        network::create()?;

        let ca = Ca::new("capwasm-node-ca")?;
        let url = format!("https://{NODE_ADDRESS}:{API_PORT}");
        let identities = Identities::write(&ca, &pki, &url)?;
        let mut node = Self {
            processes: Vec::new(),
            config: Config::from_custom_kubeconfig(
                identities.admin.clone(),
                &KubeConfigOptions::default(),
            )
            .await?,
            kubeconfig: identities.admin.clone(),
            workload: identities.workload.clone(),
            ca_pem: ca.cert_pem(),
            _lock: lock,
        };

        node.start_runtime(&root, binaries, images).await?;
        node.start_control_plane(&root, &pki, control_plane).await?;
        node.start_agents(&root, &pki, binaries)?;
        Ok(node)
    }

    /// An admin client of the node's API server.
    ///
    /// # Errors
    ///
    /// If the client cannot be built.
    pub fn client(&self) -> Result<Client> {
        Ok(Client::try_from(self.config.clone())?)
    }

    /// The admin kubeconfig as YAML.
    ///
    /// # Errors
    ///
    /// If it cannot be serialized.
    pub fn kubeconfig_yaml(&self) -> Result<String> {
        Ok(serde_yaml_ng::to_string(&self.kubeconfig)?)
    }

    /// An admin client of the workload API server.
    ///
    /// # Errors
    ///
    /// If the client cannot be built.
    pub async fn workload_client(&self) -> Result<Client> {
        let config =
            Config::from_custom_kubeconfig(self.workload.clone(), &KubeConfigOptions::default())
                .await?;
        Ok(Client::try_from(config)?)
    }

    /// The workload server's kubeconfig as Cluster API's
    /// `<cluster>-kubeconfig` Secret in `namespace`.
    ///
    /// # Errors
    ///
    /// If it cannot be serialized.
    pub fn workload_kubeconfig_secret(
        &self,
        namespace: &str,
        cluster: &str,
    ) -> Result<k8s_openapi::api::core::v1::Secret> {
        Ok(crate::apiserver::cluster_secret(
            namespace,
            &format!("{cluster}-kubeconfig"),
            cluster,
            [("value", serde_yaml_ng::to_string(&self.workload)?)],
        ))
    }

    /// The cluster CA's certificate (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The log file of part `name` (`kubelet`, `containerd`, ...): under
    /// the temporary directory, where it stays after the node stops (the
    /// next node writes it again).
    pub fn log(&self, name: &str) -> PathBuf {
        logs().join(format!("{name}.log"))
    }

    fn spawn(&mut self, name: &'static str, binary: &Path, args: &[String]) -> Result<()> {
        let log = self.log(name);
        let process = Process::spawn(
            name,
            Path::new("/usr/bin/nsenter"),
            &in_node(binary, args),
            log,
        )?;
        self.processes.push(process);
        Ok(())
    }

    /// containerd with the CNI bridge; the images imported.
    async fn start_runtime(
        &mut self,
        root: &Path,
        binaries: &NodeBinaries,
        images: &[&Path],
    ) -> Result<()> {
        let cni = write(
            &root.join("cni"),
            "10-capwasm-self.conflist",
            &config::cni_bridge(),
        )?;
        let containerd_config = write(
            root,
            "containerd.toml",
            &config::containerd(&root.join("containerd"), cni.parent().unwrap_or(root)),
        )?;
        self.spawn_plain(
            "containerd",
            Path::new("/usr/bin/containerd"),
            &[format!("--config={}", containerd_config.display())],
        )?;
        self.wait_for_socket(&config::containerd_socket()).await?;
        Self::import(&binaries.program("pause.tar"))?;
        for image in images {
            Self::import(image)?;
        }

        Ok(())
    }

    /// etcd, the node's API server and the workload API server.
    async fn start_control_plane(
        &mut self,
        root: &Path,
        pki: &Path,
        control_plane: &Binaries,
    ) -> Result<()> {
        self.spawn(
            "etcd",
            &control_plane.etcd,
            &[
                format!("--data-dir={}", root.join("etcd").display()),
                "--listen-client-urls=http://127.0.0.1:2379".into(),
                "--advertise-client-urls=http://127.0.0.1:2379".into(),
                "--listen-peer-urls=http://127.0.0.1:2380".into(),
                "--initial-advertise-peer-urls=http://127.0.0.1:2380".into(),
                "--initial-cluster=default=http://127.0.0.1:2380".into(),
                "--unsafe-no-fsync=true".into(),
                "--log-level=warn".into(),
            ],
        )?;
        let api_args = Identities::api_server_args(pki);
        self.spawn("kube-apiserver", &control_plane.kube_apiserver, &api_args)?;
        self.wait_api_server(self.client()?).await?;
        let workload_args = Identities::workload_server_args(pki);
        self.spawn(
            "workload-apiserver",
            &control_plane.kube_apiserver,
            &workload_args,
        )?;
        self.wait_api_server(self.workload_client().await?).await?;

        Ok(())
    }

    /// The controller manager, the scheduler, the kubelet and kube-proxy.
    fn start_agents(&mut self, root: &Path, pki: &Path, binaries: &NodeBinaries) -> Result<()> {
        let kubeconfig = |who: &str| pki.join(format!("{who}.kubeconfig")).display().to_string();
        self.spawn(
            "kube-controller-manager",
            &binaries.program("kube-controller-manager"),
            &[
                format!("--kubeconfig={}", kubeconfig("controller-manager")),
                format!(
                    "--service-account-private-key-file={}",
                    pki.join("sa.key").display()
                ),
                format!("--root-ca-file={}", pki.join("ca.crt").display()),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                "--secure-port=0".into(),
                // Each controller as its own ServiceAccount, with the roles
                // the API server bootstraps for it (as kubeadm runs it): the
                // manager's own identity may not untaint a Node.
                "--use-service-account-credentials=true".into(),
                "--controllers=*,-bootstrap-signer-controller,-token-cleaner-controller".into(),
            ],
        )?;
        self.spawn(
            "kube-scheduler",
            &binaries.program("kube-scheduler"),
            &[
                format!("--kubeconfig={}", kubeconfig("scheduler")),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                "--secure-port=0".into(),
            ],
        )?;
        let kubelet_config = write(
            root,
            "kubelet.yaml",
            &config::kubelet(&pki.join("ca.crt"), &root.join("pod-logs")),
        )?;
        self.spawn(
            "kubelet",
            &binaries.program("kubelet"),
            &[
                format!("--config={}", kubelet_config.display()),
                format!("--kubeconfig={}", kubeconfig("kubelet")),
                format!("--root-dir={}", root.join("kubelet").display()),
                format!("--hostname-override={NODE_NAME}"),
                format!("--node-ip={NODE_ADDRESS}"),
            ],
        )?;
        let proxy_config = write(
            root,
            "kube-proxy.yaml",
            &config::kube_proxy(&pki.join("proxy.kubeconfig")),
        )?;
        self.spawn(
            "kube-proxy",
            &binaries.program("kube-proxy"),
            &[format!("--config={}", proxy_config.display())],
        )?;
        Ok(())
    }

    /// A program that does not watch its stdin.
    fn spawn_plain(&mut self, name: &'static str, binary: &Path, args: &[String]) -> Result<()> {
        let log = self.log(name);
        let process = Process::spawn_exiting_with_stdin(
            name,
            Path::new("/usr/bin/nsenter"),
            &in_node(binary, args),
            &[],
            log,
        )?;
        self.processes.push(process);
        Ok(())
    }

    fn check_running(&mut self) -> Result<()> {
        for process in &mut self.processes {
            if let Some(status) = process.exited() {
                return Err(process.not_ready(format!("exited with {status}")));
            }
        }
        Ok(())
    }

    fn timed_out(&self, what: &str) -> Error {
        let last = self.processes.last();
        match last {
            Some(process) => process.not_ready(format!("{what} within {START_TIMEOUT:?}")),
            None => Error::Node(format!("{what} within {START_TIMEOUT:?}")),
        }
    }

    async fn wait_for_socket(&mut self, socket: &str) -> Result<()> {
        let started = Instant::now();
        while !Path::new(socket).exists() {
            self.check_running()?;
            if started.elapsed() > START_TIMEOUT {
                return Err(self.timed_out("containerd's socket did not appear"));
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    /// `ctr images import` into the namespace the kubelet uses, each image
    /// also named by digest (`<repository>@sha256:...`), as a pull names
    /// it: the kubelet asks for a reference by digest as it is written.
    fn import(archive: &Path) -> Result<()> {
        let imported = ctr(&["images".as_ref(), "import".as_ref(), archive.as_os_str()])?;
        // "unpacking <name> (sha256:<hex>)...done"
        for line in imported.lines() {
            let Some((name, digest)) = line
                .strip_prefix("unpacking ")
                .and_then(|rest| rest.split_once(" ("))
                .and_then(|(name, rest)| Some((name, rest.split_once(')')?.0)))
            else {
                continue;
            };
            let repository = name
                .rsplit_once(':')
                .map_or(name, |(repository, _)| repository);
            let by_digest = format!("{repository}@{digest}");
            ctr(&[
                "images".as_ref(),
                "tag".as_ref(),
                "--force".as_ref(),
                name.as_ref(),
                by_digest.as_ref(),
            ])?;
        }
        Ok(())
    }

    async fn wait_api_server(&mut self, client: Client) -> Result<()> {
        let started = Instant::now();
        loop {
            self.check_running()?;
            let request = http::Request::get("/readyz").body(Vec::new())?;
            if client.request_text(request).await.is_ok() {
                return Ok(());
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(self.timed_out("kube-apiserver's /readyz did not answer 200"));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The Node Ready and the `default` ServiceAccount made (the
    /// controller manager runs).
    async fn wait_ready(&mut self) -> Result<()> {
        let client = self.client()?;
        let nodes: Api<NodeObject> = Api::all(client.clone());
        let accounts: Api<ServiceAccount> = Api::namespaced(client, "default");
        let started = Instant::now();
        loop {
            self.check_running()?;
            let node = nodes.get_opt(NODE_NAME).await?;
            let ready = node.as_ref().is_some_and(|node| {
                node.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            });
            // Until its taints are gone (not-ready, a pressure) nothing is scheduled.
            let taints: Vec<String> = node
                .and_then(|n| n.spec)
                .and_then(|s| s.taints)
                .unwrap_or_default()
                .into_iter()
                .filter(|t| t.effect != "PreferNoSchedule")
                .map(|t| format!("{}:{}", t.key, t.effect))
                .collect();
            if ready && taints.is_empty() && accounts.get_opt("default").await?.is_some() {
                return Ok(());
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(self.timed_out(&format!(
                    "the Node was not Ready and untainted with a default ServiceAccount \
                     (ready: {ready}, taints: {taints:?})"
                )));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        while let Some(mut process) = self.processes.pop() {
            process.stop();
        }
        sweep::all();
    }
}

/// `ctr` against the node's containerd, in the kubelet's namespace; what it printed.
fn ctr(args: &[&std::ffi::OsStr]) -> Result<String> {
    let output = std::process::Command::new("ctr")
        .args(["--address", &config::containerd_socket(), "-n", "k8s.io"])
        .args(args)
        .output()
        .map_err(|e| Error::Node(format!("ctr: {e}")))?;
    if !output.status.success() {
        return Err(Error::Node(format!(
            "ctr {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn logs() -> PathBuf {
    std::env::temp_dir().join("capwasm-node-logs")
}

fn take_lock() -> Result<Flock<File>> {
    let file = File::create(LOCK).map_err(|source| Error::Io {
        path: LOCK.into(),
        source,
    })?;
    Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, errno)| Error::Node(format!("locking {LOCK}: {errno}")))
}

/// `nsenter --net=<node> -- binary args`: only the network namespace, so
/// the kubelet's volume mounts and the runtime see one filesystem.
fn in_node(binary: &Path, args: &[String]) -> Vec<String> {
    let mut all = vec![
        format!("--net={}", network::NAMESPACE_PATH),
        "--".to_owned(),
        binary.display().to_string(),
    ];
    all.extend_from_slice(args);
    all
}

/// The certificates and kubeconfigs of every part.
struct Identities {
    admin: Kubeconfig,
    workload: Kubeconfig,
}

impl Identities {
    fn write(ca: &Ca, pki: &Path, url: &str) -> Result<Self> {
        let addresses: Vec<IpAddr> = vec![
            IpAddr::V4(NODE_ADDRESS),
            IpAddr::V4(KUBERNETES_SERVICE_IP),
            IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        ];
        let serving = ca.serving_for(
            &addresses,
            &[
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "localhost",
            ],
        )?;
        write(pki, "apiserver.crt", &serving.cert)?;
        write(pki, "apiserver.key", &serving.key)?;
        write(pki, "ca.crt", &ca.cert_pem())?;
        let kubelet_client = ca.client("kube-apiserver-kubelet-client", &["system:masters"])?;
        write(pki, "kubelet-client.crt", &kubelet_client.cert)?;
        write(pki, "kubelet-client.key", &kubelet_client.key)?;
        let (sa_public, sa_private) = certs::service_account_key()?;
        write(pki, "sa.pub", &sa_public)?;
        write(pki, "sa.key", &sa_private)?;
        let mut admin = None;
        for (file, user, groups) in [
            ("admin", "admin", &["system:masters"][..]),
            (
                "controller-manager",
                "system:kube-controller-manager",
                &[][..],
            ),
            ("scheduler", "system:kube-scheduler", &[][..]),
            (
                "kubelet",
                &format!("system:node:{NODE_NAME}"),
                &["system:nodes"][..],
            ),
            ("proxy", "system:kube-proxy", &[][..]),
        ] {
            let identity = ca.client(user, groups)?;
            let kubeconfig =
                crate::apiserver::kubeconfig(NODE_NAME, url, &ca.cert_pem(), &identity);
            write(
                pki,
                &format!("{file}.kubeconfig"),
                &serde_yaml_ng::to_string(&kubeconfig)?,
            )?;
            if file == "admin" {
                admin = Some(kubeconfig);
            }
        }
        let admin = admin.ok_or_else(|| Error::Node("no admin identity".into()))?;
        let workload_url = format!("https://{NODE_ADDRESS}:{WORKLOAD_PORT}");
        let workload = crate::apiserver::kubeconfig(
            "workload",
            &workload_url,
            &ca.cert_pem(),
            &ca.client("admin", &["system:masters"])?,
        );
        Ok(Self { admin, workload })
    }

    /// A plain API server: no ServiceAccounts, no Services of its own.
    fn workload_server_args(pki: &Path) -> Vec<String> {
        let file = |name: &str| pki.join(name).display().to_string();
        vec![
            "--etcd-servers=http://127.0.0.1:2379".into(),
            "--etcd-prefix=/workload".into(),
            "--bind-address=0.0.0.0".into(),
            format!("--secure-port={WORKLOAD_PORT}"),
            format!("--advertise-address={NODE_ADDRESS}"),
            format!("--tls-cert-file={}", file("apiserver.crt")),
            format!("--tls-private-key-file={}", file("apiserver.key")),
            format!("--client-ca-file={}", file("ca.crt")),
            "--authorization-mode=RBAC".into(),
            "--service-account-issuer=https://workload.invalid".into(),
            format!("--service-account-key-file={}", file("sa.pub")),
            format!("--service-account-signing-key-file={}", file("sa.key")),
            "--service-cluster-ip-range=10.234.0.0/24".into(),
            "--disable-admission-plugins=ServiceAccount".into(),
            "--endpoint-reconciler-type=none".into(),
        ]
    }

    fn api_server_args(pki: &Path) -> Vec<String> {
        let file = |name: &str| pki.join(name).display().to_string();
        vec![
            "--etcd-servers=http://127.0.0.1:2379".into(),
            "--bind-address=0.0.0.0".into(),
            format!("--secure-port={API_PORT}"),
            format!("--advertise-address={NODE_ADDRESS}"),
            format!("--tls-cert-file={}", file("apiserver.crt")),
            format!("--tls-private-key-file={}", file("apiserver.key")),
            format!("--client-ca-file={}", file("ca.crt")),
            format!(
                "--kubelet-client-certificate={}",
                file("kubelet-client.crt")
            ),
            format!("--kubelet-client-key={}", file("kubelet-client.key")),
            "--kubelet-preferred-address-types=InternalIP".into(),
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NodeRestriction".into(),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-account-key-file={}", file("sa.pub")),
            format!("--service-account-signing-key-file={}", file("sa.key")),
            format!("--service-cluster-ip-range={}", network::SERVICE_SUBNET),
            "--allow-privileged=true".into(),
            // Webhook and aggregated-API Services are called at their
            // endpoints' addresses: the API server has no kube-proxy of its own.
            "--enable-aggregator-routing=true".into(),
        ]
    }
}
