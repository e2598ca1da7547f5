//! capwasm's operator image, as `make image` builds it (`image/build.sh`).

use std::path::PathBuf;

use crate::binaries::build_script_with;
use crate::{Error, Result};

/// The repository deploy/ names.
pub const REPOSITORY: &str = "ghcr.io/capwasm/capwasm";

/// A built image: its OCI layout, an archive of it, and its digest.
#[derive(Clone, Debug)]
pub struct OperatorImage {
    /// The OCI image layout directory.
    pub layout: PathBuf,
    /// The same as an OCI archive (`ctr images import`, `crane push`).
    pub archive: PathBuf,
    /// `sha256:<hex>` of the manifest.
    pub digest: String,
}

impl OperatorImage {
    /// The image in the layout `CAPWASM_IMAGE` names (built beforehand,
    /// with its archive beside it), else the image of this working tree
    /// (`image/build.sh`, which reuses its build when nothing changed).
    ///
    /// # Errors
    ///
    /// If the build fails.
    pub fn build() -> Result<Self> {
        let layout = match std::env::var_os("CAPWASM_IMAGE") {
            Some(layout) => PathBuf::from(layout),
            None => build_script_with("../image/build.sh", &["--archive"])?,
        };
        let digest_file = layout.join("digest");
        let digest = std::fs::read_to_string(&digest_file)
            .map_err(|source| Error::Io {
                path: digest_file,
                source,
            })?
            .trim()
            .to_owned();
        let mut archive = layout.clone().into_os_string();
        archive.push(".tar");
        Ok(Self {
            layout,
            archive: archive.into(),
            digest,
        })
    }

    /// `ghcr.io/capwasm/capwasm@sha256:...`, as a release's deploy/ names it.
    pub fn reference(&self) -> String {
        format!("{REPOSITORY}@{}", self.digest)
    }
}
