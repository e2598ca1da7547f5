//! examples/ as its README has a user apply it: the files, the steps that
//! come before them (the providers' ConfigMap, Secrets of string data),
//! and each sample applied as `kubectl apply` would, its
//! ProviderModules waited for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use capwasm::api::ProviderModule;
use capwasm::testing::guest_path;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ObjectMeta};
use kube::{Client, ResourceExt as _};

use crate::clusterctl::documents;
use crate::flows::{create, wait_for_module};
use crate::{Error, Result};

/// The samples' directory.
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// The text of sample `file`.
///
/// # Errors
///
/// If it cannot be read.
pub fn read(file: &str) -> Result<String> {
    let path = examples().join(file);
    std::fs::read_to_string(&path).map_err(|source| Error::Io { path, source })
}

/// Applies the objects of a sample's `text` as kubectl would (server-side,
/// field manager `kubectl`), and waits until each ProviderModule among
/// them is Ready.
///
/// # Errors
///
/// If the text does not parse or an object is refused.
pub async fn apply(client: &Client, text: &str) -> Result<()> {
    let objects = documents(text)?;
    crate::pods::apply_all(client, &objects, "kubectl").await?;
    let modules: Api<ProviderModule> = Api::all(client.clone());
    for module in objects
        .iter()
        .filter(|o| o.types.as_ref().is_some_and(|t| t.kind == "ProviderModule"))
    {
        wait_for_module(&modules, &module.name_any(), "Ready").await;
    }
    Ok(())
}

/// ConfigMap `name` of `namespace`, as `kubectl create configmap
/// --from-file` makes it from the built components `files` (at most 1 MiB
/// in all: the API server's bound on a ConfigMap).
///
/// # Errors
///
/// If a component cannot be read or the ConfigMap is refused.
pub async fn components_config_map(
    client: &Client,
    (namespace, name): (&str, &str),
    files: &[&str],
) -> Result<()> {
    let mut data = BTreeMap::new();
    for file in files {
        let path = guest_path(file);
        let bytes = std::fs::read(&path).map_err(|source| Error::Io { path, source })?;
        data.insert((*file).to_owned(), ByteString(bytes));
    }
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        binary_data: Some(data),
        ..ConfigMap::default()
    };
    create(client, &config_map).await.map(|_| ())
}

/// Secret `name` of `namespace` with `entries` as string data, as
/// `kubectl create secret generic --from-literal` makes it.
pub fn secret(namespace: &str, name: &str, entries: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        string_data: Some(
            entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..Secret::default()
    }
}
