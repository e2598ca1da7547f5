//! capwasm's previous release as its users have it: the image built from
//! its commit (`image/build.sh --release`), its Rust providers built from
//! the same commit (`tests/release-guests/build.sh`) and the deploy/ and
//! crds/ that commit holds, for the tests that upgrade from it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tempfile::TempDir;

use crate::binaries::build_script_with;
use crate::image::OperatorImage;
use crate::{Error, Result};

/// The newest release of `image/releases`.
pub struct Release {
    /// Its image.
    pub image: OperatorImage,
    /// The directory of its providers' components.
    pub guests: PathBuf,
    /// Its deploy/ and crds/, as its commit has them.
    tree: TempDir,
}

impl Release {
    /// The newest release: its image and providers (built the first time)
    /// and its tree.
    ///
    /// # Errors
    ///
    /// If the image cannot be built or the commit cannot be read.
    pub fn newest() -> Result<Self> {
        let image = OperatorImage::release()?;
        let guests = build_script_with("release-guests/build.sh", &[&image.revision])?;
        let tree = tempfile::Builder::new()
            .prefix("capwasm-release-")
            .tempdir()
            .map_err(|source| Error::Io {
                path: std::env::temp_dir(),
                source,
            })?;
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let failed = |what: String| Error::Tool(format!("the release's deploy/ and crds/: {what}"));
        let mut archive = Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["archive", "--format=tar", &image.revision, "deploy", "crds"])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| failed(format!("cannot run git: {e}")))?;
        let extracted = Command::new("tar")
            .arg("--extract")
            .arg("--directory")
            .arg(tree.path())
            .stdin(
                archive
                    .stdout
                    .take()
                    .ok_or_else(|| failed("no output from git".into()))?,
            )
            .status()
            .map_err(|e| failed(format!("cannot run tar: {e}")))?;
        let archived = archive
            .wait()
            .map_err(|e| failed(format!("waiting for git: {e}")))?;
        if !archived.success() || !extracted.success() {
            return Err(failed(format!(
                "git archive {} ({archived}) | tar ({extracted})",
                image.revision
            )));
        }
        Ok(Self {
            image,
            guests,
            tree,
        })
    }

    /// The newest release's Rust providers alone (no image): built once
    /// from the commit `image/releases` names last.
    ///
    /// # Errors
    ///
    /// If `image/releases` names none, or the build fails.
    pub fn newest_guests() -> Result<PathBuf> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../image/releases");
        let releases = std::fs::read_to_string(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        let commit = releases
            .lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.split_whitespace().nth(1))
            .next_back()
            .ok_or_else(|| Error::Tool(format!("{} names no release", path.display())))?;
        build_script_with("release-guests/build.sh", &[commit])
    }

    /// The release's deploy/ or one of its variants.
    pub fn deploy_dir(&self, variant: &str) -> PathBuf {
        self.tree.path().join("deploy").join(variant)
    }
}
