//! Keyless signatures, made by cosign against a private Sigstore on
//! loopback (`testenv::sigstore`: an OIDC issuer, Fulcio, a timestamp
//! authority), checked by capwasm's own verifier: the signature admits the
//! identity that signed, and no other subject, no other issuer, and nothing
//! under a trust root that is not the Sigstore's.

use std::sync::Arc;

use capwasm::oci::{
    Auth, Identity, ImageRef, Policy, Puller, Pushed, SignatureError, Signed, Signer, Subject,
    Trust, push_component, verify_signature,
};
use capwasm::testing::guest_path;
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
