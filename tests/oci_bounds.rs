//! Pulls from registries that misbehave on purpose end in bounded, named
//! failures: an answer without end (a manifest, an error, a token) is cut
//! at the cap having taken about that much, a manifest or a layer sent a
//! byte at a time ends at the pull's deadline, and a real cosign signature
//! copied beside the same digest in another repository is refused there.
//! The first tests drive `oci::Puller` itself; the last runs them through
//! the operator (`capwasm run`) and reads the ProviderModules' conditions.

use std::time::{Duration, Instant};

use capwasm::api::ProviderModule;
use capwasm::api::providermodule::World;
use capwasm::oci::{
    Auth, Error, ImageRef, Policy, PublicKey, Puller, Pushed, SignatureError, Signer,
    push_component, verify_signature,
};
use capwasm::testing::guest_path;
use capwasm::testing::objects::ProviderModuleBuilder;
use kube::Api;
use kube::api::PostParams;
use testenv::flows::{condition, wait_for};
use testenv::hostile_registry::{HostileRegistry, Misbehaviour};
use testenv::install::{Core, Install};
use testenv::registry::{KeyPair, Registry};

/// The answer cap of a default `Puller`.
const CAP: u64 = 4 << 20;
/// What may be on its way beyond the cap when the client hangs up: the
/// loopback sockets' buffers on both sides, and a chunk or two.
const IN_FLIGHT: u64 = 32 << 20;
/// How long the server gets to see its client hang up.
const HANG_UP: Duration = Duration::from_secs(10);

fn reference(image: &str) -> ImageRef {
    ImageRef::parse(image, true).expect("a loopback reference")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_without_end_fail_at_the_cap_having_taken_about_that_much() {
    let pinned = format!("@sha256:{}", "a".repeat(64));
    let cases = [
        (Misbehaviour::EndlessManifest, None, "the tag"),
        (Misbehaviour::EndlessManifest, Some(&pinned), "the manifest"),
        (Misbehaviour::GigabyteManifest, None, "the tag"),
        (
            Misbehaviour::EndlessError,
            None,
            "the 404 answer to the tag",
        ),
        (Misbehaviour::EndlessToken, None, "a pull token"),
    ];
    for (misbehaviour, pin, what) in cases {
        let registry = HostileRegistry::start(misbehaviour)
            .await
            .expect("a hostile registry");
        let image = reference(&match pin {
            Some(pin) => format!("{}/providers/sim{pin}", registry.authority),
            None => registry.image("providers/sim", "v1"),
        });
        let started = Instant::now();
        let session = Puller::default()
            .session(&image, &Auth::Anonymous)
            .expect("a session");
        let error = match image.digest() {
            Some(digest) => session.resolve(digest).await.map(|_| ()),
            None => session.digest().await.map(|_| ()),
        }
        .expect_err("the pull fails");
        let took = started.elapsed();
        let sent = registry
            .sent_once_hung_up(HANG_UP)
            .await
            .expect("the client hung up");
        eprintln!("{misbehaviour:?} {what}: {error} after {took:?}, {sent} bytes sent");
        assert!(
            matches!(&error, Error::AnswerTooLarge { limit, what: w, .. }
                if *limit == CAP && w.starts_with(what)),
            "{misbehaviour:?}: {error}"
        );
        assert!(
            error.to_string().contains("sent more than 4194304 bytes"),
            "{error}"
        );
        assert!(
            sent < CAP + IN_FLIGHT,
            "{misbehaviour:?}: {sent} bytes sent"
        );
        assert!(took < HANG_UP, "{misbehaviour:?}: {took:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_sending_a_byte_every_9_seconds_ends_at_the_pull_deadline() {
    let deadline = Duration::from_secs(3);
    let slow = HostileRegistry::start(Misbehaviour::TricklingManifest(Duration::from_secs(9)))
        .await
        .expect("a hostile registry");
    // Bytes come faster than the read timeout: only the deadline ends it.
    let steady =
        HostileRegistry::start(Misbehaviour::TricklingManifest(Duration::from_millis(200)))
            .await
            .expect("a hostile registry");
    let blob = HostileRegistry::start(Misbehaviour::TricklingBlob(Duration::from_millis(200)))
        .await
        .expect("a hostile registry");
    let pull = |registry: &HostileRegistry, puller: Puller| {
        let image = reference(&registry.image("providers/sim", "v1"));
        async move {
            let started = Instant::now();
            let session = puller.session(&image, &Auth::Anonymous).expect("a session");
            let pulled = async {
                let digest = session.digest().await?;
                session.pull(session.resolve(&digest).await?).await
            }
            .await;
            (pulled.map(|_| ()), started.elapsed())
        }
    };
    let (slow_pull, steady_pull, blob_pull) = futures::join!(
        pull(
            &slow,
            Puller {
                deadline,
                ..Puller::default()
            }
        ),
        pull(
            &steady,
            Puller {
                timeout: Duration::from_secs(1),
                deadline,
                ..Puller::default()
            }
        ),
        pull(
            &blob,
            Puller {
                timeout: Duration::from_secs(1),
                deadline,
                ..Puller::default()
            }
        ),
    );
    for (name, registry, (pulled, took), what) in [
        ("a byte every 9 s", &slow, slow_pull, "the tag"),
        ("a byte every 200 ms", &steady, steady_pull, "the tag"),
        ("a layer, a byte every 200 ms", &blob, blob_pull, "the blob"),
    ] {
        let error = pulled.expect_err("the pull fails");
        let sent = registry
            .sent_once_hung_up(HANG_UP)
            .await
            .expect("the client hung up");
        eprintln!("{name}: {error} after {took:?}, {sent} bytes sent");
        assert!(
            matches!(&error, Error::Deadline { limit, what: w, .. }
                if *limit == deadline && w.starts_with(what)),
            "{name}: {error}"
        );
        assert!(
            error.to_string().contains("did not end within 3s"),
            "{error}"
        );
        assert!(
            took >= deadline && took < deadline + Duration::from_secs(2),
            "{name}: {took:?}"
        );
        if name != "a byte every 9 s" {
            assert!(sent > 5, "{name}: the bytes kept coming ({sent})");
        }
    }
}

/// Pushes guest `file` to `image`.
async fn push(file: &str, image: &str) -> Pushed {
    let bytes = std::fs::read(guest_path(file)).expect("the guest is built (make guests)");
    push_component(&reference(image), &Auth::Anonymous, bytes)
        .await
        .expect("pushed")
}

/// `signed` pushed again to repository `copy` (the same digest), with
/// the signature cosign stored beside `signed` copied beside it.
async fn copy_with_signature(registry: &Registry, signed: &Pushed, copy: &str) -> Pushed {
    let copied = push("sim_infrastructure.wasm", &registry.image(copy, "v1")).await;
    assert_eq!(copied.manifest_digest, signed.manifest_digest);
    let tag = signed.manifest_digest.replacen(':', "-", 1) + ".sig";
    let repository = signed.image.split('@').next().unwrap_or_default();
    registry
        .crane(&[
            "copy",
            &format!("{repository}:{tag}"),
            &registry.image(copy, &tag),
        ])
        .expect("the signature copied");
    copied
}

/// A registry holding the sim provider in `providers/sim`, signed there
/// with a new key, and in `providers/copy` with that signature copied.
async fn signed_and_copied() -> (Registry, KeyPair, Pushed, Pushed) {
    let registry = Registry::start()
        .await
        .expect("a registry (tests/registry/build.sh)");
    let key = registry.key_pair("release").expect("a cosign key pair");
    let signed = push(
        "sim_infrastructure.wasm",
        &registry.image("providers/sim", "v1"),
    )
    .await;
    // The `.sig` layout names the repository it signs in; a bundle does not.
    registry
        .sign_legacy(&signed.image, &key)
        .expect("cosign v2 signs");
    let copied = copy_with_signature(&registry, &signed, "providers/copy").await;
    (registry, key, signed, copied)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signature_copied_to_another_repository_is_refused_there() {
    let (registry, key, signed, copied) = signed_and_copied().await;
    let policy = Policy::new(
        Vec::new(),
        vec![Signer::Key(
            PublicKey::from_pem("release", &key.public_pem).expect("cosign's public key"),
        )],
        1,
        None,
    );
    let puller = Puller::default();
    let verify = |pushed: &Pushed| {
        let image = reference(&pushed.image);
        let digest = pushed.manifest_digest.clone();
        let puller = &puller;
        let policy = &policy;
        async move {
            let session = puller.session(&image, &Auth::Anonymous).expect("a session");
            verify_signature(&session, &digest, policy).await
        }
    };
    let admitted = verify(&signed).await.expect("admitted where it was signed");
    assert_eq!(admitted[0].key, "release");
    let error = verify(&copied)
        .await
        .expect_err("refused where it was copied");
    // What cosign v2 names: the repository, without tag or digest.
    let origin = format!("{}/providers/sim", registry.authority);
    assert!(
        matches!(&error, SignatureError::RepositoryMismatch { signed, .. } if *signed == origin),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains(&format!("is for the repository {origin}, not this one")),
        "{error}"
    );
}

fn ready(module: &ProviderModule) -> Option<(String, String, String)> {
    condition(&module.status.as_ref()?.conditions, "Ready")
}

fn source_available(module: &ProviderModule) -> Option<(String, String, String)> {
    condition(&module.status.as_ref()?.conditions, "SourceAvailable")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modules_from_misbehaving_registries_say_why_within_the_pull_deadline() {
    let install = Install::with_args(
        "oci-bounds",
        Core::Capwasm,
        &["--oci-pull-deadline-seconds=3".to_owned()],
    )
    .await;
    let trickling = HostileRegistry::start(Misbehaviour::TricklingManifest(Duration::from_secs(9)))
        .await
        .expect("a hostile registry");
    let endless = HostileRegistry::start(Misbehaviour::EndlessManifest)
        .await
        .expect("a hostile registry");
    let (origin, key, _, copied) = signed_and_copied().await;
    let cases = [
        (
            "trickling",
            trickling.image("providers/sim", "v1"),
            "PullTimedOut",
            "did not end within 3s".to_owned(),
        ),
        (
            "endless",
            endless.image("providers/sim", "v1"),
            "FetchFailed",
            "sent more than 4194304 bytes".to_owned(),
        ),
        (
            "copied",
            copied.image.clone(),
            "SignatureRepositoryMismatch",
            format!("is for the repository {}/providers/sim", origin.authority),
        ),
    ];
    let modules: Api<ProviderModule> = Api::all(install.client.clone());
    let started = Instant::now();
    for (suffix, image, _, _) in &cases {
        let module = ProviderModuleBuilder::file(
            &format!("{}-{suffix}", install.ns),
            World::Infrastructure,
            "/unused",
        )
        .oci(image)
        .verified_by(&[&key.public_pem])
        .build();
        modules
            .create(&PostParams::default(), &module)
            .await
            .expect("the module created");
    }
    for (suffix, _, reason, words) in cases {
        let name = format!("{}-{suffix}", install.ns);
        let module = wait_for(&modules, &name, reason, |m| {
            m.and_then(ready)
                .is_some_and(|(status, r, _)| status == "False" && r == reason)
        })
        .await
        .unwrap_or_else(|| panic!("module {name} is gone"));
        let (_, _, message) = ready(&module).unwrap_or_default();
        eprintln!(
            "{suffix}: {reason} after {:?}: {message}",
            started.elapsed()
        );
        assert!(message.contains(&words), "{suffix}: {message}");
        assert_eq!(
            module
                .status
                .as_ref()
                .and_then(|s| s.active_digest.as_deref()),
            None
        );
        if suffix == "trickling" {
            let (status, reason, _) = source_available(&module).unwrap_or_default();
            assert_eq!(
                (status.as_str(), reason.as_str()),
                ("False", "PullTimedOut")
            );
        }
    }
}
