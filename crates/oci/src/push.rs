//! Pushing a component in the Wasm OCI artifact layout: a
//! `application/vnd.wasm.config.v0+json` config and one `application/wasm`
//! layer holding the component itself.

use std::time::Duration;

use oci_client::client::{Config, ImageLayer};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OciImageManifest, OciManifest};
use sha2::{Digest as _, Sha256};

use super::client::{classify, oci_client};
use super::{Auth, Error, ImageRef, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE};

/// What a push left in the registry.
#[derive(Clone, Debug)]
pub struct Pushed {
    /// `REGISTRY/REPOSITORY@sha256:<hex>`: the reference to pin.
    pub image: String,
    /// The manifest's digest (what cosign signs).
    pub manifest_digest: String,
    /// The component's digest (what `spec.sha256` pins).
    pub component_digest: String,
}

/// Pushes `component` to `image` (a tag, or a digest it must have).
pub async fn push_component(
    image: &ImageRef,
    auth: &Auth,
    component: Vec<u8>,
) -> Result<Pushed, Error> {
    let component_digest = format!("sha256:{}", hex::encode(Sha256::digest(&component)));
    let config = serde_json::json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [component_digest],
    });
    let config = Config::new(
        serde_json::to_vec(&config).unwrap_or_default(),
        WASM_CONFIG_MEDIA_TYPE.to_owned(),
        None,
    );
    let layers = [ImageLayer::new(
        component,
        WASM_LAYER_MEDIA_TYPE.to_owned(),
        None,
    )];
    let mut manifest = OciImageManifest::build(&layers, &config, None);
    manifest.media_type = Some(oci_client::manifest::OCI_IMAGE_MEDIA_TYPE.to_owned());
    // The digest the registry must then serve: oci-client sends the
    // manifest as serde_json writes it.
    let expected = serde_json::to_vec(&OciManifest::Image(manifest.clone()))
        .map(|bytes| format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
        .unwrap_or_default();
    let client = &oci_client(image, Duration::from_secs(60))?;
    let auth = auth.registry_auth();
    let failed = |what: &str, e| classify(image.registry(), format!("{what} of {image}"), e);
    client.store_auth_if_needed(image.registry(), &auth).await;
    // Some registries (go-containerregistry's among them) end an upload
    // without the Location oci-client wants: a blob took if the registry
    // has it, a manifest if the registry serves exactly its digest.
    for (data, digest) in [
        (layers[0].data.clone(), &manifest.layers[0].digest),
        (config.data.clone(), &manifest.config.digest),
    ] {
        match client.push_blob(image.reference(), data, digest).await {
            Ok(_) => {}
            Err(OciDistributionError::RegistryNoLocationError)
                if client
                    .blob_exists(image.reference(), digest)
                    .await
                    .unwrap_or(false) => {}
            Err(e) => return Err(failed("a blob push", e)),
        }
    }
    let pushed = client
        .push_manifest(image.reference(), &OciManifest::Image(manifest))
        .await;
    let served = client.fetch_manifest_digest(image.reference(), &auth).await;
    let manifest_digest = match (pushed, served) {
        (Ok(_), Ok(digest)) => digest,
        (Err(OciDistributionError::RegistryNoLocationError), Ok(digest)) if digest == expected => {
            digest
        }
        (Err(e), _) | (Ok(_), Err(e)) => return Err(failed("the manifest push", e)),
    };
    Ok(Pushed {
        image: image.by_digest(&manifest_digest),
        manifest_digest,
        component_digest,
    })
}
