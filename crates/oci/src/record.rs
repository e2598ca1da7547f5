//! What was verified of each image, beside the precompiled components: a
//! manifest digest's component digest and the keys that signed it, so a
//! restart can serve a pinned image with its registry down, and can skip
//! the pull when the component is compiled already.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Error;

/// One image's record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// `sha256:<hex>` of the manifest.
    pub manifest_digest: String,
    /// `sha256:<hex>` of the component it holds.
    pub component_digest: String,
    /// Fingerprints of the keys whose signatures of it were verified.
    #[serde(default)]
    pub signed_by: Vec<String>,
}

/// A directory of records, one file per manifest digest.
#[derive(Clone, Debug)]
pub struct Records {
    dir: PathBuf,
}

impl Records {
    /// Records in `dir` (created 0700 on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn path(&self, manifest_digest: &str) -> Option<PathBuf> {
        let hex = manifest_digest.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| self.dir.join(format!("{}.json", hex.to_ascii_lowercase())))
    }

    /// The record of `manifest_digest`, if one was written.
    pub fn get(&self, manifest_digest: &str) -> Option<Record> {
        let bytes = std::fs::read(self.path(manifest_digest)?).ok()?;
        let record: Record = serde_json::from_slice(&bytes).ok()?;
        (record.manifest_digest == manifest_digest).then_some(record)
    }

    /// Writes `record` (write, then rename).
    pub fn put(&self, record: &Record) -> Result<(), Error> {
        let Some(path) = self.path(&record.manifest_digest) else {
            return Ok(());
        };
        let io = |source| Error::Record {
            path: path.clone(),
            source,
        };
        let bytes = serde_json::to_vec(record).map_err(|e| io(std::io::Error::other(e)))?;
        capwasm_runtime::files::write_private(&self.dir, &path, &bytes).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_read_back_by_its_manifest_digest() {
        let dir = std::env::temp_dir().join(format!("capwasm-records-{}", std::process::id()));
        let records = Records::new(&dir);
        let record = Record {
            manifest_digest: format!("sha256:{}", "a".repeat(64)),
            component_digest: format!("sha256:{}", "b".repeat(64)),
            signed_by: vec!["sha256:k".into()],
        };
        assert_eq!(records.get(&record.manifest_digest), None);
        records.put(&record).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(records.get(&record.manifest_digest), Some(record));
        assert_eq!(records.get("sha256:../../etc/passwd"), None);
        let _ = std::fs::remove_dir_all(dir);
    }
}
