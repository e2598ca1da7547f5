//! A project's files: written whole or not at all, and filled in from the
//! templates and the guests' own sources.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::Refusal;

/// One file of a project.
pub(super) struct File {
    pub(super) path: &'static str,
    pub(super) text: String,
    pub(super) executable: bool,
}

impl File {
    pub(super) fn new(path: &'static str, text: impl Into<String>) -> Self {
        Self {
            path,
            text: text.into(),
            executable: false,
        }
    }
}

/// Writes `files` into `dir`, which must not exist or be empty. They are
/// written into a directory beside it first and moved into place whole, so
/// a failure part-way leaves nothing behind.
pub(super) fn write(dir: &Path, files: &[File]) -> anyhow::Result<()> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Refusal::NotEmpty(dir.display().to_string()).into());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(Refusal::NotEmpty(dir.display().to_string()).into());
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot make {}", parent.display()))?;
    let stage = tempfile::Builder::new()
        .prefix(".capwasm-provider-new-")
        .tempdir_in(&parent)
        .with_context(|| format!("cannot write into {}", parent.display()))?;
    for file in files {
        let path = stage.path().join(file.path);
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder)
                .with_context(|| format!("cannot make {}", folder.display()))?;
        }
        std::fs::write(&path, &file.text)
            .with_context(|| format!("cannot write {}", path.display()))?;
        if file.executable {
            executable(&path)?;
        }
    }
    // An empty directory is replaced by the rename.
    std::fs::rename(stage.path(), dir)
        .with_context(|| format!("cannot move the project into {}", dir.display()))?;
    // Renamed away: nothing is left for the guard to remove.
    let _ = stage.keep();
    Ok(())
}

#[cfg(unix)]
fn executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

#[cfg(not(unix))]
fn executable(_: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// `text` with every `{{key}}` replaced by its value.
pub(super) fn fill(text: &str, values: &[(&str, &str)]) -> String {
    let mut out = text.to_owned();
    for (key, value) in values {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    out
}

/// `text` with `from` replaced by `to`, failing if `from` is not in it:
/// the embedded sources are the guests', and a rewrite that no longer
/// applies must not yield a project that silently differs.
pub(super) fn rewrite(
    template: &'static str,
    text: &str,
    from: &'static str,
    to: &str,
) -> Result<String, Refusal> {
    if text.contains(from) {
        Ok(text.replace(from, to))
    } else {
        Err(Refusal::Template(template, from))
    }
}

/// A string as a TOML or JSON string literal (the two agree for paths).
pub(super) fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}
