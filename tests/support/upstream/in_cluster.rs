//! Upstream Cluster API's core installed into a real Kubernetes as a user
//! has it after `clusterctl init`: its CRDs converting through its webhook
//! Service, a Namespace, a ServiceAccount with the manager's roles, the
//! manager as a Deployment (MachinePool on, topology off, leader election
//! on), its webhook Service and serving certificate, and its admission
//! webhooks called through the Service.
//!
//! The objects are written here rather than rendered from upstream's
//! kustomization, which needs cert-manager and clusterctl's variables; their
//! names are those clusterctl gives them.

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

use super::{UpstreamBuild, admission_configurations, ca_bundle, conversion, defaulting_is_live};
use crate::certs::Ca;
use crate::{Error, Result};

/// The manager's Namespace.
pub const NAMESPACE: &str = "capi-system";
/// The manager's Deployment.
pub const DEPLOYMENT: &str = "capi-controller-manager";
/// The Service the API server calls the webhooks through.
pub const WEBHOOK_SERVICE: &str = "capi-webhook-service";
/// The labels of the manager's Pods, as a selector.
pub const SELECTOR: &str = "cluster.x-k8s.io/provider=cluster-api";
/// The ClusterRole every `cluster.x-k8s.io/aggregate-to-manager` role is
/// gathered into, bound to the manager's ServiceAccount.
pub const AGGREGATED_ROLE: &str = "capi-aggregated-manager-role";
/// The field manager of the install.
const MANAGER: &str = "capwasm-tests-upstream";
const SERVICE_ACCOUNT: &str = "capi-manager";
const CERT_SECRET: &str = "capi-webhook-service-cert";
/// controller-runtime's default, named on the command line all the same.
const CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// From apply to an available Deployment: the image is in containerd, the
/// manager syncs its caches and serves its webhook before it is ready.
const AVAILABLE: Duration = Duration::from_secs(180);
const ESTABLISHED: Duration = Duration::from_secs(60);

/// Installs upstream's core from `build`, its manager running `image`:
/// applies the objects, waits until the Deployment is available and the
/// API server calls its MachinePool defaulting through the Service.
///
/// # Errors
///
/// If an object is refused, or the manager is not available or not called
/// in time (the error then describes its Pods).
pub async fn install(client: &Client, build: &UpstreamBuild, image: &str) -> Result<()> {
    let ca = Ca::new("cluster-api-webhook-ca")?;
    let crds = crds(build, &ca)?;
    crate::pods::apply_all(client, &crds, MANAGER).await?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in &crds {
        let name = crd.name_any();
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(ESTABLISHED, established).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) | Err(_) => return Err(Error::CrdNotEstablished(name)),
        }
    }
    crate::pods::apply_all(client, &manager(&ca, image)?, MANAGER).await?;
    crate::pods::wait_deployment_rolled_out(client, NAMESPACE, DEPLOYMENT, 1, AVAILABLE).await?;
    let manifests = std::fs::read_to_string(&build.webhooks).map_err(|source| Error::Io {
        path: build.webhooks.clone(),
        source,
    })?;
    let bundle = ca_bundle(&ca.cert_pem());
    // Every webhook of the release, as clusterctl registers them: the
    // Service in place of the one upstream's kustomization fills in.
    let configurations = admission_configurations(&manifests, None, |path| {
        json!({
            "service": { "namespace": NAMESPACE, "name": WEBHOOK_SERVICE, "path": path, "port": 443 },
            "caBundle": bundle,
        })
    })?;
    let params = PatchParams::apply(MANAGER).force();
    for (resource, mut configuration) in configurations {
        configuration.metadata.name = Some(format!("capi-{}", configuration.name_any()));
        Api::<DynamicObject>::all_with(client.clone(), &resource)
            .patch(
                &configuration.name_any(),
                &params,
                &kube::api::Patch::Apply(&configuration),
            )
            .await?;
    }
    if let Err(e) = defaulting_is_live(client).await {
        return Err(Error::Node(format!(
            "{e}\n{}",
            crate::pods::describe(client, NAMESPACE).await
        )));
    }
    Ok(())
}

/// Upstream's CRDs, each serving more than one version converting through
/// the webhook Service, trusted through `ca`.
fn crds(build: &UpstreamBuild, ca: &Ca) -> Result<Vec<DynamicObject>> {
    let client_config = json!({
        "service": { "namespace": NAMESPACE, "name": WEBHOOK_SERVICE, "path": "/convert", "port": 443 },
        "caBundle": ca_bundle(&ca.cert_pem()),
    });
    let mut objects = Vec::new();
    for file in crate::crds::crd_files(&build.crds)? {
        for crd in crate::crds::read_crds(&file)? {
            let mut value = object_json(&crd)?;
            if crd.spec.versions.len() > 1 {
                value["spec"]["conversion"] = conversion(&client_config);
            }
            objects.push(dynamic(value)?);
        }
    }
    if objects.is_empty() {
        return Err(Error::Binaries(format!(
            "no CRD in {}",
            build.crds.display()
        )));
    }
    Ok(objects)
}

/// The Namespace, ServiceAccount, roles, serving certificate, Service and
/// Deployment of the manager, in the order they are applied.
fn manager(ca: &Ca, image: &str) -> Result<Vec<DynamicObject>> {
    let labels = json!({ "cluster.x-k8s.io/provider": "cluster-api", "control-plane": "controller-manager" });
    let service_host = format!("{WEBHOOK_SERVICE}.{NAMESPACE}.svc");
    let serving = ca.serving_for(
        &[] as &[IpAddr],
        &[&service_host, &format!("{service_host}.cluster.local")],
    )?;
    let account =
        json!({ "kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE });
    let objects = vec![
        json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": { "name": NAMESPACE, "labels": labels },
        }),
        json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": { "name": SERVICE_ACCOUNT, "namespace": NAMESPACE, "labels": labels },
        }),
        // Upstream's role gathers every ClusterRole so labelled: its own
        // below and those providers install (deploy/provider-mode/'s).
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": { "name": AGGREGATED_ROLE, "labels": labels },
            "aggregationRule": { "clusterRoleSelectors": [
                { "matchLabels": { "cluster.x-k8s.io/aggregate-to-manager": "true" } },
            ]},
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {
                "name": "capi-manager-role",
                "labels": { "cluster.x-k8s.io/aggregate-to-manager": "true" },
            },
            "rules": manager_rules(),
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": { "name": "capi-manager-rolebinding", "labels": labels },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": AGGREGATED_ROLE },
            "subjects": [account],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": { "name": "capi-leader-election-role", "namespace": NAMESPACE, "labels": labels },
            "rules": [
                { "apiGroups": [""], "resources": ["events"], "verbs": ["create"] },
                {
                    "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
                },
            ],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": { "name": "capi-leader-election-rolebinding", "namespace": NAMESPACE, "labels": labels },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "capi-leader-election-role" },
            "subjects": [account],
        }),
        // What cert-manager makes for a clusterctl install.
        json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": { "name": CERT_SECRET, "namespace": NAMESPACE, "labels": labels },
            "stringData": { "tls.crt": serving.cert, "tls.key": serving.key, "ca.crt": ca.cert_pem() },
        }),
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": { "name": WEBHOOK_SERVICE, "namespace": NAMESPACE, "labels": labels },
            "spec": {
                "selector": labels,
                "ports": [{ "port": 443, "targetPort": "webhook-server" }],
            },
        }),
        deployment(&labels, image),
    ];
    objects.into_iter().map(dynamic).collect()
}

/// Upstream's manager Deployment (`config/manager`, with the webhook patch
/// of `config/default`).
fn deployment(labels: &Value, image: &str) -> Value {
    let field = |path: &str| json!({ "valueFrom": { "fieldRef": { "fieldPath": path } } });
    let env: Vec<Value> = [
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_NAME", "metadata.name"),
        ("POD_UID", "metadata.uid"),
    ]
    .into_iter()
    .map(|(name, path)| {
        let mut var = field(path);
        var["name"] = json!(name);
        var
    })
    .collect();
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": DEPLOYMENT, "namespace": NAMESPACE, "labels": labels },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": labels },
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "serviceAccountName": SERVICE_ACCOUNT,
                    "terminationGracePeriodSeconds": 10,
                    "securityContext": { "runAsNonRoot": true, "seccompProfile": { "type": "RuntimeDefault" } },
                    "containers": [{
                        "name": "manager",
                        "image": image,
                        "command": ["/manager"],
                        "args": [
                            "--leader-elect",
                            "--diagnostics-address=:8443",
                            "--insecure-diagnostics=false",
                            "--feature-gates=MachinePool=true,ClusterTopology=false,RuntimeSDK=false",
                            format!("--webhook-cert-dir={CERT_DIR}"),
                        ],
                        "env": env,
                        "ports": [
                            { "containerPort": 9443, "name": "webhook-server", "protocol": "TCP" },
                            { "containerPort": 9440, "name": "healthz", "protocol": "TCP" },
                            { "containerPort": 8443, "name": "metrics", "protocol": "TCP" },
                        ],
                        "readinessProbe": { "httpGet": { "path": "/readyz", "port": "healthz" } },
                        "livenessProbe": { "httpGet": { "path": "/healthz", "port": "healthz" } },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "capabilities": { "drop": ["ALL"] },
                            "privileged": false,
                            "runAsUser": 65532,
                            "runAsGroup": 65532,
                        },
                        "terminationMessagePolicy": "FallbackToLogsOnError",
                        "volumeMounts": [{ "mountPath": CERT_DIR, "name": "cert", "readOnly": true }],
                    }],
                    "volumes": [{ "name": "cert", "secret": { "secretName": CERT_SECRET } }],
                },
            },
        },
    })
}

/// What upstream's generated `manager-role` grants, but for the
/// bootstrap and infrastructure groups: those are left to the roles
/// providers aggregate into [`AGGREGATED_ROLE`], so that a provider's
/// aggregated role (deploy/provider-mode/'s) is what lets upstream's core
/// adopt, watch and delete its objects.
fn manager_rules() -> Value {
    let all = json!([
        "create", "delete", "get", "list", "patch", "update", "watch"
    ]);
    let read_write = json!(["get", "list", "patch", "update", "watch"]);
    json!([
        { "apiGroups": [""], "resources": ["configmaps"], "verbs": ["delete", "get", "list", "patch", "update", "watch"] },
        { "apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"] },
        { "apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"] },
        { "apiGroups": [""], "resources": ["secrets"], "verbs": all },
        {
            "apiGroups": ["addons.cluster.x-k8s.io"],
            "resources": ["clusterresourcesets/finalizers", "clusterresourcesets/status"],
            "verbs": ["get", "patch", "update"],
        },
        { "apiGroups": ["addons.cluster.x-k8s.io", "controlplane.cluster.x-k8s.io"], "resources": ["*"], "verbs": all },
        { "apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get", "list", "watch"] },
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions", "customresourcedefinitions/status"],
            "resourceNames": [
                "clusterclasses.cluster.x-k8s.io",
                "clusterresourcesetbindings.addons.cluster.x-k8s.io",
                "clusterresourcesets.addons.cluster.x-k8s.io",
                "clusters.cluster.x-k8s.io",
                "extensionconfigs.runtime.cluster.x-k8s.io",
                "ipaddressclaims.ipam.cluster.x-k8s.io",
                "ipaddresses.ipam.cluster.x-k8s.io",
                "machinedeployments.cluster.x-k8s.io",
                "machinedrainrules.cluster.x-k8s.io",
                "machinehealthchecks.cluster.x-k8s.io",
                "machinepools.cluster.x-k8s.io",
                "machines.cluster.x-k8s.io",
                "machinesets.cluster.x-k8s.io",
            ],
            "verbs": ["patch", "update"],
        },
        { "apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"] },
        { "apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"] },
        {
            "apiGroups": ["cluster.x-k8s.io"],
            "resources": [
                "clusterclasses", "clusterclasses/status", "clusters", "clusters/finalizers",
                "clusters/status", "machinedrainrules", "machinehealthchecks/finalizers",
                "machinehealthchecks/status",
            ],
            "verbs": read_write,
        },
        {
            "apiGroups": ["cluster.x-k8s.io"],
            "resources": [
                "machinedeployments", "machinedeployments/finalizers", "machinedeployments/status",
                "machinehealthchecks", "machinepools", "machinepools/finalizers",
                "machinepools/status", "machines", "machines/finalizers", "machines/status",
                "machinesets", "machinesets/finalizers", "machinesets/status",
            ],
            "verbs": all,
        },
        { "apiGroups": ["ipam.cluster.x-k8s.io"], "resources": ["ipaddressclaims", "ipaddresses"], "verbs": read_write },
        { "apiGroups": ["ipam.cluster.x-k8s.io"], "resources": ["ipaddressclaims/status"], "verbs": ["patch", "update"] },
        {
            "apiGroups": ["runtime.cluster.x-k8s.io"],
            "resources": ["extensionconfigs", "extensionconfigs/status"],
            "verbs": read_write,
        },
    ])
}

fn object_json(object: &impl serde::Serialize) -> Result<Value> {
    serde_json::to_value(object).map_err(|e| Error::Manifest(e.to_string()))
}

fn dynamic(value: Value) -> Result<DynamicObject> {
    serde_json::from_value(value).map_err(|e| Error::Manifest(e.to_string()))
}
