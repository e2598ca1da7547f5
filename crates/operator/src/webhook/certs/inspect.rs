//! Reading what the Secret's certificates say: their periods, who signed
//! the serving certificate, the names it holds. What cannot be read counts
//! against the certificate (it is renewed), never as an error.

use std::net::IpAddr;

use rcgen::{KeyPair, PublicKeyData as _};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer as _;

use super::issue::CA_NAME;
use super::renewal::{Facts, Period};

/// The certificates of a PEM text, as DER, the unreadable ones left out.
pub fn ders(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .collect()
}

/// The PEM text of each certificate of `pem`.
pub fn pems(pem: &str) -> Vec<String> {
    ders(pem).iter().map(|der| to_pem(der)).collect()
}

fn to_pem(der: &[u8]) -> String {
    use base64::Engine as _;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

fn parse(der: &[u8]) -> Option<X509Certificate<'_>> {
    X509Certificate::from_der(der).ok().map(|(_, cert)| cert)
}

fn period(cert: &X509Certificate<'_>) -> Period {
    Period {
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
    }
}

/// When the first certificate of `pem` is valid, if it can be read.
pub fn period_of(pem: &str) -> Option<Period> {
    ders(pem)
        .first()
        .and_then(|der| parse(der).map(|c| period(&c)))
}

/// The serial number of the first certificate of `pem` (hex), for logs.
pub fn serial_of(pem: &str) -> Option<String> {
    ders(pem)
        .first()
        .and_then(|der| parse(der).map(|c| c.raw_serial_as_string()))
}

/// The serial number (hex) and expiry (seconds since the epoch) of the DER
/// certificate `der`, as a TLS client sees the one served.
pub fn serial_and_expiry(der: &[u8]) -> Option<(String, i64)> {
    parse(der).map(|c| (c.raw_serial_as_string(), period(&c).not_after))
}

/// What a Secret holding `cert_pem` (the serving certificate), `ca_pem`
/// (the bundle, its signer first) and `ca_key_pem` says about renewal,
/// for a webhook reached at `names`.
pub fn facts(cert_pem: &str, ca_pem: &str, ca_key_pem: Option<&str>, names: &[String]) -> Facts {
    let cas = ders(ca_pem);
    let ca = cas.first().and_then(|der| parse(der));
    let ours = ca.as_ref().is_some_and(|ca| {
        ca.subject()
            .iter_common_name()
            .any(|cn| cn.as_str() == Ok(CA_NAME))
    });
    let signer = ca.as_ref().filter(|ca| {
        ca_key_pem
            .and_then(|key| KeyPair::from_pem(key).ok())
            .is_some_and(|key| key.subject_public_key_info() == ca.public_key().raw)
    });
    let leaves = ders(cert_pem);
    let leaf = leaves.first().and_then(|der| parse(der));
    let expired = Period {
        not_before: 0,
        not_after: 0,
    };
    Facts {
        ours,
        signer: signer.map(period),
        serving: leaf.as_ref().map_or(expired, period),
        signed_by_signer: match (&leaf, signer) {
            (Some(leaf), Some(ca)) => leaf.verify_signature(Some(ca.public_key())).is_ok(),
            _ => false,
        },
        names_match: leaf.as_ref().is_some_and(|leaf| holds_names(leaf, names)),
    }
}

/// The DNS names and addresses the first certificate of `pem` is for.
pub fn names_of(pem: &str) -> Vec<String> {
    let Some(der) = ders(pem).into_iter().next() else {
        return Vec::new();
    };
    let Some(Ok(Some(san))) = parse(&der).map(|c| {
        c.subject_alternative_name()
            .map(|san| san.map(|s| s.value.general_names.clone()))
    }) else {
        return Vec::new();
    };
    san.iter()
        .filter_map(|general| match general {
            GeneralName::DNSName(dns) => Some((*dns).to_owned()),
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => <[u8; 4]>::try_from(*bytes)
                    .ok()
                    .map(|b| IpAddr::from(b).to_string()),
                16 => <[u8; 16]>::try_from(*bytes)
                    .ok()
                    .map(|b| IpAddr::from(b).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Whether `leaf` names each of `names` (a DNS name, or an IP address).
fn holds_names(leaf: &X509Certificate<'_>, names: &[String]) -> bool {
    let Ok(Some(san)) = leaf.subject_alternative_name() else {
        return false;
    };
    let held = &san.value.general_names;
    names.iter().all(|name| {
        held.iter()
            .any(|general| match (general, name.parse::<IpAddr>()) {
                (GeneralName::DNSName(dns), Err(_)) => dns.eq_ignore_ascii_case(name),
                (GeneralName::IPAddress(bytes), Ok(IpAddr::V4(ip))) => *bytes == ip.octets(),
                (GeneralName::IPAddress(bytes), Ok(IpAddr::V6(ip))) => *bytes == ip.octets(),
                _ => false,
            })
    })
}
