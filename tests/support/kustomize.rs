//! `kustomize build`, as `kubectl apply -k` renders a kustomization: with
//! kustomize itself, built from its Go module by `tests/kustomize/build.sh`.

use std::path::Path;
use std::process::Command;

use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::core::discovery::Scope;
use kube::{Client, ResourceExt as _, discovery};

use crate::binaries::build_script;
use crate::{Error, Result};

/// The objects `kubectl apply -k dir` would apply, as YAML documents.
pub fn build(dir: &Path) -> Result<String> {
    let kustomize = build_script("kustomize/build.sh")?.join("kustomize");
    let output = Command::new(&kustomize)
        .arg("build")
        .arg(dir)
        .output()
        .map_err(|e| Error::Binaries(format!("cannot run {}: {e}", kustomize.display())))?;
    if !output.status.success() {
        return Err(Error::Binaries(format!(
            "kustomize build {} failed ({}): {}",
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    String::from_utf8(output.stdout)
        .map_err(|e| Error::Binaries(format!("kustomize build {}: {e}", dir.display())))
}

/// The objects of a kustomization, as [`build`] renders them.
pub fn objects(dir: &Path) -> Result<Vec<DynamicObject>> {
    use serde::Deserialize as _;

    let text = build(dir)?;
    let invalid = |e: String| Error::Manifest(format!("kustomize build {}: {e}", dir.display()));
    let mut objects = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let value = serde_json::Value::deserialize(document).map_err(|e| invalid(e.to_string()))?;
        if !value.is_null() {
            objects.push(serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?);
        }
    }
    Ok(objects)
}

/// Applies `object` (server-side, with `params`) wherever discovery says
/// its kind lives.
pub async fn apply(
    client: &Client,
    object: &DynamicObject,
    params: &PatchParams,
) -> Result<DynamicObject> {
    let name = object.name_any();
    let types = object
        .types
        .as_ref()
        .ok_or_else(|| Error::Manifest(format!("{name} has no apiVersion and kind")))?;
    let gvk = GroupVersionKind::try_from(types)
        .map_err(|e| Error::Manifest(format!("{} {name}: {e}", types.kind)))?;
    let (resource, capabilities) = discovery::pinned_kind(client, &gvk).await?;
    let api: Api<DynamicObject> = match capabilities.scope {
        Scope::Namespaced => {
            let namespace = object.namespace().ok_or_else(|| {
                Error::Manifest(format!(
                    "{} {name} is namespaced but names no namespace",
                    types.kind
                ))
            })?;
            Api::namespaced_with(client.clone(), &namespace, &resource)
        }
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    };
    Ok(api.patch(&name, params, &Patch::Apply(object)).await?)
}

/// Applies for real, as `manager`, the RBAC objects among `objects` and
/// the Namespace they live in; the ServiceAccount's (namespace, name).
pub async fn apply_rbac(
    client: &Client,
    objects: &[DynamicObject],
    manager: &str,
) -> Result<Option<(String, String)>> {
    let mut account = None;
    for object in objects {
        let kind = object.types.as_ref().map_or("", |t| t.kind.as_str());
        if !matches!(
            kind,
            "Namespace"
                | "ServiceAccount"
                | "ClusterRole"
                | "ClusterRoleBinding"
                | "Role"
                | "RoleBinding"
        ) {
            continue;
        }
        apply(client, object, &PatchParams::apply(manager)).await?;
        if kind == "ServiceAccount" {
            account = Some((object.namespace().unwrap_or_default(), object.name_any()));
        }
    }
    Ok(account)
}
