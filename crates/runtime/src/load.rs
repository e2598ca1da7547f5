//! Loading a provider, one type per stage: fetched → verified → compiled →
//! checked → [`LoadedProvider`]. Only the last can enter the registry, so a
//! component that fails any stage never replaces a working one.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::cache::PrecompiledCache;
use super::call::Host;
use super::host::http::Egress;
use super::limits::{Capabilities, Limits};
use super::linkers::Linkers;
use super::provider::{Callee, LoadedProvider, ProviderPre};
use super::schema::ConfigSchema;
use super::world::{World, unversioned};
use super::{CallError, Error, call};

/// Where a component's bytes come from.
#[derive(Clone, Debug)]
pub enum ProviderSource {
    /// Bytes already in memory (from a ConfigMap, say).
    Bytes(Vec<u8>),
    /// A file on the operator's filesystem.
    File(PathBuf),
    /// The precompiled cache's compilation of the component with this
    /// sha256 (hex), verified when it was compiled; [`Error::NotPrecompiled`]
    /// if the cache has none.
    Precompiled(String),
}

/// A provider to load: the name it is served under, where its bytes come
/// from, the digest they must have, and the bounds and authority its calls
/// get.
#[derive(Clone, Debug)]
pub struct ProviderSpec {
    /// The registry name.
    pub name: String,
    /// Where the bytes come from.
    pub source: ProviderSource,
    /// The digest the bytes must have (`sha256:<hex>` or `<hex>`), if pinned.
    pub sha256: Option<String>,
    /// Bounds on each call.
    pub limits: Limits,
    /// Authority beyond computing on its inputs.
    pub capabilities: Capabilities,
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

/// Loads a provider: reading, verifying and compiling on a blocking thread,
/// then linking and checking it with two calls under its own limits.
pub(crate) async fn load(
    host: &Host<'_>,
    linkers: &Linkers,
    cache: Option<&PrecompiledCache>,
    spec: ProviderSpec,
) -> Result<LoadedProvider, Error> {
    let started = Instant::now();
    let ProviderSpec {
        name,
        source,
        sha256: expected_sha256,
        limits,
        capabilities,
    } = spec;
    let name: Arc<str> = name.into();
    let egress = Arc::new(Egress::new(
        capabilities,
        limits.http,
        host.connections.clone(),
        host.metrics.cloned(),
    ));
    let (engine, cache) = (host.engine.clone(), cache.cloned());
    let compiled = tokio::task::spawn_blocking(move || {
        if let ProviderSource::Precompiled(digest_hex) = source {
            return precompiled(
                &engine,
                cache.as_ref(),
                digest_hex,
                expected_sha256.as_deref(),
            );
        }
        let fetched = fetch(source)?;
        let verified = verify(fetched, expected_sha256.as_deref())?;
        compile(&engine, cache.as_ref(), verified)
    })
    .await??;
    let world = world_of(host.engine, &compiled.component)?;
    granted(host.engine, &compiled.component, world)?;
    let link = |source| Error::Link {
        world: world.as_str(),
        source,
    };
    let instance_pre = linkers
        .of(world)
        .instantiate_pre(&compiled.component)
        .map_err(link)?;
    let pre = ProviderPre::new(instance_pre, world).map_err(link)?;
    let digest = format!("sha256:{}", compiled.digest_hex);
    // Check: one real instantiation and calls under the provider's own
    // limits; a new version starts unthrottled for every tenant.
    let share = host.fairness.share(&name);
    share.follow(&digest);
    let callee = Callee {
        name: &name,
        digest: &digest,
        world,
        limits: &limits,
        egress: &egress,
        share: &share,
        tenant: "",
        pre: &pre,
        keys: None,
        join_token: None,
    };
    let check = |e| Error::Check(Box::new(e));
    let info = call::info(host, &callee).await.map_err(check)?;
    match call::check_export_types(host, &callee).await {
        Err(CallError::Trapped { trap, .. }) => return Err(link(wasmtime::format_err!("{trap}"))),
        other => other.map_err(check)?,
    }
    let schema = call::config_schema(host, &callee).await.map_err(check)?;
    // Bounded, but the guest's to shape: off the async runtime.
    let config_schema = tokio::task::spawn_blocking(move || ConfigSchema::compile(&schema))
        .await?
        .map_err(Error::InvalidSchema)?;
    Ok(LoadedProvider {
        name,
        digest,
        world,
        info,
        config_schema,
        limits,
        egress,
        share,
        pre,
        load_time: started.elapsed(),
        compile_time: compiled.took,
        from_cache: compiled.from_cache,
    })
}

fn fetch(source: ProviderSource) -> Result<Fetched, Error> {
    match source {
        ProviderSource::Bytes(bytes) => Ok(Fetched(bytes)),
        ProviderSource::File(path) => std::fs::read(&path)
            .map(Fetched)
            .map_err(|source| Error::Read { path, source }),
        ProviderSource::Precompiled(digest_hex) => Err(Error::NotPrecompiled(digest_hex)),
    }
}

/// The cached compilation of `digest_hex`, which must be the pinned digest if one is.
fn precompiled(
    engine: &Engine,
    cache: Option<&PrecompiledCache>,
    digest_hex: String,
    expected: Option<&str>,
) -> Result<Compiled, Error> {
    pinned(expected, &digest_hex)?;
    let started = Instant::now();
    let component = cache
        .and_then(|c| c.load(engine, &digest_hex))
        .ok_or_else(|| Error::NotPrecompiled(digest_hex.clone()))?;
    Ok(Compiled {
        component,
        digest_hex,
        from_cache: true,
        took: started.elapsed(),
    })
}

/// Whether `digest_hex` is the digest `expected` pins (any, if none).
fn pinned(expected: Option<&str>, digest_hex: &str) -> Result<(), Error> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let expected_hex = expected.strip_prefix("sha256:").unwrap_or(expected);
    if expected_hex.len() != 64 || !expected_hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::InvalidDigest(expected.to_owned()));
    }
    if !expected_hex.eq_ignore_ascii_case(digest_hex) {
        return Err(Error::DigestMismatch {
            expected: expected_hex.to_ascii_lowercase(),
            actual: digest_hex.to_owned(),
        });
    }
    Ok(())
}

fn verify(Fetched(bytes): Fetched, expected: Option<&str>) -> Result<Verified, Error> {
    let digest_hex = hex::encode(Sha256::digest(&bytes));
    pinned(expected, &digest_hex)?;
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
    for world in [
        World::Infrastructure,
        World::Bootstrap,
        World::Platform,
        World::ControlPlane,
    ] {
        let Some(export) = exports.iter().find(|e| unversioned(e) == world.marker()) else {
            continue;
        };
        let version = export.rsplit_once('@').map_or("", |(_, v)| v);
        let (package, supported_version) = world.package().rsplit_once('@').unwrap_or_default();
        if !compatible(version, supported_version) {
            return Err(Error::UnsupportedVersion {
                found: format!("{package}@{version}"),
                supported: world.package(),
            });
        }
        return Ok(world);
    }
    Err(Error::UnknownWorld {
        exports: exports.join(", "),
    })
}

/// Refuses a component that imports what its world does not grant (the
/// linker would, but naming a resource type rather than the import).
fn granted(engine: &Engine, component: &Component, world: World) -> Result<(), Error> {
    let component_type = component.component_type();
    let mut imports = component_type.imports(engine).map(|(name, _)| name);
    let Some(import) = imports.find(|name| {
        !world
            .may_import()
            .any(|granted| granted == unversioned(name))
    }) else {
        return Ok(());
    };
    Err(Error::ImportNotGranted {
        import: import.to_owned(),
        world: world.as_str(),
        granted: world.may_import().collect::<Vec<_>>().join(", "),
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
