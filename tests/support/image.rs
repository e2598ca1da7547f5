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
    /// The commit it was built from (`-modified` when the working tree
    /// differed from it).
    pub revision: String,
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
        Self::built_or_build("CAPWASM_IMAGE", &["--archive"])
    }

    /// The image of the newest release in `image/releases`, built from its
    /// commit: the layout `CAPWASM_RELEASE_IMAGE` names, else
    /// `image/build.sh --release` (which keeps it once built).
    ///
    /// # Errors
    ///
    /// If the build fails.
    pub fn release() -> Result<Self> {
        Self::built_or_build("CAPWASM_RELEASE_IMAGE", &["--archive", "--release"])
    }

    fn built_or_build(variable: &str, args: &[&str]) -> Result<Self> {
        let layout = match std::env::var_os(variable) {
            Some(layout) => PathBuf::from(layout),
            None => build_script_with("../image/build.sh", args)?,
        };
        let read = |name: &str| {
            let path = layout.join(name);
            std::fs::read_to_string(&path)
                .map(|text| text.trim().to_owned())
                .map_err(|source| Error::Io { path, source })
        };
        let digest = read("digest")?;
        let revision = read("revision")?;
        let mut archive = layout.clone().into_os_string();
        archive.push(".tar");
        Ok(Self {
            archive: archive.into(),
            digest,
            revision,
            layout,
        })
    }

    /// `ghcr.io/capwasm/capwasm@sha256:...`, as a release's deploy/ names it.
    pub fn reference(&self) -> String {
        format!("{REPOSITORY}@{}", self.digest)
    }
}
