//! Upstream Cluster API's core manager, built from its Go module by
//! `tests/upstream-capi/build.sh`, run against an [`ApiServer`] the way a
//! user runs it beside capwasm's providers: MachinePool on, topology off, no
//! leader election, every address on loopback, its conversion and admission
//! webhooks registered. [`in_cluster`] installs the same manager as Pods.

pub mod in_cluster;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::binaries::build_script;
use crate::certs::Ca;
use crate::ports::free_port;
use crate::probe;
use crate::process::Process;
use crate::{ApiServer, Error, Result};

/// How long the manager gets to report ready.
const READY: Duration = Duration::from_secs(60);

/// Where the manager and its CRDs are.
#[derive(Clone, Debug)]
pub struct UpstreamBuild {
    /// The manager binary.
    pub manager: PathBuf,
    /// Its CRDs (`config/crd/bases` of the same module version).
    pub crds: PathBuf,
    /// Its admission webhook configurations (`config/webhook/manifests.yaml`).
    pub webhooks: PathBuf,
}

impl UpstreamBuild {
    /// The build `tests/upstream-capi/build.sh` made, building it the first
    /// time. An error, never a skip, when it cannot be had.
    pub fn locate() -> Result<Self> {
        let dir = build_script("upstream-capi/build.sh")?;
        let build = Self {
            manager: dir.join("manager"),
            crds: dir.join("crds"),
            webhooks: dir.join("webhooks.yaml"),
        };
        let complete = build.manager.is_file() && build.crds.is_dir() && build.webhooks.is_file();
        if !complete {
            return Err(Error::Binaries(format!(
                "{} has no manager, crds/ and webhooks.yaml; run `make upstream-capi`",
                dir.display()
            )));
        }
        Ok(build)
    }
}

/// A running upstream manager; stopped when dropped.
pub struct UpstreamManager {
    process: Process,
}

impl UpstreamManager {
    /// Starts `build`'s manager against `server` (whose CRDs must include
    /// upstream's) and waits until it reports ready.
    pub async fn start(build: &UpstreamBuild, server: &ApiServer) -> Result<Self> {
        let dir = server.dir().join("cluster-api");
        let io = |source| Error::Io {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir_all(dir.join("certs")).map_err(io)?;
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, server.kubeconfig_yaml()?).map_err(io)?;
        // Its webhook server converts between API versions for the API
        // server, which trusts it through the CRDs' caBundle.
        let ca = Ca::new("cluster-api-webhooks")?;
        let serving = ca.serving()?;
        std::fs::write(dir.join("certs/tls.crt"), serving.cert).map_err(io)?;
        std::fs::write(dir.join("certs/tls.key"), serving.key).map_err(io)?;
        let health = format!("127.0.0.1:{}", free_port()?);
        let webhook_port = free_port()?;
        let args: Vec<String> = [
            format!("--kubeconfig={}", kubeconfig.display()),
            "--leader-elect=false".into(),
            format!("--health-addr={health}"),
            format!("--diagnostics-address=127.0.0.1:{}", free_port()?),
            "--insecure-diagnostics".into(),
            format!("--webhook-port={webhook_port}"),
            format!("--webhook-cert-dir={}", dir.join("certs").display()),
            "--feature-gates=MachinePool=true,ClusterTopology=false,RuntimeSDK=false".into(),
        ]
        .into();
        let process = Process::spawn_exiting_with_stdin(
            "cluster-api-manager",
            &build.manager,
            &args,
            &[("POD_NAMESPACE", "default")],
            dir.join("manager.log"),
        )?;
        let mut manager = Self { process };
        manager.wait_ready(&health).await?;
        convert_through(server, webhook_port, &ca.cert_pem()).await?;
        let webhooks = std::fs::read_to_string(&build.webhooks).map_err(|source| Error::Io {
            path: build.webhooks.clone(),
            source,
        })?;
        admit_through(server, webhook_port, &ca.cert_pem(), &webhooks).await?;
        Ok(manager)
    }

    /// The id of the process running it (a shell whose child is the manager).
    pub fn process_id(&self) -> u32 {
        self.process.pid()
    }

    async fn wait_ready(&mut self, health: &str) -> Result<()> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.process.exited() {
                return Err(self.process.not_ready(format!("exited: {status}")));
            }
            if matches!(probe::get(health, "/readyz").await, Some((200, _))) {
                return Ok(());
            }
            if started.elapsed() > READY {
                return Err(self
                    .process
                    .not_ready(format!("/readyz not ok within {READY:?}")));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// The kinds whose admission webhooks are registered: those the tests
/// create, defaulted and validated as a clusterctl install does. The others'
/// webhooks are left out: some are served only with features off here.
const ADMITTED: [&str; 2] = ["clusters", "machinepools"];

/// Registers upstream's generated webhook configurations (`manifests`, with
/// a Service upstream's kustomization fills in) for [`ADMITTED`], calling the
/// manager on `port` trusted through `ca`, and waits until the API server
/// calls them.
async fn admit_through(server: &ApiServer, port: u16, ca: &str, manifests: &str) -> Result<()> {
    use kube::api::{Api, PostParams};

    let ca_bundle = ca_bundle(ca);
    let client = server.client()?;
    let configurations = admission_configurations(manifests, Some(&ADMITTED), |path| {
        serde_json::json!({
            "url": format!("https://127.0.0.1:{port}{path}"),
            "caBundle": ca_bundle,
        })
    })?;
    for (resource, configuration) in configurations {
        Api::<kube::api::DynamicObject>::all_with(client.clone(), &resource)
            .create(&PostParams::default(), &configuration)
            .await?;
    }
    defaulting_is_live(&client).await
}

/// `ca` (PEM) as a webhook's `caBundle`.
fn ca_bundle(ca: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(ca)
}

/// Upstream's generated webhook configurations (`manifests`), the webhooks
/// of `only` these resources when given, each calling what
/// `client_config(path)` says; with the resource of each configuration's kind.
fn admission_configurations(
    manifests: &str,
    only: Option<&[&str]>,
    client_config: impl Fn(&str) -> serde_json::Value,
) -> Result<Vec<(kube::api::ApiResource, kube::api::DynamicObject)>> {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    use serde::Deserialize as _;
    use serde_json::Value;

    let invalid = |e: String| Error::Binaries(format!("upstream's webhook manifests: {e}"));
    let wanted = |webhook: &Value| {
        let Some(only) = only else {
            return true;
        };
        webhook["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|rule| {
                rule["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|r| r.as_str().is_some_and(|r| only.contains(&r)))
            })
    };
    let mut configurations = Vec::new();
    let mut registered = 0;
    for document in serde_yaml_ng::Deserializer::from_str(manifests) {
        let mut configuration = Value::deserialize(document).map_err(|e| invalid(e.to_string()))?;
        let Some(kind) = configuration["kind"].as_str().map(str::to_owned) else {
            continue;
        };
        let webhooks: Vec<Value> = configuration["webhooks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|webhook| wanted(webhook))
            .map(|webhook| {
                let mut webhook = webhook.clone();
                let path = webhook["clientConfig"]["service"]["path"].clone();
                webhook["clientConfig"] = client_config(path.as_str().unwrap_or_default());
                webhook
            })
            .collect();
        registered += webhooks.len();
        configuration["webhooks"] = Value::Array(webhooks);
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            &kind,
        ));
        let object: DynamicObject =
            serde_json::from_value(configuration).map_err(|e| invalid(e.to_string()))?;
        configurations.push((resource, object));
    }
    if registered == 0 {
        return Err(invalid(format!("no webhook for {only:?}")));
    }
    Ok(configurations)
}

/// Waits until the API server calls the manager's MachinePool defaulting:
/// a dry-run pool without the cluster-name label comes back with it.
pub(crate) async fn defaulting_is_live(client: &kube::Client) -> Result<()> {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};

    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "cluster.x-k8s.io",
        "v1beta2",
        "MachinePool",
    ));
    let pools: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let pool: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "MachinePool",
        "metadata": { "name": "webhook-probe" },
        "spec": { "clusterName": "probe", "template": { "spec": {
            "clusterName": "probe",
            "bootstrap": { "dataSecretName": "probe" },
            "infrastructureRef": {
                "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "Probe", "name": "probe",
            },
        }}},
    }))
    .map_err(|e| Error::Binaries(format!("webhook probe: {e}")))?;
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let started = Instant::now();
    loop {
        let defaulted = pools.create(&dry_run, &pool).await.ok().is_some_and(|p| {
            p.metadata
                .labels
                .is_some_and(|l| l.contains_key("cluster.x-k8s.io/cluster-name"))
        });
        if defaulted {
            return Ok(());
        }
        if started.elapsed() > READY {
            return Err(Error::Binaries(format!(
                "upstream's MachinePool defaulting webhook not called within {READY:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Points every CRD of `server` that serves more than one version at the
/// manager's conversion webhook on `port`, trusted through `ca`: upstream's
/// own wiring, with a loopback URL for the Service its kustomization uses.
async fn convert_through(server: &ApiServer, port: u16, ca: &str) -> Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, ListParams, Patch, PatchParams};

    let crds: Api<CustomResourceDefinition> = Api::all(server.client()?);
    let client_config = serde_json::json!({
        "url": format!("https://127.0.0.1:{port}/convert"),
        "caBundle": ca_bundle(ca),
    });
    for crd in crds.list(&ListParams::default()).await?.items {
        if crd.spec.versions.len() < 2 {
            continue;
        }
        let patch = serde_json::json!({ "spec": { "conversion": conversion(&client_config) } });
        let name = crd.metadata.name.unwrap_or_default();
        crds.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

/// A CRD's `spec.conversion` through upstream's webhook at `client_config`.
fn conversion(client_config: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1", "v1beta1"],
            "clientConfig": client_config,
        },
    })
}
