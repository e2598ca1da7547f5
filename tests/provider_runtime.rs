//! Loading, calling and swapping real provider components.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use anyhow::Result;
use capwasm::testing::requests;
use capwasm::wasm::types::{BootstrapFormat, ProviderError};
use capwasm::wasm::{
    CallError, Capabilities, Error, Limits, PrecompiledCache, ProviderSource, ProviderSpec,
    Runtime, RuntimeSettings, WIT_PACKAGE, World,
};
use sha2::{Digest as _, Sha256};
use testenv::{KUBEADM_JOIN_CONFIG, guest_path};

const KUBEADM: &str = "kubeadm_bootstrap.wasm";
const SIM_V1: &str = "sim_infrastructure.wasm";
/// The same provider as 0.2.0, labelling the Nodes it creates with its version.
const SIM_V2: &str = "sim_infrastructure_v2.wasm";

fn runtime(cache: Option<PrecompiledCache>) -> Runtime {
    Runtime::new(
        RuntimeSettings {
            cache,
            ..RuntimeSettings::default()
        },
        None,
    )
    .expect("runtime")
}

fn bytes(file: &str) -> Vec<u8> {
    std::fs::read(guest_path(file)).unwrap_or_else(|e| panic!("{file}: {e} (run `make guests`)"))
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A runtime serving kubeadm-bootstrap as `kubeadm`.
async fn kubeadm_runtime() -> Result<Runtime, Error> {
    let runtime = runtime(None);
    install(
        &runtime,
        "kubeadm",
        ProviderSource::File(guest_path(KUBEADM)),
    )
    .await?;
    Ok(runtime)
}

async fn install(
    runtime: &Runtime,
    name: &str,
    source: ProviderSource,
) -> Result<Arc<capwasm::wasm::LoadedProvider>, Error> {
    runtime
        .swap(ProviderSpec {
            name: String::from(name),
            source,
            sha256: None,
            limits: Limits::default(),
            capabilities: Capabilities::default(),
        })
        .await
        .map(|(loaded, _)| loaded)
}

#[tokio::test]
async fn kubeadm_bootstrap_generates_a_join_cloud_config() -> Result<()> {
    let runtime = runtime(None);
    let loaded = install(
        &runtime,
        "kubeadm",
        ProviderSource::File(guest_path(KUBEADM)),
    )
    .await?;
    assert_eq!(loaded.world, World::Bootstrap);
    assert_eq!(loaded.info.name, "kubeadm-bootstrap");
    assert_eq!(
        loaded.config_schema.json()["additionalProperties"],
        false,
        "a strict schema"
    );
    assert_eq!(loaded.digest, format!("sha256:{}", sha256(&bytes(KUBEADM))));

    let data = runtime
        .generate("kubeadm", &requests::generate(KUBEADM_JOIN_CONFIG))
        .await?;
    assert_eq!(data.format, BootstrapFormat::CloudConfig);
    let text = String::from_utf8(data.value)?;
    assert!(text.starts_with("#cloud-config"), "{text}");
    assert!(text.contains("kubeadm join"), "{text}");
    assert!(
        text.contains("127.0.0.1:6443"),
        "the cluster endpoint: {text}"
    );
    Ok(())
}

#[tokio::test]
async fn invalid_config_is_reported_with_the_field_path() -> Result<()> {
    let runtime = kubeadm_runtime().await?;
    let config = KUBEADM_JOIN_CONFIG.replace("abcdef.0123456789abcdef", "not-a-token");
    let err = runtime
        .generate("kubeadm", &requests::generate(&config))
        .await
        .expect_err("invalid token");
    let CallError::Provider {
        error: ProviderError::InvalidConfig(ref invalid),
        ..
    } = err
    else {
        panic!("expected invalid-config, got {err}");
    };
    assert_eq!(invalid.path, "$.token");
    Ok(())
}

#[tokio::test]
async fn a_missing_endpoint_asks_to_retry_later() -> Result<()> {
    let runtime = kubeadm_runtime().await?;
    let mut request = requests::generate(KUBEADM_JOIN_CONFIG);
    request.cluster.control_plane_endpoint = None;
    let err = runtime
        .generate("kubeadm", &request)
        .await
        .expect_err("no endpoint yet");
    assert!(
        matches!(err, CallError::Provider { error: ProviderError::RetryAfter(ref r), .. } if r.seconds > 0),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn a_digest_mismatch_is_refused_and_the_right_digest_accepted() -> Result<()> {
    let runtime = runtime(None);
    let source = ProviderSource::File(guest_path(KUBEADM));
    let wrong = "0".repeat(64);
    let err = runtime
        .swap(ProviderSpec {
            name: String::from("kubeadm"),
            source: source.clone(),
            sha256: Some(wrong.clone()),
            limits: Limits::default(),
            capabilities: Capabilities::default(),
        })
        .await
        .expect_err("mismatch");
    assert!(matches!(err, Error::DigestMismatch { .. }), "{err}");
    assert!(
        runtime.registry().get("kubeadm").is_none(),
        "nothing was installed"
    );

    let right = format!("sha256:{}", sha256(&bytes(KUBEADM)));
    let (loaded, _) = runtime
        .swap(ProviderSpec {
            name: String::from("kubeadm"),
            source,
            sha256: Some(right.clone()),
            limits: Limits::default(),
            capabilities: Capabilities::default(),
        })
        .await?;
    assert_eq!(loaded.digest, right);
    Ok(())
}

/// What is loaded, and which loading error it must give.
type BadInput = (&'static str, ProviderSource, fn(&Error) -> bool);

#[tokio::test]
async fn bad_input_is_a_typed_error() -> Result<()> {
    let runtime = runtime(None);
    let cases: [BadInput; 4] = [
        (
            "a shell script",
            ProviderSource::Bytes(b"#!/bin/sh\necho hi\n".to_vec()),
            |e| matches!(e, Error::NotAComponent),
        ),
        (
            "a core module",
            ProviderSource::Bytes(b"\0asm\x01\0\0\0".to_vec()),
            |e| matches!(e, Error::NotAComponent),
        ),
        (
            "a truncated component",
            ProviderSource::Bytes(bytes(KUBEADM)[..4096].to_vec()),
            |e| matches!(e, Error::Compile(_)),
        ),
        (
            "a missing file",
            ProviderSource::File("/nonexistent/provider.wasm".into()),
            |e| matches!(e, Error::Read { .. }),
        ),
    ];
    for (what, source, expected) in cases {
        let err = install(&runtime, "x", source).await.expect_err(what);
        assert!(expected(&err), "{what}: {err:?}");
    }
    let too_big = runtime
        .swap(ProviderSpec {
            name: String::from("x"),
            source: ProviderSource::File(guest_path(KUBEADM)),
            sha256: None,
            limits: Limits {
                memory_bytes: 1 << 40,
                ..Limits::default()
            },
            capabilities: Capabilities::default(),
        })
        .await;
    assert!(
        matches!(too_big, Err(Error::MemoryLimitTooHigh { .. })),
        "{too_big:?}"
    );
    assert!(runtime.registry().get("x").is_none());

    // A bootstrap provider asked for an infrastructure export.
    install(
        &runtime,
        "kubeadm",
        ProviderSource::File(guest_path(KUBEADM)),
    )
    .await?;
    let wrong_world = runtime
        .reconcile_pool("kubeadm", &requests::reconcile_pool("{}", 1))
        .await;
    assert!(
        matches!(wrong_world, Err(CallError::WrongWorld { .. })),
        "{wrong_world:?}"
    );
    let unknown = runtime.generate("nobody", &requests::generate("{}")).await;
    assert!(
        matches!(unknown, Err(CallError::NotLoaded(_))),
        "{unknown:?}"
    );
    Ok(())
}

/// What the component is, its file, the error expected, and what the
/// error's message must name.
type Refused = (&'static str, &'static str, fn(&Error) -> bool, &'static str);

#[tokio::test]
async fn components_of_another_contract_are_refused_saying_what_they_are() -> Result<()> {
    let runtime = runtime(None);
    let cases: [Refused; 2] = [
        (
            "built against capwasm:provider@0.2.0",
            "testdata_unsupported_version.wasm",
            |e| {
                matches!(e, Error::UnsupportedVersion { found, supported }
                    if found == "capwasm:provider@0.2.0" && *supported == WIT_PACKAGE)
            },
            "capwasm:provider@0.2.0",
        ),
        (
            "exporting no capwasm world",
            "testdata_no_world.wasm",
            |e| matches!(e, Error::UnknownWorld { exports } if exports == "greet"),
            "(exports: greet)",
        ),
    ];
    for (what, file, expected, named) in cases {
        let err = install(&runtime, "x", ProviderSource::File(guest_path(file)))
            .await
            .expect_err(what);
        assert!(expected(&err), "{what}: {err:?}");
        assert!(err.to_string().contains(named), "{what}: {err}");
    }
    assert!(runtime.registry().get("x").is_none());
    Ok(())
}

#[tokio::test]
async fn a_restart_loads_from_the_precompiled_cache() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let cache = PrecompiledCache::new(dir.path().join("cache"));
    let first = install(
        &runtime(Some(cache.clone())),
        "kubeadm",
        ProviderSource::File(guest_path(KUBEADM)),
    )
    .await?;
    assert!(!first.from_cache);

    let restarted = runtime(Some(cache));
    let second = install(
        &restarted,
        "kubeadm",
        ProviderSource::File(guest_path(KUBEADM)),
    )
    .await?;
    assert!(
        second.from_cache,
        "the second runtime found the compiled component"
    );
    assert_eq!(first.digest, second.digest);
    restarted
        .generate("kubeadm", &requests::generate(KUBEADM_JOIN_CONFIG))
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_swap_under_load_fails_no_call_and_keeps_the_old_version_on_a_bad_module() -> Result<()>
{
    let runtime = runtime(None);
    let v1 = install(&runtime, "sim", ProviderSource::File(guest_path(SIM_V1))).await?;
    assert_eq!(v1.info.version, "0.1.0");

    // Callers record the version every call ran; a version, once seen,
    // must never give way to an older one.
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU32::new(0));
    let callers: Vec<_> = (0..2)
        .map(|_| {
            let (runtime, stop, calls) = (runtime.clone(), stop.clone(), calls.clone());
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let info = runtime.info("sim").await?;
                    if seen.last() != Some(&info.version) {
                        seen.push(info.version);
                    }
                    calls.fetch_add(1, Ordering::Relaxed);
                }
                anyhow::Ok(seen)
            })
        })
        .collect();
    // Waits until the callers have made 50 more successful calls.
    let fifty_more_calls = || {
        let calls = calls.clone();
        let at_least = calls.load(Ordering::Relaxed) + 50;
        tokio::time::timeout(Duration::from_secs(30), async move {
            while calls.load(Ordering::Relaxed) < at_least {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    fifty_more_calls().await?;

    // A new version: swapped in while calls run; every call from now on runs it.
    let (v2, previous) = runtime
        .swap(ProviderSpec {
            name: String::from("sim"),
            source: ProviderSource::File(guest_path(SIM_V2)),
            sha256: None,
            limits: Limits::default(),
            capabilities: Capabilities::default(),
        })
        .await?;
    assert_eq!(previous.map(|p| p.digest.clone()), Some(v1.digest.clone()));
    assert_eq!(v2.digest, format!("sha256:{}", sha256(&bytes(SIM_V2))));
    assert_eq!(
        (v2.info.name.as_str(), v2.info.version.as_str()),
        ("sim-infrastructure", "0.2.0")
    );
    assert_eq!(runtime.info("sim").await?.version, "0.2.0");
    fifty_more_calls().await?;

    // A broken module is refused; the working version stays in service.
    let broken = runtime
        .swap(ProviderSpec {
            name: String::from("sim"),
            source: ProviderSource::Bytes(b"\0asm\x0d\0\x01\0garbage".to_vec()),
            sha256: None,
            limits: Limits::default(),
            capabilities: Capabilities::default(),
        })
        .await;
    assert!(broken.is_err());
    assert_eq!(
        runtime.registry().get("sim").map(|p| p.digest.clone()),
        Some(v2.digest.clone())
    );
    fifty_more_calls().await?;
    assert_eq!(runtime.info("sim").await?.version, "0.2.0");

    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        // A caller may have started after the swap, never before the first load.
        let seen = caller.await??;
        let seen: Vec<&str> = seen.iter().map(String::as_str).collect();
        assert!(
            [&["0.1.0", "0.2.0"][..], &["0.1.0"], &["0.2.0"]].contains(&seen.as_slice()),
            "versions one caller saw, in order: {seen:?}"
        );
    }
    Ok(())
}

/// A provider that needs the standard library (a crate that is not
/// `no_std`) imports `wasi:cli` and `wasi:io`; the host serves them with an
/// empty environment and keeps stderr, where the standard library prints a
/// panic.
#[tokio::test]
async fn a_provider_linking_the_standard_library_is_served_an_empty_environment() -> Result<()> {
    let runtime = runtime(None);
    let loaded = install(
        &runtime,
        "std",
        ProviderSource::File(guest_path("testdata_std_provider.wasm")),
    )
    .await?;
    assert_eq!(loaded.world, World::Bootstrap);

    let data = runtime.generate("std", &requests::generate("{}")).await?;
    let text = String::from_utf8(data.value)?;
    assert!(
        text.contains("owner=pool-a env=0 args=0"),
        "no variables or arguments reach the guest: {text}"
    );

    // The panic is written to stderr, which the host keeps.
    let err = runtime
        .generate("std", &requests::generate(r#"{"panic": true}"#))
        .await
        .expect_err("the guest panics");
    let CallError::Trapped { ref last_words, .. } = err else {
        panic!("expected a trap, got {err}");
    };
    assert!(
        last_words.contains("std provider panics on request (owner pool-a)"),
        "std's panic output is kept: {last_words:?}"
    );
    Ok(())
}
