//! Loading a provider, one type per stage: fetched → verified → compiled →
//! checked → [`LoadedProvider`]. Only the last can enter the registry, so a
//! component that fails any stage never replaces a working one.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use super::cache::PrecompiledCache;
use super::limits::{Capabilities, Limits};
use super::registry::{LoadedProvider, ProviderPre};
use super::state::CallState;
use super::{Error, WIT_PACKAGE, call};

/// Where a component's bytes come from.
#[derive(Clone, Debug)]
pub enum ProviderSource {
    /// Bytes already in memory (from a ConfigMap, say).
    Bytes(Vec<u8>),
    /// A file on the operator's filesystem.
    File(PathBuf),
}

/// The provider worlds of the WIT package.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum World {
    /// `bootstrap-provider`: generates bootstrap data.
    Bootstrap,
    /// `infrastructure-provider`: machine pools, clusters, providerIDs.
    Infrastructure,
}

impl World {
    /// The WIT world name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bootstrap => "bootstrap-provider",
            Self::Infrastructure => "infrastructure-provider",
        }
    }

    /// The interface whose export identifies the world.
    fn marker(self) -> &'static str {
        match self {
            Self::Bootstrap => "capwasm:provider/bootstrap",
            Self::Infrastructure => "capwasm:provider/machine-pools",
        }
    }
}

impl std::fmt::Display for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What to load, and under which name and bounds.
pub(crate) struct LoadRequest {
    pub name: Arc<str>,
    pub source: ProviderSource,
    pub expected_sha256: Option<String>,
    pub limits: Limits,
    pub capabilities: Arc<Capabilities>,
}

struct Fetched(Vec<u8>);

struct Verified {
    bytes: Vec<u8>,
    digest_hex: String,
}

struct Compiled {
    component: Component,
    digest_hex: String,
    from_cache: bool,
    took: std::time::Duration,
}

pub(crate) fn load(
    engine: &Engine,
    linker: &Linker<CallState>,
    cache: Option<&PrecompiledCache>,
    request: LoadRequest,
) -> Result<LoadedProvider, Error> {
    let started = Instant::now();
    let fetched = fetch(request.source)?;
    let verified = verify(fetched, request.expected_sha256.as_deref())?;
    let compiled = compile(engine, cache, verified)?;
    let world = world_of(engine, &compiled.component)?;
    let link = |source| Error::Link {
        world: world.as_str(),
        source,
    };
    let instance_pre = linker.instantiate_pre(&compiled.component).map_err(link)?;
    let pre = ProviderPre::new(instance_pre, world).map_err(link)?;
    // Check: one real instantiation and two calls under the provider's own limits.
    let mut provider = LoadedProvider {
        name: request.name,
        digest: format!("sha256:{}", compiled.digest_hex),
        world,
        info: super::types::ProviderInfo {
            name: String::new(),
            version: String::new(),
        },
        config_schema: serde_json::Value::Null,
        limits: request.limits,
        capabilities: request.capabilities,
        pre,
        // Set once the check below has passed.
        load_time: std::time::Duration::ZERO,
        compile_time: compiled.took,
        from_cache: compiled.from_cache,
    };
    let check = |e| Error::Check(Box::new(e));
    provider.info = call::info(engine, &provider, None).map_err(check)?;
    call::check_export_types(engine, &provider).map_err(link)?;
    let schema = call::config_schema(engine, &provider, None).map_err(check)?;
    provider.config_schema =
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&schema)
            .map(serde_json::Value::Object)
            .map_err(Error::InvalidSchema)?;
    provider.load_time = started.elapsed();
    Ok(provider)
}

fn fetch(source: ProviderSource) -> Result<Fetched, Error> {
    match source {
        ProviderSource::Bytes(bytes) => Ok(Fetched(bytes)),
        ProviderSource::File(path) => std::fs::read(&path)
            .map(Fetched)
            .map_err(|source| Error::Read { path, source }),
    }
}

fn verify(Fetched(bytes): Fetched, expected: Option<&str>) -> Result<Verified, Error> {
    let digest_hex = hex::encode(Sha256::digest(&bytes));
    if let Some(expected) = expected {
        let expected_hex = expected.strip_prefix("sha256:").unwrap_or(expected);
        if expected_hex.len() != 64 || !expected_hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::InvalidDigest(expected.to_owned()));
        }
        if !expected_hex.eq_ignore_ascii_case(&digest_hex) {
            return Err(Error::DigestMismatch {
                expected: expected_hex.to_ascii_lowercase(),
                actual: digest_hex,
            });
        }
    }
    // A component has the Wasm magic and layer 1 (a core module has layer 0).
    if bytes.get(0..4) != Some(b"\0asm") || bytes.get(6..8) != Some(&[1, 0]) {
        return Err(Error::NotAComponent);
    }
    Ok(Verified { bytes, digest_hex })
}

fn compile(
    engine: &Engine,
    cache: Option<&PrecompiledCache>,
    verified: Verified,
) -> Result<Compiled, Error> {
    let Verified { bytes, digest_hex } = verified;
    let started = Instant::now();
    if let Some(component) = cache.and_then(|c| c.load(engine, &digest_hex)) {
        return Ok(Compiled {
            component,
            digest_hex,
            from_cache: true,
            took: started.elapsed(),
        });
    }
    let component = Component::new(engine, &bytes).map_err(Error::Compile)?;
    let took = started.elapsed();
    if let Some(cache) = cache
        && let Err(error) = cache.store(engine, &digest_hex, &component)
    {
        // Loading works without the cache; the next start recompiles.
        tracing::warn!(
            error = &error as &dyn std::error::Error,
            "cannot cache the precompiled component"
        );
    }
    Ok(Compiled {
        component,
        digest_hex,
        from_cache: false,
        took,
    })
}

/// Which world the component implements, from its exports; refuses other
/// versions of the package with the version it found.
fn world_of(engine: &Engine, component: &Component) -> Result<World, Error> {
    let exports: Vec<String> = component
        .component_type()
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    let supported_version = WIT_PACKAGE.rsplit_once('@').map_or("", |(_, v)| v);
    for world in [World::Infrastructure, World::Bootstrap] {
        let Some(export) = exports
            .iter()
            .find(|e| e.split('@').next() == Some(world.marker()))
        else {
            continue;
        };
        let version = export.rsplit_once('@').map_or("", |(_, v)| v);
        if !compatible(version, supported_version) {
            return Err(Error::UnsupportedVersion {
                found: format!("capwasm:provider@{version}"),
                supported: WIT_PACKAGE,
            });
        }
        return Ok(world);
    }
    Err(Error::UnknownWorld {
        exports: exports.join(", "),
    })
}

/// Semver compatibility as the component model reads it: same major, or for
/// 0.x the same minor.
fn compatible(found: &str, supported: &str) -> bool {
    let parts = |v: &str| -> Vec<u64> {
        v.split('.')
            .map(|p| p.parse().unwrap_or(u64::MAX))
            .collect()
    };
    let (found, supported) = (parts(found), parts(supported));
    match (found.as_slice(), supported.as_slice()) {
        ([0, fm, ..], [0, sm, ..]) => fm == sm,
        ([fmaj, ..], [smaj, ..]) => fmaj == smaj && *fmaj != u64::MAX,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_compatible_within_a_minor_for_zero_major() {
        assert!(compatible("0.1.0", "0.1.0"));
        assert!(compatible("0.1.3", "0.1.0"));
        assert!(!compatible("0.2.0", "0.1.0"));
        assert!(compatible("1.4.0", "1.0.0"));
        assert!(!compatible("2.0.0", "1.0.0"));
        assert!(!compatible("x", "0.1.0"));
    }

    #[test]
    fn verify_refuses_a_mismatched_digest_and_names_both() {
        let bytes = b"\0asm\x0d\0\x01\0".to_vec();
        let wrong = "0".repeat(64);
        match verify(Fetched(bytes), Some(&wrong)) {
            Err(Error::DigestMismatch { expected, actual }) => {
                assert_eq!(expected, wrong);
                assert_eq!(actual.len(), 64);
            }
            Err(other) => panic!("expected a digest mismatch, got {other:?}"),
            Ok(_) => panic!("a wrong digest was accepted"),
        }
    }

    #[test]
    fn verify_refuses_a_core_module_and_garbage() {
        assert!(matches!(
            verify(Fetched(b"\0asm\x01\0\0\0".to_vec()), None),
            Err(Error::NotAComponent)
        ));
        assert!(matches!(
            verify(Fetched(b"hello".to_vec()), None),
            Err(Error::NotAComponent)
        ));
    }

    #[test]
    fn verify_refuses_a_malformed_expected_digest() {
        let bytes = b"\0asm\x0d\0\x01\0".to_vec();
        assert!(matches!(
            verify(Fetched(bytes), Some("sha256:xyz")),
            Err(Error::InvalidDigest(_))
        ));
    }
}
