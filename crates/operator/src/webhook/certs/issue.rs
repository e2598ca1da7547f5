//! Making the certificates: a CA, and a serving certificate a CA signs.
//! Times are whole seconds since the Unix epoch, as X.509 keeps them.

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The common name of every CA capwasm makes: a Secret whose CA has it is
/// capwasm's to renew (an older version's too, which kept no `ca.key`).
pub const CA_NAME: &str = "capwasm-webhook-ca";

/// The common name of the serving certificates.
const SERVING_NAME: &str = "capwasm-webhook";

/// The most a certificate's start is set back, for clocks behind ours
/// (cert-controller sets back an hour).
const BACKDATE: Duration = Duration::from_secs(3600);

/// A certificate and its private key, as PEM.
#[derive(Clone)]
pub struct Pair {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair").finish_non_exhaustive()
    }
}

/// When a certificate made at `now` for `validity` starts and ends: set
/// back by a tenth of its validity (at most [`BACKDATE`]), so that a
/// client whose clock is a little behind accepts it.
pub fn period(now: i64, validity: Duration) -> (i64, i64) {
    let back = (validity / 10).min(BACKDATE).as_secs();
    let seconds = i64::try_from(validity.as_secs()).unwrap_or(i64::MAX);
    (
        now.saturating_sub(i64::try_from(back).unwrap_or(0)),
        now.saturating_add(seconds),
    )
}

/// A new self-signed CA, valid `from` to `until`.
pub fn ca(from: i64, until: i64) -> Result<Pair, rcgen::Error> {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, CA_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    set_period(&mut params, from, until);
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(Pair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A new serving certificate for `names`, valid `from` to `until`, signed
/// by `ca`.
pub fn serving(names: &[String], ca: &Pair, from: i64, until: i64) -> Result<Pair, rcgen::Error> {
    let ca_key = KeyPair::from_pem(&ca.key_pem)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key)?;
    let mut params = CertificateParams::new(names.to_vec())?;
    params
        .distinguished_name
        .push(DnType::CommonName, SERVING_NAME);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    set_period(&mut params, from, until);
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Pair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Sets `params` valid `from` to `until` (seconds since the epoch; a
/// negative one, which no clock gives, is the epoch).
fn set_period(params: &mut CertificateParams, from: i64, until: i64) {
    let at = |seconds: i64| {
        rcgen::date_time_ymd(1970, 1, 1)
            + Duration::from_secs(u64::try_from(seconds).unwrap_or_default())
    };
    params.not_before = at(from);
    params.not_after = at(until);
}
