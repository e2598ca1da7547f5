//! One kube-apiserver on loopback with its own certificates and etcd prefix.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{ObjectMeta, PostParams};
use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster,
    NamedContext,
};
use kube::{Api, Client, Config};

use crate::certs::{self, Ca};
use crate::etcd::Etcd;
use crate::process::Process;
use crate::rundir::write;
use crate::{Binaries, Error, Result, ports};

/// How long kube-apiserver gets to answer `/readyz` with 200. envtest's 20 s
/// is known to be tight on two cores under `cargo test` load.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
const READY_POLL: Duration = Duration::from_millis(100);

/// A running kube-apiserver, stopped on drop.
pub struct ApiServer {
    name: String,
    process: Process,
    url: String,
    kubeconfig: Kubeconfig,
    config: Config,
    /// The cluster CA (certificate, key): it signs the serving and the client certificates.
    ca: certs::Pem,
    /// Keeps etcd (and the run directory) alive while this server runs.
    etcd: Arc<Etcd>,
    /// How it was started, to start it again.
    binary: std::path::PathBuf,
    args: Vec<String>,
    log: std::path::PathBuf,
}

impl ApiServer {
    /// Starts an API server named `name` storing its objects in `etcd` under
    /// `/<name>`, and waits until `/readyz` answers 200.
    pub(crate) async fn start(
        binaries: &Binaries,
        extra_args: &[String],
        etcd: Arc<Etcd>,
        name: &str,
    ) -> Result<Self> {
        let dir = etcd.run_dir().join(name);
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
            path: dir.clone(),
            source,
        })?;
        let port = ports::free_port()?;
        let url = format!("https://127.0.0.1:{port}");

        // One CA signs the serving and the client certificates, as kubeadm's
        // cluster CA does, so that a kubeconfig can be made from it (Cluster
        // API's `<cluster>-ca` Secret).
        let ca = Ca::new("capwasm-testenv-ca")?;
        let serving = ca.serving()?;
        let admin = ca.client("admin", &["system:masters"])?;
        let (sa_public, sa_private) = certs::service_account_key()?;
        // Given --cert-dir and no --tls-cert-file, kube-apiserver serves apiserver.{crt,key} from there.
        write(&dir, "apiserver.crt", &serving.cert)?;
        write(&dir, "apiserver.key", &serving.key)?;
        let client_ca_file = write(&dir, "client-ca.crt", &ca.cert_pem())?;
        let sa_public_file = write(&dir, "sa.pub", &sa_public)?;
        let sa_private_file = write(&dir, "sa.key", &sa_private)?;

        let mut args = vec![
            format!("--etcd-servers={}", etcd.client_url()),
            format!("--etcd-prefix=/{name}"),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", dir.display()),
            format!("--client-ca-file={}", client_ca_file.display()),
            "--authorization-mode=RBAC".to_owned(),
            format!("--service-account-issuer={url}/"),
            format!("--service-account-key-file={}", sa_public_file.display()),
            format!(
                "--service-account-signing-key-file={}",
                sa_private_file.display()
            ),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            "--allow-privileged=true".to_owned(),
            // No controller-manager makes default ServiceAccounts; with the plugin every Pod create fails.
            "--disable-admission-plugins=ServiceAccount".to_owned(),
            // A loopback advertise address is only valid without an endpoint reconciler, and
            // without one no default route is needed (sandboxes often have none).
            "--endpoint-reconciler-type=none".to_owned(),
            "--advertise-address=127.0.0.1".to_owned(),
        ];
        args.extend_from_slice(extra_args);
        let log = dir.join("kube-apiserver.log");
        let process = Process::spawn(
            "kube-apiserver",
            &binaries.kube_apiserver,
            &args,
            log.clone(),
        )?;

        let kubeconfig = kubeconfig(name, &url, &ca.cert_pem(), &admin);
        let config =
            Config::from_custom_kubeconfig(kubeconfig.clone(), &KubeConfigOptions::default())
                .await?;
        let mut server = Self {
            name: name.to_owned(),
            process,
            url,
            kubeconfig,
            config,
            ca: certs::Pem {
                cert: ca.cert_pem(),
                key: ca.key_pem(),
            },
            etcd,
            binary: binaries.kube_apiserver.clone(),
            args,
            log,
        };
        server.wait_ready().await?;
        Ok(server)
    }

    /// Kills the server (SIGKILL: no shutdown) and starts it again on the
    /// same port, certificates and etcd, as after a crash; waits until
    /// `/readyz` answers 200.
    ///
    /// # Errors
    ///
    /// If the new process does not become ready.
    pub async fn kill_and_restart(&mut self) -> Result<()> {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.pid()).unwrap_or(i32::MAX));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        self.process.stop();
        self.process =
            Process::spawn("kube-apiserver", &self.binary, &self.args, self.log.clone())?;
        self.wait_ready().await
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let client = self.client()?;
        let started = Instant::now();
        loop {
            if let Some(status) = self.process.exited() {
                return Err(self.process.not_ready(format!("exited with {status}")));
            }
            self.etcd.check_running()?;
            let request = http::Request::get("/readyz").body(Vec::new());
            if let Ok(request) = request
                && client.request_text(request).await.is_ok()
            {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(self.process.not_ready(format!(
                    "/readyz did not answer 200 within {READY_TIMEOUT:?}"
                )));
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    /// The name this server was started with (also its etcd prefix).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The process id of kube-apiserver.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The process id of the etcd it stores into.
    pub fn etcd_pid(&self) -> u32 {
        self.etcd.pid()
    }

    /// A new admin (`system:masters`) client. Build one per test: a client
    /// lives on the tokio runtime that created it.
    pub fn client(&self) -> Result<Client> {
        Ok(Client::try_from(self.config.clone())?)
    }

    /// The admin client configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Kubeconfig {
        &self.kubeconfig
    }

    /// The admin kubeconfig as YAML.
    pub fn kubeconfig_yaml(&self) -> Result<String> {
        Ok(serde_yaml_ng::to_string(&self.kubeconfig)?)
    }

    /// The Secret through which Cluster API hands a workload cluster's
    /// kubeconfig to controllers: `<cluster>-kubeconfig` in the Cluster's
    /// namespace, key `value`, type `cluster.x-k8s.io/secret`, labelled with
    /// the cluster name.
    pub fn kubeconfig_secret(&self, namespace: &str, cluster: &str) -> Result<Secret> {
        let value = self.kubeconfig_yaml()?;
        Ok(cluster_secret(
            namespace,
            &format!("{cluster}-kubeconfig"),
            cluster,
            [("value", value)],
        ))
    }

    /// Cluster API's `<cluster>-ca` Secret for this server: its CA's
    /// certificate and key, from which a kubeconfig can be made.
    pub fn ca_secret(&self, namespace: &str, cluster: &str) -> Secret {
        cluster_secret(
            namespace,
            &format!("{cluster}-ca"),
            cluster,
            [
                ("tls.crt", self.ca.cert.clone()),
                ("tls.key", self.ca.key.clone()),
            ],
        )
    }

    /// Creates a namespace named `<prefix>-<random>`, so tests sharing one
    /// server never see each other's objects, and returns its name.
    pub async fn create_namespace(&self, prefix: &str) -> Result<String> {
        let namespace = Namespace {
            metadata: ObjectMeta {
                generate_name: Some(format!("{prefix}-")),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let created = Api::<Namespace>::all(self.client()?)
            .create(&PostParams::default(), &namespace)
            .await?;
        Ok(created.metadata.name.unwrap_or_default())
    }

    /// Where this server's files and log are.
    pub fn dir(&self) -> std::path::PathBuf {
        self.etcd.run_dir().join(&self.name)
    }
}

/// A Secret of Cluster API's type, labelled with the cluster's name.
pub(crate) fn cluster_secret<const N: usize>(
    namespace: &str,
    name: &str,
    cluster: &str,
    data: [(&str, String); N],
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(BTreeMap::from([(
                "cluster.x-k8s.io/cluster-name".to_owned(),
                cluster.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("cluster.x-k8s.io/secret".to_owned()),
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k.to_owned(), ByteString(v.into_bytes())))
                .collect(),
        ),
        ..Secret::default()
    }
}

pub(crate) fn kubeconfig(name: &str, url: &str, ca_pem: &str, admin: &certs::Pem) -> Kubeconfig {
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: name.to_owned(),
            cluster: Some(Cluster {
                server: Some(url.to_owned()),
                certificate_authority_data: Some(BASE64.encode(ca_pem)),
                ..Cluster::default()
            }),
            other: BTreeMap::new(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: "admin".to_owned(),
            auth_info: Some(AuthInfo {
                client_certificate_data: Some(BASE64.encode(&admin.cert)),
                client_key_data: Some(BASE64.encode(&admin.key).into()),
                ..AuthInfo::default()
            }),
            other: BTreeMap::new(),
        }],
        contexts: vec![NamedContext {
            name: name.to_owned(),
            context: Some(Context {
                cluster: name.to_owned(),
                user: Some("admin".to_owned()),
                ..Context::default()
            }),
            other: BTreeMap::new(),
        }],
        current_context: Some(name.to_owned()),
        ..Kubeconfig::default()
    }
}
