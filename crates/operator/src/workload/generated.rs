//! The kubeconfig of a Cluster without a control-plane provider, generated
//! from its CA as upstream does: the CA in `<cluster>-ca` (`tls.crt`,
//! `tls.key`) signs a client certificate for `kubernetes-admin` in
//! `system:masters`, valid for a year, and the kubeconfig names the
//! Cluster's control-plane endpoint. Neither key is ever logged.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;
use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::api::ApiEndpoint;

/// How long before its client certificate expires a kubeconfig is made
/// anew: half the year it is issued for, as upstream.
pub const RENEW_BEFORE: Duration = Duration::from_secs(182 * 24 * 60 * 60);

/// The CA Secret's certificate and key.
const CA_CERT: &str = "tls.crt";
const CA_KEY: &str = "tls.key";
const USER: &str = "kubernetes-admin";

/// Why no kubeconfig could be made from a CA Secret.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The Secret lacks a key or holds something that is not PEM text.
    #[error("Secret {secret:?} has no PEM {key:?}")]
    MissingKey {
        /// The CA Secret.
        secret: String,
        /// The key looked for.
        key: &'static str,
    },
    /// The certificate or key is not a usable CA.
    #[error("Secret {secret:?} holds no usable CA certificate and key")]
    InvalidCa {
        /// The CA Secret.
        secret: String,
        /// What rcgen said.
        #[source]
        source: rcgen::Error,
    },
    /// Issuing the client certificate failed.
    #[error("cannot issue a client certificate")]
    Issue(#[source] rcgen::Error),
    /// The kubeconfig could not be written out.
    #[error("cannot write the kubeconfig")]
    Serialize(#[source] serde_yaml_ng::Error),
}

/// The kubeconfig YAML for `cluster` at `endpoint`, signed by the CA in `ca`.
pub fn generate(
    cluster: &str,
    endpoint: &ApiEndpoint,
    ca: &Secret,
) -> Result<String, GenerateError> {
    let secret = ca.metadata.name.clone().unwrap_or_default();
    let pem = |key: &'static str| {
        ca.data
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(|v| std::str::from_utf8(&v.0).ok())
            .map(str::to_owned)
            .ok_or_else(|| GenerateError::MissingKey {
                secret: secret.clone(),
                key,
            })
    };
    let (ca_cert, ca_key) = (pem(CA_CERT)?, pem(CA_KEY)?);
    let invalid = |source| GenerateError::InvalidCa {
        secret: secret.clone(),
        source,
    };
    let signing_key = KeyPair::from_pem(&ca_key).map_err(invalid)?;
    let issuer = Issuer::from_ca_cert_pem(&ca_cert, signing_key).map_err(invalid)?;

    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, USER);
    name.push(DnType::OrganizationName, "system:masters");
    params.distinguished_name = name;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    valid_for_years(&mut params, 1);
    let key = KeyPair::generate().map_err(GenerateError::Issue)?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(GenerateError::Issue)?;

    let context = format!("{USER}@{cluster}");
    let kubeconfig = Kubeconfig {
        clusters: vec![NamedCluster {
            name: cluster.to_owned(),
            cluster: Some(Cluster {
                server: Some(server_url(endpoint)),
                certificate_authority_data: Some(BASE64.encode(&ca_cert)),
                ..Cluster::default()
            }),
            other: BTreeMap::new(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: USER.to_owned(),
            auth_info: Some(AuthInfo {
                client_certificate_data: Some(BASE64.encode(cert.pem())),
                client_key_data: Some(BASE64.encode(key.serialize_pem()).into()),
                ..AuthInfo::default()
            }),
            other: BTreeMap::new(),
        }],
        contexts: vec![NamedContext {
            name: context.clone(),
            context: Some(Context {
                cluster: cluster.to_owned(),
                user: Some(USER.to_owned()),
                ..Context::default()
            }),
            other: BTreeMap::new(),
        }],
        current_context: Some(context),
        ..Kubeconfig::default()
    };
    serde_yaml_ng::to_string(&kubeconfig).map_err(GenerateError::Serialize)
}

/// `params` valid from today for `years`.
pub fn valid_for_years(params: &mut CertificateParams, years: i32) {
    let today = Timestamp::now().to_zoned(TimeZone::UTC).date();
    let (year, month, day) = (
        i32::from(today.year()),
        u8::try_from(today.month()).unwrap_or(1),
        // Every month has a 28th: a year from the 29th of February is fine.
        u8::try_from(today.day()).unwrap_or(1).min(28),
    );
    params.not_before = rcgen::date_time_ymd(year, month, day);
    params.not_after = rcgen::date_time_ymd(year + years, month, day);
}

/// `https://host:port`, with an IPv6 address in brackets.
fn server_url(endpoint: &ApiEndpoint) -> String {
    if endpoint.host.contains(':') {
        format!("https://[{}]:{}", endpoint.host, endpoint.port)
    } else {
        format!("https://{}:{}", endpoint.host, endpoint.port)
    }
}

/// When the client certificate of the current user of the kubeconfig
/// `value` expires; `None` if it has none (a token, say) or it cannot be
/// read.
pub fn client_certificate_expiry(value: &[u8]) -> Option<Timestamp> {
    let yaml = std::str::from_utf8(value).ok()?;
    let config = Kubeconfig::from_yaml(yaml).ok()?;
    let current = config.current_context.as_deref()?;
    let context = config
        .contexts
        .iter()
        .find(|c| c.name == current)?
        .context
        .as_ref()?;
    let user = context.user.as_deref()?;
    let auth = config
        .auth_infos
        .iter()
        .find(|a| a.name == user)?
        .auth_info
        .as_ref()?;
    let pem = BASE64
        .decode(auth.client_certificate_data.as_deref()?)
        .ok()?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
    let cert = pem.parse_x509().ok()?;
    Timestamp::from_second(cert.validity().not_after.timestamp()).ok()
}

/// The Secret key Cluster API keeps the kubeconfig under.
pub const KUBECONFIG_KEY: &str = "value";

/// The data of a kubeconfig Secret.
pub fn secret_data(yaml: String) -> BTreeMap<String, ByteString> {
    BTreeMap::from([(KUBECONFIG_KEY.to_owned(), ByteString(yaml.into_bytes()))])
}

#[cfg(test)]
mod tests {
    use rcgen::{BasicConstraints, IsCa};

    use super::*;

    fn ca_secret(cert: Option<String>, key: String) -> Secret {
        let mut data = BTreeMap::from([(CA_KEY.to_owned(), ByteString(key.into_bytes()))]);
        if let Some(cert) = cert {
            data.insert(CA_CERT.to_owned(), ByteString(cert.into_bytes()));
        }
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("c1-ca".into()),
                ..kube::api::ObjectMeta::default()
            },
            data: Some(data),
            ..Secret::default()
        }
    }

    #[test]
    fn a_generated_kubeconfig_holds_a_year_long_client_certificate_for_the_endpoint() {
        let mut params = CertificateParams::default();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().expect("key");
        let ca = params.self_signed(&key).expect("CA");
        let secret = ca_secret(Some(ca.pem()), key.serialize_pem());
        let endpoint = ApiEndpoint {
            host: "10.0.0.1".into(),
            port: 6443,
        };
        let yaml = generate("c1", &endpoint, &secret).expect("a kubeconfig");
        assert!(yaml.contains("server: https://10.0.0.1:6443"), "{yaml}");
        let expiry = client_certificate_expiry(yaml.as_bytes()).expect("a client certificate");
        let days = expiry.duration_since(Timestamp::now()).as_hours() / 24;
        assert!((360..=366).contains(&days), "expires in {days} days");

        let missing = ca_secret(None, key.serialize_pem());
        assert!(matches!(
            generate("c1", &endpoint, &missing),
            Err(GenerateError::MissingKey { key: "tls.crt", .. })
        ));
        let garbage = ca_secret(Some("not a certificate".into()), key.serialize_pem());
        assert!(matches!(
            generate("c1", &endpoint, &garbage),
            Err(GenerateError::InvalidCa { .. })
        ));
    }
}
