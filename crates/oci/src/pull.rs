//! Pulling a provider: a tag resolved to a digest, the manifest by digest,
//! its one layer checked and fetched within a size limit, every answer
//! within its own limit and the whole within a deadline.

use oci_client::manifest::{OciDescriptor, OciImageManifest};

use super::client::{Puller, Registry};
use super::{Auth, Error, ImageRef};

/// An image's manifest digest and the component layer it names.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// `sha256:<hex>` of the manifest.
    pub manifest_digest: String,
    /// The component layer.
    pub layer: OciDescriptor,
}

/// A pulled component.
#[derive(Clone, Debug)]
pub struct Artifact {
    /// What was pulled.
    pub resolved: Resolved,
    /// The component's bytes (their digest is the layer's).
    pub bytes: Vec<u8>,
}

impl Puller {
    /// A session with `image`'s registry: one client, its credentials and
    /// tokens, for every step of one pull; the pull's deadline runs from now.
    pub fn session<'a>(&self, image: &'a ImageRef, auth: &Auth) -> Result<Session<'a>, Error> {
        Ok(Session {
            registry: Registry::new(image, auth, self)?,
            max_component_bytes: self.max_component_bytes,
        })
    }
}

/// One client of one image's registry: the steps of a pull.
pub struct Session<'a> {
    pub(crate) registry: Registry<'a>,
    max_component_bytes: u64,
}

impl Session<'_> {
    /// The digest the image names now: its own if it is pinned, else the
    /// tag's, asked of the registry.
    pub async fn digest(&self) -> Result<String, Error> {
        if let Some(digest) = self.registry.image.digest() {
            return Ok(digest.to_owned());
        }
        self.registry.tag_digest().await
    }

    /// The manifest at `digest` in the image's repository, checked to be
    /// one image with one layer.
    pub async fn resolve(&self, digest: &str) -> Result<Resolved, Error> {
        let image = self.registry.image;
        let (bytes, manifest_digest) = self.registry.manifest(&image.at(digest)).await?;
        let layer = component_layer(&image.by_digest(&manifest_digest), &bytes)?;
        Ok(Resolved {
            manifest_digest,
            layer,
        })
    }

    /// The component layer of `resolved`.
    pub async fn pull(&self, resolved: Resolved) -> Result<Artifact, Error> {
        let image = self.registry.image;
        let bytes = self
            .registry
            .blob(&resolved.layer, self.max_component_bytes)
            .await
            .map_err(|e| match e {
                Error::TooLarge { size, limit, .. } => Error::TooLarge {
                    image: image.by_digest(&resolved.manifest_digest),
                    size,
                    limit,
                },
                other => other,
            })?;
        Ok(Artifact { resolved, bytes })
    }
}

/// The one layer of the image manifest `bytes`: the Wasm artifact layout,
/// or any single-layer image; an index or a second layer is refused.
fn component_layer(image: &str, bytes: &[u8]) -> Result<OciDescriptor, Error> {
    let layout = |why: String| Error::Layout {
        image: image.to_owned(),
        why,
    };
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| layout(format!("the manifest is not JSON: {e}")))?;
    if value.get("manifests").is_some() {
        return Err(layout(
            "is an image index; name one of its manifests by digest".into(),
        ));
    }
    let manifest: OciImageManifest = serde_json::from_value(value)
        .map_err(|e| layout(format!("the manifest is not an image manifest: {e}")))?;
    match manifest.layers.as_slice() {
        [layer] if is_archive(&layer.media_type) => Err(layout(format!(
            "its layer is a file-system archive ({}), not a component: push the .wasm file itself as the layer (capwasm provider push)",
            layer.media_type
        ))),
        [layer] => Ok(layer.clone()),
        [] => Err(layout("the manifest has no layer".into())),
        layers => Err(layout(format!(
            "the manifest has {} layers; a provider image has exactly one, the component",
            layers.len()
        ))),
    }
}

fn is_archive(media_type: &str) -> bool {
    media_type.contains(".tar") || media_type.contains("rootfs.diff")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(layers: &[(&str, &str)]) -> Vec<u8> {
        let layers: Vec<serde_json::Value> = layers
            .iter()
            .map(|(media_type, digest)| {
                serde_json::json!({"mediaType": media_type, "digest": digest, "size": 8})
            })
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": "sha256:00", "size": 2},
            "layers": layers,
        }))
        .unwrap_or_default()
    }

    #[test]
    fn one_layer_is_the_component() {
        let layer = component_layer(
            "r/p@sha256:1",
            &manifest(&[("application/wasm", "sha256:ab")]),
        )
        .expect("one wasm layer");
        assert_eq!(layer.digest, "sha256:ab");
        // The form other tools push: one layer of another media type.
        assert!(
            component_layer(
                "r/p@sha256:1",
                &manifest(&[("application/octet-stream", "sha256:ab")])
            )
            .is_ok()
        );
    }

    #[test]
    fn two_layers_an_archive_or_an_index_are_refused() {
        let two = component_layer(
            "r/p@sha256:1",
            &manifest(&[
                ("application/wasm", "sha256:ab"),
                ("application/wasm", "sha256:cd"),
            ]),
        )
        .expect_err("two layers");
        assert!(two.to_string().contains("has 2 layers"), "{two}");
        let archive = component_layer(
            "r/p@sha256:1",
            &manifest(&[("application/vnd.oci.image.layer.v1.tar+gzip", "sha256:ab")]),
        )
        .expect_err("an archive");
        assert!(
            archive.to_string().contains("file-system archive"),
            "{archive}"
        );
        let index = component_layer("r/p@sha256:1", br#"{"schemaVersion":2,"manifests":[]}"#)
            .expect_err("an index");
        assert!(index.to_string().contains("image index"), "{index}");
        assert!(component_layer("r/p@sha256:1", &manifest(&[])).is_err());
        assert!(component_layer("r/p@sha256:1", b"not json").is_err());
    }
}
