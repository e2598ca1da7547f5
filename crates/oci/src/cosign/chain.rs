//! The shape of the certificate chain a bundle carries, checked before any
//! signature is: a Fulcio chain is the signing certificate, at most a few
//! intermediates and the root, each issued by the next. A longer chain, or
//! one where a certificate comes back, is refused by name here rather than
//! handed to path building.

use base64::Engine as _;
use x509_cert::Certificate;
use x509_cert::der::{Decode as _, Encode as _};

/// The most certificates a bundle's chain may carry: Fulcio's paths are
/// three (the signing certificate, an intermediate, the root).
pub(super) const MAX_CHAIN: usize = 8;

/// Why the `x509CertificateChain` of verification material `material` is
/// not a chain, if it is not.
pub(super) fn check(material: &serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
    let Some(chain) = material.get("x509CertificateChain") else {
        return Ok(());
    };
    let certificates = chain
        .get("certificates")
        .and_then(serde_json::Value::as_array)
        .ok_or("the certificate chain lists no certificates")?;
    if certificates.len() > MAX_CHAIN {
        return Err(format!(
            "the certificate chain carries {} certificates; a signing certificate's chain carries at most {MAX_CHAIN}",
            certificates.len()
        ));
    }
    // Each certificate's subject and issuer, DER.
    let mut names: Vec<(Vec<u8>, Vec<u8>, String)> = Vec::with_capacity(certificates.len());
    for (at, certificate) in certificates.iter().enumerate() {
        let parsed = certificate
            .get("rawBytes")
            .and_then(serde_json::Value::as_str)
            .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
            .and_then(|der| Certificate::from_der(&der).ok())
            .ok_or_else(|| format!("certificate {at} of the chain is not a DER certificate"))?;
        let tbs = parsed.tbs_certificate;
        let der = |name: &x509_cert::name::Name| name.to_der().map_err(|e| e.to_string());
        // Fulcio's signing certificates name nobody in their subject.
        let shown = match tbs.subject.to_string() {
            name if name.is_empty() => "no subject".to_owned(),
            name => name,
        };
        names.push((der(&tbs.subject)?, der(&tbs.issuer)?, shown));
    }
    for (at, (subject, issuer, name)) in names.iter().enumerate() {
        if let Some(first) = names[..at].iter().position(|(s, ..)| s == subject) {
            return Err(format!(
                "the certificate chain loops: certificate {at} ({name}) comes back as certificate {first}"
            ));
        }
        match names.get(at + 1) {
            Some((next, ..)) if next != issuer => {
                return Err(format!(
                    "certificate {at} ({name}) of the chain is not issued by the certificate after it"
                ));
            }
            Some(_) => {}
            // The last is a root (its own issuer) or issued by an anchor of
            // the trust root, never by a certificate before it.
            None => {
                if let Some(back) = names[..at].iter().position(|(s, ..)| s == issuer) {
                    return Err(format!(
                        "the certificate chain loops: its last certificate ({name}) is issued by certificate {back}"
                    ));
                }
            }
        }
    }
    Ok(())
}
