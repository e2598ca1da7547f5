//! The small CA an API server needs (serving and client certificates) and
//! its service-account signing key, as envtest's TinyCA makes them: ECDSA
//! P-256, PKCS#8 PEM.

use std::net::{IpAddr, Ipv4Addr};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};

use crate::Result;

/// A certificate and its private key, both PEM.
pub(crate) struct Pem {
    pub cert: String,
    pub key: String,
}

/// A self-signed CA that issues leaf certificates.
pub(crate) struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    pub fn new(common_name: &str) -> Result<Self> {
        let mut params = CertificateParams::default();
        params.distinguished_name = name(common_name, &["capwasm-testenv"]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::CrlSign,
        ];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        Ok(Self { issuer })
    }

    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// A serving certificate for the literal 127.0.0.1 (rustls checks IP
    /// SANs; `localhost` may resolve to ::1) and the name `localhost`.
    pub fn serving(&self) -> Result<Pem> {
        self.serving_for(&[IpAddr::V4(Ipv4Addr::LOCALHOST)], &["localhost"])
    }

    /// A serving certificate for these addresses and DNS names.
    pub fn serving_for(&self, addresses: &[IpAddr], names: &[&str]) -> Result<Pem> {
        let mut params = CertificateParams::default();
        params.distinguished_name = name(names.first().copied().unwrap_or("localhost"), &[]);
        params.subject_alt_names = addresses.iter().map(|a| SanType::IpAddress(*a)).collect();
        for dns in names {
            params
                .subject_alt_names
                .push(SanType::DnsName((*dns).try_into()?));
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.leaf(params)
    }

    /// A client certificate: CN is the user name, O the groups.
    pub fn client(&self, user: &str, groups: &[&str]) -> Result<Pem> {
        let mut params = CertificateParams::default();
        params.distinguished_name = name(user, groups);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.leaf(params)
    }

    fn leaf(&self, mut params: CertificateParams) -> Result<Pem> {
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

/// The service-account signing key: its public half verifies tokens, its
/// private half signs them (ES256).
pub(crate) fn service_account_key() -> Result<(String, String)> {
    let key = KeyPair::generate()?;
    Ok((key.public_key_pem(), key.serialize_pem()))
}

fn name(common_name: &str, organizations: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    for org in organizations {
        dn.push(DnType::OrganizationName, *org);
    }
    dn
}
