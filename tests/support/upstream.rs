//! Upstream Cluster API's core manager, built from its Go module by
//! `tests/upstream-capi/build.sh`, run against an [`ApiServer`] the way a
//! user runs it beside capwasm's providers: MachinePool on, topology off, no
//! leader election, every address on loopback, its conversion and admission
//! webhooks registered.

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
    /// Its admission webhooks' kubebuilder markers, one per line.
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
            webhooks: dir.join("webhooks.markers"),
        };
        if !build.manager.is_file() || !build.crds.is_dir() || !build.webhooks.is_file() {
            return Err(Error::Binaries(format!(
                "{} has no manager, crds/ and webhooks.markers; run `make upstream-capi`",
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
        let markers = std::fs::read_to_string(&build.webhooks).map_err(|source| Error::Io {
            path: build.webhooks.clone(),
            source,
        })?;
        admit_through(server, webhook_port, &ca.cert_pem(), &markers).await?;
        Ok(manager)
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
/// create, defaulted and validated as a clusterctl install does.
const ADMITTED: [&str; 2] = ["clusters", "machinepools"];

/// Registers the manager's mutating and validating webhooks for
/// [`ADMITTED`] as its source declares them (`markers`), called on `port`
/// and trusted through `ca`, and waits until the API server calls them.
async fn admit_through(server: &ApiServer, port: u16, ca: &str, markers: &str) -> Result<()> {
    use base64::Engine as _;
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    use kube::api::{Api, PostParams};

    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca);
    let (mut mutating, mut validating) = (Vec::new(), Vec::new());
    for marker in markers.lines() {
        let field = |key: &str| {
            marker
                .split(',')
                .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_default()
        };
        if !ADMITTED.contains(&field("resources")) {
            continue;
        }
        let list = |key: &str| field(key).split(';').collect::<Vec<_>>();
        let verbs: Vec<String> = list("verbs").iter().map(|v| v.to_uppercase()).collect();
        let webhook = serde_json::json!({
            "name": field("name"),
            "admissionReviewVersions": list("admissionReviewVersions"),
            "sideEffects": field("sideEffects"),
            "failurePolicy": if field("failurePolicy") == "fail" { "Fail" } else { "Ignore" },
            "matchPolicy": field("matchPolicy"),
            "clientConfig": {
                "url": format!("https://127.0.0.1:{port}{}", field("path")),
                "caBundle": ca_bundle,
            },
            "rules": [{
                "apiGroups": list("groups"),
                "apiVersions": list("versions"),
                "resources": list("resources"),
                "operations": verbs,
            }],
        });
        if field("mutating") == "true" {
            mutating.push(webhook);
        } else {
            validating.push(webhook);
        }
    }
    if mutating.is_empty() || validating.is_empty() {
        return Err(Error::Binaries(format!(
            "no admission webhooks for {ADMITTED:?} among upstream's markers"
        )));
    }
    let configuration = |webhooks| {
        serde_json::json!({
            "metadata": { "name": "capi-webhooks" },
            "webhooks": webhooks,
        })
    };
    let client = server.client()?;
    let decode = |e: serde_json::Error| Error::Binaries(format!("webhook configuration: {e}"));
    let create = PostParams::default();
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(
            &create,
            &serde_json::from_value(configuration(mutating)).map_err(decode)?,
        )
        .await?;
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(
            &create,
            &serde_json::from_value(configuration(validating)).map_err(decode)?,
        )
        .await?;
    defaulting_is_live(&client).await
}

/// Waits until the API server calls the manager's MachinePool defaulting:
/// a dry-run pool without the cluster-name label comes back with it.
async fn defaulting_is_live(client: &kube::Client) -> Result<()> {
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
    use base64::Engine as _;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, ListParams, Patch, PatchParams};

    let crds: Api<CustomResourceDefinition> = Api::all(server.client()?);
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca);
    for crd in crds.list(&ListParams::default()).await?.items {
        if crd.spec.versions.len() < 2 {
            continue;
        }
        let patch = serde_json::json!({ "spec": { "conversion": {
            "strategy": "Webhook",
            "webhook": {
                "conversionReviewVersions": ["v1", "v1beta1"],
                "clientConfig": {
                    "url": format!("https://127.0.0.1:{port}/convert"),
                    "caBundle": ca_bundle,
                },
            },
        }}});
        let name = crd.metadata.name.unwrap_or_default();
        crds.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}
