//! Precompiled components on disk, keyed by the source's digest and the
//! engine's compatibility fingerprint, so a restart does not recompile.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;

use wasmtime::Engine;
use wasmtime::component::Component;

use super::Error;

/// A directory of `<digest>-<engine>.cwasm` files.
#[derive(Clone, Debug)]
pub struct PrecompiledCache {
    dir: PathBuf,
}

impl PrecompiledCache {
    /// A cache in `dir` (created on first write, readable only by this user).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn path(&self, engine: &Engine, digest_hex: &str) -> PathBuf {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        self.dir
            .join(format!("{digest_hex}-{:016x}.cwasm", hasher.finish()))
    }

    /// Whether a compilation of the component `digest_hex` is cached.
    pub(crate) fn contains(&self, engine: &Engine, digest_hex: &str) -> bool {
        self.path(engine, digest_hex).is_file()
    }

    /// The directory.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The cached compilation of the component whose bytes hash to `digest_hex`.
    pub(crate) fn load(&self, engine: &Engine, digest_hex: &str) -> Option<Component> {
        let path = self.path(engine, digest_hex);
        if !path.is_file() {
            return None;
        }
        // SAFETY: wasmtime runs deserialised machine code as is. This file is
        // only ever written by `store` below, from `Component::serialize` of a
        // component compiled in-process from bytes whose sha256 is in the
        // file name and was verified before compiling; the directory is
        // created 0700, so only the operator's own user can replace it; and
        // wasmtime checks the engine compatibility header before using it.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize_file(engine, &path) };
        match component {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(path = %path.display(), error = %error, "ignoring an unusable precompiled component");
                None
            }
        }
    }

    /// Writes the compilation of `component` for next time (write, then rename).
    pub(crate) fn store(
        &self,
        engine: &Engine,
        digest_hex: &str,
        component: &Component,
    ) -> Result<(), Error> {
        let path = self.path(engine, digest_hex);
        let io = |source| Error::Cache {
            path: path.clone(),
            source,
        };
        let bytes = component
            .serialize()
            .map_err(|e| io(std::io::Error::other(e.to_string())))?;
        crate::files::write_private(&self.dir, &path, &bytes).map_err(io)
    }
}
