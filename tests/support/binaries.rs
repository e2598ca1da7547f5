//! Where kube-apiserver and etcd come from.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Error, Result};

/// The two control-plane binaries.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// Path to kube-apiserver.
    pub kube_apiserver: PathBuf,
    /// Path to etcd.
    pub etcd: PathBuf,
}

impl Binaries {
    /// Finds the binaries the way envtest does — `TEST_ASSET_KUBE_APISERVER`
    /// and `TEST_ASSET_ETCD`, else a `KUBEBUILDER_ASSETS` directory — and
    /// otherwise asks `tests/controlplane/build.sh`, which builds them from
    /// their pinned Go modules the first time and reuses its cache after.
    pub fn locate() -> Result<Self> {
        if let (Some(api), Some(etcd)) = (
            std::env::var_os("TEST_ASSET_KUBE_APISERVER"),
            std::env::var_os("TEST_ASSET_ETCD"),
        ) {
            return Self::checked(api.into(), etcd.into());
        }
        if let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS") {
            return Self::in_dir(Path::new(&dir));
        }
        Self::build()
    }

    /// The binaries in one directory.
    pub fn in_dir(dir: &Path) -> Result<Self> {
        Self::checked(dir.join("kube-apiserver"), dir.join("etcd"))
    }

    fn build() -> Result<Self> {
        Self::in_dir(&build_script("controlplane/build.sh")?)
    }

    fn checked(kube_apiserver: PathBuf, etcd: PathBuf) -> Result<Self> {
        for path in [&kube_apiserver, &etcd] {
            if !path.is_file() {
                return Err(Error::Binaries(format!(
                    "{} does not exist; run `make controlplane`",
                    path.display()
                )));
            }
        }
        Ok(Self {
            kube_apiserver,
            etcd,
        })
    }
}

/// Runs `script` (under `tests/`), which builds what it must the first time
/// and prints the directory holding it; its progress goes to stderr.
pub(crate) fn build_script(script: &str) -> Result<PathBuf> {
    build_script_with(script, &[])
}

/// [`build_script`] with arguments.
pub(crate) fn build_script_with(script: &str, args: &[&str]) -> Result<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(script);
    let output = Command::new("bash")
        .arg(&script)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| Error::Binaries(format!("cannot run {}: {e}", script.display())))?;
    if !output.status.success() {
        return Err(Error::Binaries(format!(
            "{} failed ({}); its message is above",
            script.display(),
            output.status
        )));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim(),
    ))
}
