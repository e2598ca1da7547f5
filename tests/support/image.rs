//! capwasm's operator images (`image/build.sh`): the test image of this
//! working tree and a release's image, and upstream Cluster API's manager
//! packed by the same `image/pack.sh`.

use std::path::{Path, PathBuf};

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
    /// The test image of this working tree: the layout `CAPWASM_IMAGE`
    /// names (built beforehand, with its archive beside it), else
    /// `image/build.sh --test` (the development build, packed again only
    /// when it changed).
    ///
    /// # Errors
    ///
    /// If the build fails.
    pub fn build() -> Result<Self> {
        Self::built_or_build("CAPWASM_IMAGE", &["--archive", "--test"])
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
        let (archive, digest) = archive_and_digest(&layout)?;
        let revision = read_trimmed(&layout.join("revision"))?;
        Ok(Self {
            layout,
            archive,
            digest,
            revision,
        })
    }

    /// `ghcr.io/capwasm/capwasm@sha256:...`, as a release's deploy/ names it.
    pub fn reference(&self) -> String {
        format!("{REPOSITORY}@{}", self.digest)
    }
}

/// The repository of [`UpstreamImage`] (`tests/upstream-capi/image.sh`):
/// built here, not upstream's release image.
pub const UPSTREAM_REPOSITORY: &str = "localhost/capwasm-tests/cluster-api-controller";

/// Upstream Cluster API's core manager (`tests/upstream-capi/build.sh`) as
/// an image: the binary alone, packed by `image/pack.sh`.
#[derive(Clone, Debug)]
pub struct UpstreamImage {
    /// The OCI image layout directory.
    pub layout: PathBuf,
    /// The same as an OCI archive (`ctr images import`).
    pub archive: PathBuf,
    /// `sha256:<hex>` of the manifest.
    pub digest: String,
}

impl UpstreamImage {
    /// Packs the manager (building it the first time), or reuses the image
    /// packed from the same binary.
    ///
    /// # Errors
    ///
    /// If the build or the packing fails.
    pub fn build() -> Result<Self> {
        let layout = build_script_with("upstream-capi/image.sh", &[])?;
        let (archive, digest) = archive_and_digest(&layout)?;
        Ok(Self {
            layout,
            archive,
            digest,
        })
    }

    /// `<UPSTREAM_REPOSITORY>@sha256:...`.
    pub fn reference(&self) -> String {
        format!("{UPSTREAM_REPOSITORY}@{}", self.digest)
    }
}

/// The archive beside `layout` (`<layout>.tar`) and the digest in its
/// `digest` file.
fn archive_and_digest(layout: &Path) -> Result<(PathBuf, String)> {
    let digest = read_trimmed(&layout.join("digest"))?;
    let mut archive = layout.as_os_str().to_owned();
    archive.push(".tar");
    Ok((archive.into(), digest))
}

fn read_trimmed(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map(|text| text.trim().to_owned())
        .map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })
}
