//! The verdicts on signatures in both layouts, made here with keys of the
//! tests' own; the tests under `tests/` check cosign's own signatures.

use base64::Engine as _;
use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::{Signature, SigningKey};
use p256::pkcs8::EncodePublicKey as _;

use super::bundle::Bundle;
use super::*;

const REPOSITORY: &str = "registry.example/providers/sim";
const D1: &str = "sha256:d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1";
const D2: &str = "sha256:d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn key(seed: u8) -> (SigningKey, PublicKey) {
    let signing = SigningKey::from_slice(&[seed; 32]).unwrap_or_else(|e| panic!("{e}"));
    let pem = signing
        .verifying_key()
        .to_public_key_pem(p256::pkcs8::LineEnding::LF)
        .unwrap_or_else(|e| panic!("{e}"));
    let public = PublicKey::from_pem(format!("key{seed}"), &pem).unwrap_or_else(|e| panic!("{e}"));
    (signing, public)
}

fn image() -> ImageRef {
    ImageRef::parse(&format!("{REPOSITORY}:v1"), false).unwrap_or_else(|e| panic!("{e}"))
}

/// What cosign before v3 signs for `digest` in `repository`.
fn legacy_in(key: &SigningKey, repository: &str, digest: &str) -> Found {
    let payload = format!(
        r#"{{"critical":{{"identity":{{"docker-reference":"{repository}"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
    )
    .into_bytes();
    let signature: Signature = key.sign(&payload);
    Found::Legacy {
        signature: b64(signature.to_der().as_bytes()),
        payload,
    }
}

fn legacy(key: &SigningKey, digest: &str) -> Found {
    legacy_in(key, REPOSITORY, digest)
}

/// A bundle as cosign v3 signs `digest`, of `predicate_type`.
fn bundle_of(key: &SigningKey, digest: &str, predicate_type: &str) -> Found {
    let hex = digest.trim_start_matches("sha256:");
    let statement = format!(
        r#"{{"_type":"https://in-toto.io/Statement/v1","subject":[{{"digest":{{"sha256":"{hex}"}}}}],"predicateType":"{predicate_type}","predicate":{{}}}}"#
    );
    let payload_type = "application/vnd.in-toto+json";
    let pae = format!(
        "DSSEv1 {} {payload_type} {} {statement}",
        payload_type.len(),
        statement.len()
    );
    let signature: Signature = key.sign(pae.as_bytes());
    let json = format!(
        r#"{{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{{"publicKey":{{"hint":"x"}}}},"dsseEnvelope":{{"payload":"{}","payloadType":"{payload_type}","signatures":[{{"sig":"{}"}}]}}}}"#,
        b64(statement.as_bytes()),
        b64(signature.to_der().as_bytes())
    );
    Found::Bundle(
        Bundle::parse("a test bundle".into(), json.as_bytes()).unwrap_or_else(|e| panic!("{e}")),
    )
}

fn bundle(key: &SigningKey, digest: &str) -> Found {
    bundle_of(key, digest, "https://sigstore.dev/cosign/sign/v1")
}

fn signers(keys: &[&PublicKey]) -> Vec<Signer> {
    keys.iter().map(|k| Signer::Key((*k).clone())).collect()
}

fn any_of(keys: &[&PublicKey], minimum: usize) -> Policy {
    Policy::new(Vec::new(), signers(keys), minimum, None)
}

fn names(signed: &[Signed]) -> Vec<&str> {
    signed.iter().map(|s| s.key.as_str()).collect()
}

#[test]
fn a_signature_by_one_of_the_keys_for_this_digest_admits_in_either_layout() {
    let (signing, public) = key(7);
    let (_, other) = key(9);
    let policy = any_of(&[&other, &public], 1);
    for found in [legacy(&signing, D1), bundle(&signing, D1)] {
        let signed = judge(&image(), D1, &[found], &policy).expect("signed by the second key");
        assert_eq!(names(&signed), ["key7"]);
        assert_eq!(signed[0].fingerprint, public.fingerprint());
    }
    // cosign may name the repository with a tag or a digest.
    let tagged = legacy_in(&signing, &format!("{REPOSITORY}:v1"), D1);
    assert!(judge(&image(), D1, &[tagged], &policy).is_ok());
}

#[test]
fn two_of_three_wants_two_signers_and_all_of_wants_each() {
    let (a, ka) = key(1);
    let (b, kb) = key(2);
    let (_, kc) = key(3);
    let two_of_three = any_of(&[&ka, &kb, &kc], 2);
    let one = [bundle(&a, D1)];
    let error = judge(&image(), D1, &one, &two_of_three).expect_err("one signer of two");
    assert!(
        matches!(&error, SignatureError::Unsatisfied { signed, signatures: 1, .. } if signed == "key1"),
        "{error}"
    );
    assert!(
        error.to_string().contains("2 of [key1, key2, key3]"),
        "{error}"
    );
    // Two signers, in two layouts.
    let two = [bundle(&a, D1), legacy(&b, D1)];
    let signed = judge(&image(), D1, &two, &two_of_three).expect("two of three");
    assert_eq!(names(&signed), ["key1", "key2"]);
    // A key signing twice is one signer.
    let twice = [bundle(&a, D1), legacy(&a, D1)];
    assert!(judge(&image(), D1, &twice, &two_of_three).is_err());
    // all of [key3] and one of [key1, key2]: key3 has not signed.
    let both = Policy::new(signers(&[&kc]), signers(&[&ka, &kb]), 1, None);
    let error = judge(&image(), D1, &two, &both).expect_err("key3 missing");
    assert!(
        error
            .to_string()
            .contains("all of [key3] and 1 of [key1, key2]"),
        "{error}"
    );
    let (c, _) = key(3);
    let three = [bundle(&a, D1), bundle(&c, D1)];
    assert_eq!(
        names(&judge(&image(), D1, &three, &both).expect("key3 and key1")),
        ["key3", "key1"]
    );
}

#[test]
fn a_wrong_key_another_digest_or_an_attestation_is_named_or_ignored() {
    let (signing, _) = key(7);
    let (_, other) = key(9);
    let error = judge(&image(), D1, &[bundle(&signing, D1)], &any_of(&[&other], 1))
        .expect_err("another key");
    assert!(
        matches!(&error, SignatureError::Unsatisfied { signed, .. } if signed == "none of them"),
        "{error}"
    );
    let (signing, public) = key(7);
    for found in [legacy(&signing, D2), bundle(&signing, D2)] {
        let error = judge(&image(), D1, &[found], &any_of(&[&public], 1)).expect_err("signs D2");
        assert!(
            error.to_string().contains(&format!("is for {D2}")),
            "{error}"
        );
    }
    // A provenance attestation by the key is no signature of it.
    let attestation = bundle_of(&signing, D1, "https://slsa.dev/provenance/v1");
    assert!(matches!(
        judge(&image(), D1, &[attestation], &any_of(&[&public], 1)),
        Err(SignatureError::Unsatisfied { .. })
    ));
    let garbage = Found::Legacy {
        signature: "bm90IGEgc2lnbmF0dXJl".to_owned(),
        payload: b"{}".to_vec(),
    };
    assert!(matches!(
        judge(&image(), D1, &[garbage], &any_of(&[&public], 1)),
        Err(SignatureError::Unsatisfied { .. })
    ));
    assert!(matches!(
        judge(&image(), D1, &[], &any_of(&[&public], 1)),
        Err(SignatureError::NotSigned { .. })
    ));
}

#[test]
fn a_legacy_signature_of_this_digest_in_another_repository_is_refused() {
    let (signing, public) = key(7);
    let policy = any_of(&[&public], 1);
    let elsewhere = || legacy_in(&signing, "registry.example/providers/other", D1);
    let error = judge(&image(), D1, &[elsewhere()], &policy).expect_err("another repository");
    assert!(
        matches!(&error, SignatureError::RepositoryMismatch { signed, .. } if signed == "registry.example/providers/other"),
        "{error}"
    );
    // Beside a signature made for this repository, it does no harm.
    assert!(judge(&image(), D1, &[elsewhere(), legacy(&signing, D1)], &policy).is_ok());
}

#[test]
fn what_is_not_a_bundle_is_named_and_alone_is_malformed() {
    let bad = |json: &str| Bundle::parse("the referrer sha256:ab".into(), json.as_bytes());
    let cases = [
        ("{", "not a Sigstore bundle"),
        (
            r#"{"mediaType":"text/plain"}"#,
            "is not a Sigstore bundle's",
        ),
        (
            r#"{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","messageSignature":{}}"#,
            "a message signature",
        ),
        (
            r#"{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","dsseEnvelope":{"payload":"!!","payloadType":"x","signatures":[{"sig":"x"}]}}"#,
            "not base64",
        ),
        (
            r#"{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","dsseEnvelope":{"payload":"e30=","payloadType":"x","signatures":[]}}"#,
            "no signature",
        ),
    ];
    for (json, why) in cases {
        let error = bad(json).expect_err(json);
        assert!(
            error.starts_with("the referrer sha256:ab: ") && error.contains(why),
            "{error}"
        );
    }
    let (_, public) = key(7);
    let error = judge(
        &image(),
        D1,
        &[Found::Unreadable(
            "the referrer sha256:ab: not a Sigstore bundle".into(),
        )],
        &any_of(&[&public], 1),
    )
    .expect_err("nothing readable");
    assert!(
        matches!(&error, SignatureError::Malformed { why, .. } if why.contains("not a Sigstore bundle")),
        "{error}"
    );
}

mod keyless;
