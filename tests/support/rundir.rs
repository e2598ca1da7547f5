//! Per-run directories under one root, swept of leftovers from runs whose
//! process is gone (a killed test binary never runs its destructors).

use std::path::{Path, PathBuf};

use tempfile::TempDir;

use crate::{Error, Result};

/// Where run directories go unless [`Options::run_root`](crate::Options) says otherwise.
pub(crate) fn default_root() -> PathBuf {
    std::env::temp_dir().join("capwasm-testenv")
}

/// A fresh directory `<root>/<pid>-<random>`, removed on drop.
pub(crate) fn create(root: &Path) -> Result<TempDir> {
    let root = root.to_path_buf();
    std::fs::create_dir_all(&root).map_err(|source| Error::Io {
        path: root.clone(),
        source,
    })?;
    sweep(&root);
    tempfile::Builder::new()
        .prefix(&format!("{}-", std::process::id()))
        .tempdir_in(&root)
        .map_err(|source| Error::Io { path: root, source })
}

/// Removes directories whose owning process no longer runs. Best effort: a
/// directory that cannot be removed now is tried again next time.
fn sweep(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let owner = name
            .to_str()
            .and_then(|n| n.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = owner
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Writes `contents` to `dir/name` and returns the path.
pub(crate) fn write(dir: &Path, name: &str, contents: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, contents).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}
