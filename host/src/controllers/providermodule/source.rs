//! A module's component from a ConfigMap or a file (OCI images: [`super::oci`]).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use crate::api::providermodule::ModuleSource;
use crate::controllers::context::Context;

/// The `binaryData` key read when a ConfigMap source names none.
pub const DEFAULT_CONFIG_MAP_KEY: &str = "component.wasm";

/// The component's bytes, or why they cannot be had.
pub(super) async fn fetch(ctx: &Context, source: &ModuleSource) -> Result<Vec<u8>, String> {
    if let Some(source) = &source.config_map {
        let key = source.key.as_deref().unwrap_or(DEFAULT_CONFIG_MAP_KEY);
        let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &source.namespace);
        let config_map = api
            .get_opt(&source.name)
            .await
            .map_err(|e| {
                format!(
                    "cannot read ConfigMap {}/{}: {}",
                    source.namespace,
                    source.name,
                    crate::report::error_chain(&e)
                )
            })?
            .ok_or_else(|| {
                format!(
                    "ConfigMap {}/{} does not exist",
                    source.namespace, source.name
                )
            })?;
        return config_map
            .binary_data
            .and_then(|mut data| data.remove(key))
            .map(|bytes| bytes.0)
            .ok_or_else(|| {
                format!(
                    "ConfigMap {}/{} has no binaryData key {key:?}",
                    source.namespace, source.name
                )
            });
    }
    if let Some(file) = &source.file {
        let path = file.path.clone();
        return tokio::task::spawn_blocking(move || {
            std::fs::read(&path).map_err(|e| format!("cannot read {path}: {e}"))
        })
        .await
        .map_err(|e| format!("reading the component did not complete: {e}"))?;
    }
    Err("spec.source names neither a configMap nor a file".into())
}
