//! Bundles cosign v3.1.3 made keyless against a Fulcio v1.8.8 and a
//! timestamp authority v2.1.3 of the tests' own (`tests/sigstore/`), with
//! that Sigstore's trust root: an email identity's signature, a GitHub
//! workflow identity's, and the workflow's SLSA provenance; and one signed
//! with a key and timestamped, whose key Fulcio certified 7 s later
//! (`early-timestamp-*.json`, with that run's own trust root).

use std::sync::Arc;

use super::*;

const DIGEST: &str = "sha256:0597e5ac3d56efefebea0cbbf9ad80c7e891ec63a20de9466a11845c7bc53b06";
const EMAIL_ISSUER: &str = "http://127.0.0.1:18056/email";
const CI_ISSUER: &str = "http://127.0.0.1:18056/github";
const WORKFLOW: &str =
    "https://github.com/acme/widget/.github/workflows/release.yml@refs/heads/main";

fn trust() -> Arc<Trust> {
    let json = include_str!("../testdata/trusted_root.json");
    Arc::new(Trust::from_json("test root", json).unwrap_or_else(|e| panic!("{e}")))
}

fn found(file: &str) -> Found {
    let json = match file {
        "email" => include_str!("../testdata/keyless-bundle.json"),
        "ci" => include_str!("../testdata/ci-keyless-bundle.json"),
        _ => include_str!("../testdata/provenance-bundle.json"),
    };
    Found::Bundle(Bundle::parse(file.into(), json.as_bytes()).unwrap_or_else(|e| panic!("{e}")))
}

fn identity(issuer: &str, subject: Subject) -> Signer {
    Signer::Keyless(Identity::new(None, issuer, subject))
}

fn policy(signer: Signer, trust: Option<Arc<Trust>>) -> Policy {
    Policy::new(Vec::new(), vec![signer], 1, trust)
}

#[test]
fn the_right_identity_is_admitted_at_the_signed_time_of_an_expired_certificate() {
    // The certificates lived 10 minutes, long ago: the timestamp
    // authority's signed time is what they are checked at.
    let alice = identity(EMAIL_ISSUER, Subject::Exact("alice@example.com".into()));
    let signed = judge(
        &image(),
        DIGEST,
        &[found("email")],
        &policy(alice, Some(trust())),
    )
    .expect("alice signed");
    assert_eq!(
        names(&signed),
        [format!("{EMAIL_ISSUER} alice@example.com")]
    );
    let ci = identity(
        CI_ISSUER,
        Subject::Prefix("https://github.com/acme/".into()),
    );
    assert!(judge(&image(), DIGEST, &[found("ci")], &policy(ci, Some(trust()))).is_ok());
}

#[test]
fn another_subject_issuer_or_prefix_is_named_in_the_refusal() {
    let cases = [
        identity(EMAIL_ISSUER, Subject::Exact("bob@example.com".into())),
        identity(CI_ISSUER, Subject::Exact("alice@example.com".into())),
        identity(EMAIL_ISSUER, Subject::Prefix("alice@example.org".into())),
    ];
    for signer in cases {
        let error = judge(
            &image(),
            DIGEST,
            &[found("email")],
            &policy(signer, Some(trust())),
        )
        .expect_err("another identity");
        assert!(
            matches!(&error, SignatureError::IdentityMismatch { subject, issuer, .. }
                if subject == "alice@example.com" && issuer == EMAIL_ISSUER),
            "{error}"
        );
    }
    // A workflow of another repository, by prefix.
    let other = identity(
        CI_ISSUER,
        Subject::Prefix("https://github.com/evil/".into()),
    );
    let error = judge(
        &image(),
        DIGEST,
        &[found("ci")],
        &policy(other, Some(trust())),
    )
    .expect_err("another repository");
    assert!(error.to_string().contains(WORKFLOW), "{error}");
}

#[test]
fn another_root_another_digest_or_no_root_admits_nothing() {
    let alice = || identity(EMAIL_ISSUER, Subject::Exact("alice@example.com".into()));
    // A root whose Fulcio is another CA (its timestamp authority's).
    let mut root: serde_json::Value =
        serde_json::from_str(include_str!("../testdata/trusted_root.json"))
            .unwrap_or_else(|e| panic!("{e}"));
    let tsa_root = root
        .pointer("/timestampAuthorities/0/certChain/certificates")
        .and_then(serde_json::Value::as_array)
        .and_then(|chain| chain.last().cloned())
        .unwrap_or_else(|| panic!("the TSA's chain"));
    root["certificateAuthorities"][0]["certChain"]["certificates"] =
        serde_json::Value::Array(vec![tsa_root]);
    let other =
        Trust::from_json("another root", &root.to_string()).unwrap_or_else(|e| panic!("{e}"));
    let error = judge(
        &image(),
        DIGEST,
        &[found("email")],
        &policy(alice(), Some(Arc::new(other))),
    )
    .expect_err("another root");
    assert!(
        matches!(&error, SignatureError::Untrusted { why, .. } if why.contains("another root")),
        "{error}"
    );
    let error = judge(
        &image(),
        D1,
        &[found("email")],
        &policy(alice(), Some(trust())),
    )
    .expect_err("another digest");
    assert!(
        matches!(&error, SignatureError::Untrusted { why, .. } if why.contains("mismatch")),
        "{error}"
    );
    // Without a root, a keyless signature counts for nobody.
    assert!(matches!(
        judge(&image(), DIGEST, &[found("email")], &policy(alice(), None)),
        Err(SignatureError::Unsatisfied { .. })
    ));
    // Nor does it for a key.
    let (_, public) = key(7);
    assert!(matches!(
        judge(&image(), DIGEST, &[found("email")], &any_of(&[&public], 1)),
        Err(SignatureError::Unsatisfied { .. })
    ));
}

#[test]
fn a_signed_time_before_the_certificate_was_issued_is_refused() {
    // Signed with a key and timestamped, then certified by Fulcio for
    // that key 7 s later: everything verifies but the time.
    let trust = Trust::from_json(
        "early root",
        include_str!("../testdata/early-timestamp-root.json"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let bundle = Bundle::parse(
        "early".into(),
        include_bytes!("../testdata/early-timestamp-bundle.json"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let alice = identity(
        "http://127.0.0.1:42603/email",
        Subject::Exact("alice@example.com".into()),
    );
    let error = judge(
        &image(),
        "sha256:eafab7bdd487d706bedfa28a901337d0771ef5e724f74c2ccb316b70e807336d",
        &[Found::Bundle(bundle)],
        &policy(alice, Some(Arc::new(trust))),
    )
    .expect_err("a time outside the certificate's validity");
    assert!(
        matches!(&error, SignatureError::Untrusted { why, .. }
            if why.contains("CertNotValidYet") && why.contains("not_before: UnixTime(1795969195)")),
        "{error}"
    );
}

/// The email bundle with `chain` (DER) as its `x509CertificateChain`
/// in place of its one certificate.
fn with_chain(chain: &[Vec<u8>]) -> Result<Bundle, String> {
    let mut json: serde_json::Value =
        serde_json::from_str(include_str!("../testdata/keyless-bundle.json"))
            .unwrap_or_else(|e| panic!("{e}"));
    // v0.3 carries one certificate; a chain is v0.2's.
    json["mediaType"] = "application/vnd.dev.sigstore.bundle+json;version=0.2".into();
    let material = json["verificationMaterial"]
        .as_object_mut()
        .unwrap_or_else(|| panic!("verification material"));
    material.remove("certificate");
    let certificates: Vec<serde_json::Value> = chain
        .iter()
        .map(|der| serde_json::json!({"rawBytes": b64(der)}))
        .collect();
    material.insert(
        "x509CertificateChain".into(),
        serde_json::json!({"certificates": certificates}),
    );
    Bundle::parse("chained".into(), json.to_string().as_bytes())
}

/// The email bundle's own signing certificate, DER.
fn leaf() -> Vec<u8> {
    let json: serde_json::Value =
        serde_json::from_str(include_str!("../testdata/keyless-bundle.json"))
            .unwrap_or_else(|e| panic!("{e}"));
    json.pointer("/verificationMaterial/certificate/rawBytes")
        .and_then(serde_json::Value::as_str)
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .unwrap_or_else(|| panic!("the bundle's certificate"))
}

/// CA `name` with a key of its own, issued by `issuer` (itself when `None`).
fn ca(
    name: &str,
    issuer: Option<&rcgen::Issuer<'_, rcgen::KeyPair>>,
) -> (Vec<u8>, rcgen::Issuer<'static, rcgen::KeyPair>) {
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
    let cert = match issuer {
        Some(issuer) => params.signed_by(&key, issuer),
        None => params.self_signed(&key),
    }
    .unwrap_or_else(|e| panic!("{e}"));
    (cert.der().to_vec(), rcgen::Issuer::new(params, key))
}

#[test]
fn a_chain_that_loops_is_out_of_order_or_is_100_deep_is_malformed() {
    // 100 certificates, each issued by the next, the last a root.
    let (mut chain, mut issuer) = ca("ca-99", None);
    let mut deep = vec![std::mem::take(&mut chain)];
    for at in (0..99).rev() {
        let (der, next) = ca(&format!("ca-{at}"), Some(&issuer));
        deep.push(der);
        issuer = next;
    }
    deep.reverse();
    let error = with_chain(&deep).expect_err("100 deep");
    assert!(error.contains("carries 100 certificates"), "{error}");

    // A is issued by B, and B by A.
    let (_, a_self) = ca("a", None);
    let (b, b_issuer) = ca("b", Some(&a_self));
    let (a, _) = ca("a", Some(&b_issuer));
    let error = with_chain(&[a.clone(), b.clone()]).expect_err("a loop");
    assert!(
        error.contains("loops: its last certificate (CN=b) is issued by certificate 0"),
        "{error}"
    );
    let error = with_chain(&[a.clone(), b, a]).expect_err("a loop written out");
    assert!(
        error.contains("loops: certificate 2 (CN=a) comes back as certificate 0"),
        "{error}"
    );

    // The signing certificate first, then its issuer: another CA is not it.
    let (other, _) = ca("other", None);
    let error = with_chain(&[leaf(), other]).expect_err("out of order");
    assert!(
        error.contains(
            "certificate 0 (no subject) of the chain is not issued by the certificate after it"
        ),
        "{error}"
    );
    let error = with_chain(&[b"not DER".to_vec()]).expect_err("not a certificate");
    assert!(
        error.contains("certificate 0 of the chain is not a DER certificate"),
        "{error}"
    );

    // The signing certificate alone as a chain (bundles before v0.3) is read.
    let chained = with_chain(&[leaf()]).unwrap_or_else(|e| panic!("{e}"));
    let alice = identity(EMAIL_ISSUER, Subject::Exact("alice@example.com".into()));
    assert!(
        judge(
            &image(),
            DIGEST,
            &[Found::Bundle(chained)],
            &policy(alice, Some(trust()))
        )
        .is_ok()
    );
}

#[test]
fn provenance_names_its_builder_and_source_or_the_image_is_refused() {
    let workflow = identity(CI_ISSUER, Subject::Exact(WORKFLOW.into()));
    let alice = identity(EMAIL_ISSUER, Subject::Exact("alice@example.com".into()));
    let found = [found("email"), found("provenance")];
    // Alice attested the provenance the workflow's run would have.
    let with = |attester: &Signer, builder: &str, source: &str| {
        policy(alice.clone(), Some(trust())).with_provenance(Provenance::new(
            attester.clone(),
            builder.to_owned(),
            source.to_owned(),
        ))
    };
    let acme = "https://github.com/acme/widget";
    assert!(judge(&image(), DIGEST, &found, &with(&alice, WORKFLOW, acme)).is_ok());
    let error = judge(
        &image(),
        DIGEST,
        &found,
        &with(&alice, WORKFLOW, "https://github.com/evil/widget"),
    )
    .expect_err("another repository");
    assert!(
        matches!(&error, SignatureError::Provenance { why, .. } if why.contains(acme)),
        "{error}"
    );
    let error = judge(
        &image(),
        DIGEST,
        &found,
        &with(&alice, "https://builder.example/other", acme),
    )
    .expect_err("another builder");
    assert!(error.to_string().contains("names builder"), "{error}");
    // Attested by someone else than the rule's signer.
    let error = judge(&image(), DIGEST, &found, &with(&workflow, WORKFLOW, acme))
        .expect_err("another attester");
    assert!(
        matches!(&error, SignatureError::Provenance { why, .. } if why.contains("alice@example.com")),
        "{error}"
    );
    // The signature alone, no attestation.
    let error = judge(&image(), DIGEST, &found[..1], &with(&alice, WORKFLOW, acme))
        .expect_err("no provenance");
    assert!(
        error.to_string().contains("no SLSA provenance attestation"),
        "{error}"
    );
}
