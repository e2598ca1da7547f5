//! Upstream's clusterctl (built from its Go module by
//! `tests/clusterctl/build.sh`) against a local repository of capwasm's
//! release artifacts (`deploy/clusterctl/release.sh`), with a configuration
//! of its own: every provider from `file://`, nothing fetched from GitHub.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kube::api::DynamicObject;
use serde::Deserialize as _;

use crate::binaries::build_script;
use crate::{Error, Result};

/// The Cluster API release clusterctl and its core provider come from.
pub const CLUSTER_API_VERSION: &str = "v1.14.2";

/// What `tests/clusterctl/build.sh` built.
#[derive(Clone, Debug)]
pub struct ClusterctlBuild {
    /// The clusterctl binary.
    pub clusterctl: PathBuf,
    /// The core provider's release directory (`core-components.yaml`,
    /// `metadata.yaml`), as upstream's release makes it.
    pub core_release: PathBuf,
    /// cert-manager's CRDs, of the version this clusterctl installs.
    pub cert_manager_crds: PathBuf,
}

impl ClusterctlBuild {
    /// The build, made the first time. An error, never a skip, when it
    /// cannot be had.
    pub fn locate() -> Result<Self> {
        let dir = build_script("clusterctl/build.sh")?;
        let build = Self {
            clusterctl: dir.join("clusterctl"),
            core_release: dir.join("repository/cluster-api").join(CLUSTER_API_VERSION),
            cert_manager_crds: dir.join("cert-manager-crds"),
        };
        if !(build.clusterctl.is_file()
            && build.core_release.join("core-components.yaml").is_file()
            && build.cert_manager_crds.is_dir())
        {
            return Err(Error::Binaries(format!(
                "{} lacks clusterctl, its core release or cert-manager's CRDs; run `make clusterctl`",
                dir.display()
            )));
        }
        Ok(build)
    }
}

/// Runs `deploy/clusterctl/release.sh VERSION --output DIR` with `args`
/// after it; the repository directory it printed.
pub fn release(version: &str, output: &Path, args: &[&str]) -> Result<PathBuf> {
    release_with(version, output, args, &[])
}

/// [`release`] with `env` added to its environment (`COSIGN_PASSWORD`).
pub fn release_with(
    version: &str,
    output: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/clusterctl/release.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(version)
        .arg("--output")
        .arg(output)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .map_err(|e| Error::Tool(format!("cannot run {}: {e}", script.display())))?;
    if !out.status.success() {
        return Err(Error::Tool(format!(
            "release.sh {version} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// clusterctl with a configuration and home of its own.
pub struct Clusterctl {
    binary: PathBuf,
    home: tempfile::TempDir,
}

impl Clusterctl {
    /// clusterctl reading `providers` (name, type, URL) and nothing else:
    /// cert-manager's URL is a file too, so that nothing is ever fetched.
    pub fn new(build: &ClusterctlBuild, providers: &[(&str, &str, String)]) -> Result<Self> {
        let home = tempfile::tempdir().map_err(|source| Error::Io {
            path: std::env::temp_dir(),
            source,
        })?;
        let mut config = String::from("providers:\n");
        for (name, kind, url) in providers {
            // Writing into a String cannot fail.
            let _ = write!(
                config,
                "  - name: {name}\n    type: {kind}\n    url: {url}\n"
            );
        }
        // Never read: cert-manager's CRDs are installed beforehand, which is
        // what `clusterctl init` checks for (it creates an Issuer and a
        // Certificate, then deletes them).
        let _ = write!(
            config,
            "cert-manager:\n  url: file://{}/cert-manager/v1.21.1/cert-manager.yaml\n",
            home.path().display()
        );
        let path = home.path().join("clusterctl.yaml");
        std::fs::write(&path, config).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        Ok(Self {
            binary: build.clusterctl.clone(),
            home,
        })
    }

    /// Runs clusterctl with `args` and only `env` set (besides its home
    /// and the settings that keep it off the network), as a user whose
    /// environment holds nothing else.
    pub fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Result<Output> {
        let home = self.home.path();
        Command::new(&self.binary)
            .args(args)
            .arg("--config")
            .arg(home.join("clusterctl.yaml"))
            .env_clear()
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home)
            // No check for a newer clusterctl on GitHub; no Go proxy asked
            // for versions (only GitHub repositories use it).
            .env("CLUSTERCTL_DISABLE_VERSIONCHECK", "true")
            .env("GOPROXY", "off")
            .envs(env.iter().copied())
            .output()
            .map_err(|e| Error::Tool(format!("cannot run {}: {e}", self.binary.display())))
    }

    /// [`Self::run`], which must succeed: its standard output.
    pub fn ok(&self, args: &[&str], env: &[(&str, &str)]) -> Result<String> {
        let out = self.run(args, env)?;
        if !out.status.success() {
            return Err(Error::Tool(format!(
                "clusterctl {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        String::from_utf8(out.stdout)
            .map_err(|e| Error::Tool(format!("clusterctl {}: {e}", args.join(" "))))
    }

    /// A file in clusterctl's home.
    pub fn file(&self, name: &str) -> PathBuf {
        self.home.path().join(name)
    }
}

/// The objects of a multi-document YAML stream.
pub fn documents(text: &str) -> Result<Vec<DynamicObject>> {
    let invalid = |e: String| Error::Manifest(format!("YAML stream: {e}"));
    let mut objects = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value = serde_json::Value::deserialize(document).map_err(|e| invalid(e.to_string()))?;
        if !value.is_null() {
            objects.push(serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?);
        }
    }
    Ok(objects)
}
