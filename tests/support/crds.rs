//! Installing CustomResourceDefinitions from YAML files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client, ResourceExt};
use serde::Deserialize;

use crate::{Error, Result};

const FIELD_MANAGER: &str = "capwasm-testenv";
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(30);

/// Applies every CRD found in `paths` (files, or directories of `.yaml`,
/// `.yml` and `.json` files; multi-document YAML is fine; other kinds are
/// ignored) and waits until each is established. A path that does not exist
/// is an error, not a silent skip. Returns the names of the CRDs installed.
pub async fn install_crds(client: &Client, paths: &[PathBuf]) -> Result<Vec<String>> {
    let mut crds = Vec::new();
    for path in paths {
        for file in crd_files(path)? {
            crds.extend(read_crds(&file)?);
        }
    }
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for crd in &crds {
        api.patch(&crd.name_any(), &params, &Patch::Apply(crd))
            .await?;
    }
    let mut names = Vec::with_capacity(crds.len());
    for crd in &crds {
        let name = crd.name_any();
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(ESTABLISH_TIMEOUT, established).await {
            Ok(Ok(_)) => names.push(name),
            Ok(Err(_)) | Err(_) => return Err(Error::CrdNotEstablished(name)),
        }
    }
    Ok(names)
}

pub(crate) fn crd_files(path: &Path) -> Result<Vec<PathBuf>> {
    let unreadable = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(unreadable)? {
        let file = entry.map_err(unreadable)?.path();
        if matches!(
            file.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            files.push(file);
        }
    }
    files.sort();
    Ok(files)
}

pub(crate) fn read_crds(file: &Path) -> Result<Vec<CustomResourceDefinition>> {
    let invalid = |message: String| Error::CrdFile {
        path: file.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(file).map_err(|e| invalid(e.to_string()))?;
    let mut crds = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(&text) {
        let value = serde_json::Value::deserialize(document).map_err(|e| invalid(e.to_string()))?;
        if value.is_null()
            || value.get("kind").and_then(|k| k.as_str()) != Some("CustomResourceDefinition")
        {
            continue;
        }
        crds.push(serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?);
    }
    Ok(crds)
}
