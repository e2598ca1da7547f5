//! A module's component from a ConfigMap or a file (OCI images: [`super::oci`]),
//! read within the component size limit. A ConfigMap outside the namespace
//! credentials are read from is read only for a module that pins the
//! component's digest: otherwise whoever may write that namespace would
//! choose the code every namespace's objects run.

use std::io::Read as _;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;

use super::FETCH_RETRY;
use crate::api::Reason;
use crate::api::providermodule::ProviderModuleSpec;
use crate::controllers::context::Context;
use crate::controllers::credentials::credentials_namespace;
use crate::controllers::outcome::Wait;

/// The `binaryData` key read when a ConfigMap source names none.
pub const DEFAULT_CONFIG_MAP_KEY: &str = "component.wasm";

/// The component's bytes, or why they cannot be had.
pub(super) async fn fetch(
    ctx: &Context,
    module: &str,
    spec: &ProviderModuleSpec,
) -> Result<Vec<u8>, Wait> {
    let failed = |message| Wait::after(Reason::FetchFailed, message, FETCH_RETRY);
    let limit = ctx.settings.oci.max_component_bytes;
    let source = &spec.source;
    if let Some(source) = &source.config_map {
        if spec.sha256.is_none()
            && let Some(wait) = credentials_namespace(
                ctx,
                module,
                "component ConfigMap (unless spec.sha256 pins the component)",
                &source.namespace,
                &source.name,
            )
        {
            return Err(wait);
        }
        let key = source.key.as_deref().unwrap_or(DEFAULT_CONFIG_MAP_KEY);
        let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &source.namespace);
        let config_map = api
            .get_opt(&source.name)
            .await
            .map_err(|e| {
                failed(format!(
                    "cannot read ConfigMap {}/{}: {}",
                    source.namespace,
                    source.name,
                    crate::report::error_chain(&e)
                ))
            })?
            .ok_or_else(|| {
                failed(format!(
                    "ConfigMap {}/{} does not exist",
                    source.namespace, source.name
                ))
            })?;
        return config_map
            .binary_data
            .and_then(|mut data| data.remove(key))
            .map(|bytes| bytes.0)
            .ok_or_else(|| {
                failed(format!(
                    "ConfigMap {}/{} has no binaryData key {key:?}",
                    source.namespace, source.name
                ))
            });
    }
    if let Some(file) = &source.file {
        let path = file.path.clone();
        return tokio::task::spawn_blocking(move || read_bounded(&path, limit))
            .await
            .map_err(|e| failed(format!("reading the component did not complete: {e}")))?
            .map_err(failed);
    }
    Err(failed(
        "spec.source names neither a configMap nor a file".into(),
    ))
}

/// The file at `path`, if it is at most `limit` bytes: no more than one
/// byte past the limit is ever read.
fn read_bounded(path: &str, limit: u64) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "{path} is larger than the component size limit ({limit} bytes)"
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_the_component_limit_is_refused_having_read_one_byte_more() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("c.wasm");
        std::fs::write(&path, [0u8; 100]).unwrap_or_else(|e| panic!("{e}"));
        let path = path.to_string_lossy();
        assert_eq!(read_bounded(&path, 100).map(|b| b.len()), Ok(100));
        let refused = read_bounded(&path, 99).err().unwrap_or_default();
        assert!(
            refused.contains("larger than the component size limit (99 bytes)"),
            "{refused}"
        );
        assert!(read_bounded("/no/such/file", 99).is_err());
    }
}
