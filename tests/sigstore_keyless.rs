//! Keyless signatures, made by cosign against a private Sigstore on
//! loopback (`testenv::sigstore`: an OIDC issuer, Fulcio, a timestamp
//! authority, and for one test a Rekor v2 transparency log), checked by
//! capwasm's own verifier: the signature admits the identity that signed,
//! and no other subject, no other issuer, and nothing under a trust root
//! that is not the Sigstore's; under a trust root that lists a log, only
//! with that log's entry for it, as the log signed it.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use capwasm::oci::{
    Auth, BUNDLE_ARTIFACT_TYPE, Identity, ImageRef, Policy, Puller, Pushed, SignatureError, Signed,
    Signer, Subject, Trust, push_component, verify_signature,
};
use capwasm::testing::guest_path;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use testenv::registry::Registry;
use testenv::sigstore::Sigstore;

/// The identity that signs.
const ALICE: &str = "alice@example.com";
/// One that does not.
const MALLORY: &str = "mallory@example.com";

/// Pushes the sim-infrastructure guest to `image` on `registry`.
async fn push(registry: &Registry, image: &str) -> Pushed {
    let image = ImageRef::parse(image, true).expect("a loopback reference");
    let bytes = std::fs::read(guest_path("sim_infrastructure.wasm"))
        .expect("the guest is built (make guests)");
    let pushed = push_component(&image, &Auth::Anonymous, bytes)
        .await
        .expect("pushed");
    assert!(
        pushed.image.starts_with(&registry.authority),
        "{}",
        pushed.image
    );
    pushed
}

/// capwasm's verdict on `pushed` for a policy of the one keyless signer
/// `identity`, checked against `trust`.
async fn verdict(
    pushed: &Pushed,
    identity: Identity,
    trust: &Arc<Trust>,
) -> Result<Vec<Signed>, SignatureError> {
    let image = ImageRef::parse(&pushed.image, true).expect("a loopback reference");
    let policy = Policy::new(
        Vec::new(),
        vec![Signer::Keyless(identity)],
        1,
        Some(Arc::clone(trust)),
    );
    let puller = Puller::default();
    let session = puller.session(&image, &Auth::Anonymous).expect("a session");
    verify_signature(&session, &pushed.manifest_digest, &policy).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_signature_admits_its_identity_under_its_trust_root_only() {
    let registry = Registry::start()
        .await
        .expect("a registry (tests/registry/build.sh)");
    let sigstore = Sigstore::start()
        .await
        .expect("a private Sigstore (tests/sigstore/build.sh)");
    // Another: another Fulcio CA and timestamp authority, both valid from
    // before the signing.
    let other = Sigstore::start().await.expect("another private Sigstore");
    let pushed = push(&registry, &registry.image("providers/sim", "v1")).await;
    let issuer = sigstore.email_issuer();
    let token = sigstore.token(&issuer, ALICE).expect("an ID token");
    sigstore
        .sign(&registry, &pushed.image, &token)
        .expect("cosign signs keyless");

    // cosign itself admits it for Alice only.
    sigstore
        .verify(&registry, &pushed.image, ALICE, &issuer)
        .expect("cosign verifies Alice's signature");
    sigstore
        .verify(&registry, &pushed.image, MALLORY, &issuer)
        .expect_err("cosign refuses Mallory");

    let trust = Arc::new(
        Trust::from_json("test-sigstore", &sigstore.trusted_root_json())
            .expect("the Sigstore's trust root"),
    );
    let alice = |subject: Subject| Identity::new(Some("alice".into()), issuer.clone(), subject);

    let admitted = verdict(&pushed, alice(Subject::Exact(ALICE.into())), &trust)
        .await
        .expect("Alice's signature admits Alice");
    assert_eq!(admitted.len(), 1, "{admitted:?}");
    assert_eq!(admitted[0].key, "alice");
    assert_eq!(admitted[0].fingerprint, format!("keyless:{issuer} {ALICE}"));
    let admitted = verdict(&pushed, alice(Subject::Prefix("alice@".into())), &trust)
        .await
        .expect("Alice's signature admits a prefix of her address");
    assert_eq!(admitted[0].key, "alice");

    let error = verdict(
        &pushed,
        Identity::new(None, issuer.clone(), Subject::Exact(MALLORY.into())),
        &trust,
    )
    .await
    .expect_err("another subject is refused");
    eprintln!("another subject: {error}");
    assert!(
        matches!(&error, SignatureError::IdentityMismatch { subject, issuer: i, .. }
            if subject == ALICE && *i == issuer),
        "{error}"
    );

    let error = verdict(
        &pushed,
        Identity::new(None, sigstore.github_issuer(), Subject::Exact(ALICE.into())),
        &trust,
    )
    .await
    .expect_err("another issuer is refused");
    eprintln!("another issuer: {error}");
    assert!(
        matches!(&error, SignatureError::IdentityMismatch { subject, issuer: i, .. }
            if subject == ALICE && *i == issuer),
        "{error}"
    );

    // The other Sigstore's root refuses the signature (at the timestamp,
    // checked first), and so does this root with its Fulcio CA swapped for
    // the other's: the timestamp is trusted, the certificate's chain not.
    let mut swapped: serde_json::Value =
        serde_json::from_str(&sigstore.trusted_root_json()).expect("a JSON trust root");
    let theirs: serde_json::Value =
        serde_json::from_str(&other.trusted_root_json()).expect("a JSON trust root");
    swapped["certificateAuthorities"] = theirs["certificateAuthorities"].clone();
    for (name, root) in [
        ("another trust root", other.trusted_root_json()),
        ("another Fulcio", swapped.to_string()),
    ] {
        let untrusted = Arc::new(Trust::from_json(name, &root).expect("a trust root cosign wrote"));
        let error = verdict(&pushed, alice(Subject::Exact(ALICE.into())), &untrusted)
            .await
            .expect_err("a signature certified under another trust root is refused");
        eprintln!("{name}: {error}");
        assert!(
            matches!(&error, SignatureError::Untrusted { signer, .. } if signer == "alice"),
            "{name}: {error}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signature_logged_in_rekor_is_checked_against_the_log() {
    let registry = Registry::start()
        .await
        .expect("a registry (tests/registry/build.sh)");
    let sigstore = Sigstore::start_with_log()
        .await
        .expect("a private Sigstore with a Rekor v2 log (tests/sigstore/build.sh)");
    // Another, with a log of its own (another key).
    let other = Sigstore::start_with_log()
        .await
        .expect("another private Sigstore with a log");
    let pushed = push(&registry, &registry.image("providers/sim", "v1")).await;
    let issuer = sigstore.email_issuer();
    let token = sigstore.token(&issuer, ALICE).expect("an ID token");
    sigstore
        .sign(&registry, &pushed.image, &token)
        .expect("cosign signs keyless, logging the signature in Rekor v2");
    sigstore
        .verify(&registry, &pushed.image, ALICE, &issuer)
        .expect("cosign verifies Alice's signature and its log entry");

    let (bundle, referrer) = bundle_of(&registry, &pushed);
    assert_logged_in_rekor_v2(&bundle);

    let root: Value =
        serde_json::from_str(&sigstore.trusted_root_json()).expect("a JSON trust root");
    assert_eq!(root["tlogs"].as_array().map(Vec::len), Some(1), "{root}");
    let trust = Arc::new(
        Trust::from_json("test-sigstore-with-log", &sigstore.trusted_root_json())
            .expect("the Sigstore's trust root"),
    );
    let alice = || {
        Identity::new(
            Some("alice".into()),
            issuer.clone(),
            Subject::Exact(ALICE.into()),
        )
    };
    let admitted = verdict(&pushed, alice(), &trust)
        .await
        .expect("Alice's logged signature admits Alice");
    assert_eq!(admitted.len(), 1, "{admitted:?}");
    assert_eq!(admitted[0].fingerprint, format!("keyless:{issuer} {ALICE}"));

    // This root with the other log's key in place of this log's: the
    // checkpoint's signature names a key the root does not list.
    let theirs: Value =
        serde_json::from_str(&other.trusted_root_json()).expect("a JSON trust root");
    let mut swapped = root.clone();
    swapped["tlogs"] = theirs["tlogs"].clone();
    let untrusted = Arc::new(
        Trust::from_json("another log", &swapped.to_string()).expect("a trust root with a log"),
    );
    let error = verdict(&pushed, alice(), &untrusted)
        .await
        .expect_err("an entry checked against another log's key is refused");
    eprintln!("another log: {error}");
    assert!(
        matches!(&error, SignatureError::Untrusted { signer, why, .. }
            if signer == "alice" && why.contains("No matching Rekor key found for checkpoint")),
        "{error}"
    );

    // The bundle with its log entry tampered with, each pushed as the only
    // referrer of the same image in a repository of its own; pushed so
    // untampered, it is admitted.
    let copy = push_referrer(&registry, &pushed, "providers/copy", &referrer, &bundle);
    verdict(&copy, alice(), &trust)
        .await
        .expect("the bundle, copied as it is, admits Alice");
    let tamperings: [Tampering; 2] = [
        (
            "checkpoint",
            forge_checkpoint,
            "No valid Rekor signature found on checkpoint",
        ),
        ("stripped", strip_entries, "must have an inclusion proof"),
    ];
    for (name, tamper, refusal) in tamperings {
        let mut tampered = bundle.clone();
        tamper(&mut tampered);
        let copy = push_referrer(
            &registry,
            &pushed,
            &format!("providers/tampered-{name}"),
            &referrer,
            &tampered,
        );
        let error = verdict(&copy, alice(), &trust)
            .await
            .expect_err("a tampered log entry is refused");
        eprintln!("{name}: {error}");
        assert!(
            matches!(&error, SignatureError::Untrusted { signer, why, .. }
                if signer == "alice" && why.contains(refusal)),
            "{name}: {error}"
        );
    }
}

/// A way to tamper with a bundle: its name, what it does, and what the
/// refusal of the tampered bundle says.
type Tampering = (&'static str, fn(&mut Value), &'static str);

/// That `bundle` holds one Rekor v2 entry (hashedrekord 0.0.2) with its
/// inclusion proof and the log's signed checkpoint, but no integrated time,
/// and a timestamp authority's timestamp, which gives the signing time.
fn assert_logged_in_rekor_v2(bundle: &Value) {
    let material = &bundle["verificationMaterial"];
    let entries = material["tlogEntries"].as_array().expect("tlog entries");
    assert_eq!(entries.len(), 1, "{material}");
    let entry = &entries[0];
    assert_eq!(
        entry["kindVersion"],
        json!({"kind": "hashedrekord", "version": "0.0.2"}),
        "{entry}"
    );
    assert!(
        entry["inclusionProof"]["checkpoint"]["envelope"].is_string(),
        "{entry}"
    );
    assert!(
        matches!(&entry["integratedTime"], Value::Null) || entry["integratedTime"] == json!("0"),
        "{entry}"
    );
    assert_eq!(
        material["timestampVerificationData"]["rfc3161Timestamps"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "{material}"
    );
}

/// `bundle` with the last byte of its log entry's checkpoint signature
/// changed. The checkpoint's envelope is a signed note: the checkpoint,
/// then `— <origin> <base64 of a 4-byte key hint and the signature>`.
fn forge_checkpoint(bundle: &mut Value) {
    let envelope = &mut bundle["verificationMaterial"]["tlogEntries"][0]["inclusionProof"]["checkpoint"]
        ["envelope"];
    let (body, signature) = envelope
        .as_str()
        .expect("an envelope")
        .trim_end()
        .rsplit_once(' ')
        .expect("a signature line");
    let mut bytes = STANDARD.decode(signature).expect("a base64 signature");
    *bytes.last_mut().expect("a signature") ^= 1;
    *envelope = Value::String(format!("{body} {}\n", STANDARD.encode(bytes)));
}

/// `bundle` without its log entries (its timestamp left).
fn strip_entries(bundle: &mut Value) {
    bundle["verificationMaterial"]["tlogEntries"] = json!([]);
}

/// The one Sigstore bundle referring to `pushed` (through the referrers
/// tag cosign keeps), and the referrer manifest holding it.
fn bundle_of(registry: &Registry, pushed: &Pushed) -> (Value, Value) {
    let (repository, _) = pushed.image.split_once('@').expect("an image by digest");
    let tag = pushed.manifest_digest.replacen(':', "-", 1);
    let index: Value = serde_json::from_str(
        &registry
            .crane(&["manifest", &format!("{repository}:{tag}")])
            .expect("the referrers tag"),
    )
    .expect("a JSON index");
    let referrers: Vec<&Value> = index["manifests"]
        .as_array()
        .expect("manifests")
        .iter()
        .filter(|m| m["artifactType"] == BUNDLE_ARTIFACT_TYPE)
        .collect();
    assert_eq!(referrers.len(), 1, "{index}");
    let digest = referrers[0]["digest"].as_str().expect("a digest");
    let manifest: Value = serde_json::from_str(
        &registry
            .crane(&["manifest", &format!("{repository}@{digest}")])
            .expect("the referrer"),
    )
    .expect("a JSON manifest");
    let layer = manifest["layers"][0]["digest"].as_str().expect("a layer");
    let bundle = registry
        .crane(&["blob", &format!("{repository}@{layer}")])
        .expect("the bundle");
    (
        serde_json::from_str(&bundle).expect("a JSON bundle"),
        manifest,
    )
}

/// `pushed` copied to `repository` of `registry`, its only referrer a
/// copy of `referrer` (a manifest from [`bundle_of`]) whose layer is
/// `bundle`: pushed as an OCI layout whose index is the referrers tag.
fn push_referrer(
    registry: &Registry,
    pushed: &Pushed,
    repository: &str,
    referrer: &Value,
    bundle: &Value,
) -> Pushed {
    let (source, _) = pushed.image.split_once('@').expect("an image by digest");
    let target = format!("{}/{repository}", registry.authority);
    registry
        .crane(&["copy", &pushed.image, &format!("{target}:v1")])
        .expect("the image copied");

    let layout = tempfile::tempdir().expect("a directory");
    let blobs = layout.path().join("blobs/sha256");
    std::fs::create_dir_all(&blobs).expect("blobs/sha256");
    let write = |bytes: &[u8]| {
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(bytes)));
        std::fs::write(blobs.join(&digest["sha256:".len()..]), bytes).expect("a blob");
        (digest, bytes.len())
    };
    let config = referrer["config"]["digest"].as_str().expect("a config");
    let config = registry
        .crane(&["blob", &format!("{source}@{config}")])
        .expect("the referrer's config");
    write(config.as_bytes());
    let (digest, size) = write(bundle.to_string().as_bytes());
    let mut manifest = referrer.clone();
    manifest["layers"][0]["digest"] = json!(digest);
    manifest["layers"][0]["size"] = json!(size);
    let (digest, size) = write(manifest.to_string().as_bytes());
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": manifest["mediaType"],
            "digest": digest,
            "size": size,
            "artifactType": BUNDLE_ARTIFACT_TYPE,
        }],
    });
    std::fs::write(layout.path().join("index.json"), index.to_string()).expect("index.json");
    std::fs::write(
        layout.path().join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .expect("oci-layout");
    let layout = layout.path().display().to_string();
    let tag = pushed.manifest_digest.replacen(':', "-", 1);
    registry
        .crane(&["push", "--index", &layout, &format!("{target}:{tag}")])
        .expect("the tampered referrer pushed");
    Pushed {
        image: format!("{target}@{}", pushed.manifest_digest),
        manifest_digest: pushed.manifest_digest.clone(),
        component_digest: pushed.component_digest.clone(),
    }
}
