//! The webhook's certificate: a CA and a serving certificate it signs, kept
//! in one `kubernetes.io/tls` Secret (with `ca.crt`) so that every replica
//! serves the same one and the CRDs trust it through one caBundle. Made the
//! first time, by whichever replica gets there first; the keys are never
//! logged.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::{Error, Settings};
use crate::api::WebhookClient;

const CERT: &str = "tls.crt";
const KEY: &str = "tls.key";
const CA: &str = "ca.crt";
/// Ten years: rotation is left to whoever replaces the Secret (the
/// operator serves whatever it holds at start-up).
const VALID_YEARS: i32 = 10;

/// A serving certificate, its key and the CA that signed it, as PEM.
#[derive(Clone)]
pub struct ServingCert {
    /// The serving certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
    /// The CA certificate, for the CRDs' caBundle.
    pub ca_pem: String,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert").finish_non_exhaustive()
    }
}

/// The certificate in the Secret of `settings`, made and stored if there is none.
pub async fn ensure(client: &kube::Client, settings: &Settings) -> Result<ServingCert, Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &settings.namespace);
    let error = |source| Error::Secret {
        namespace: settings.namespace.clone(),
        name: settings.secret.clone(),
        source,
    };
    if let Some(secret) = secrets.get_opt(&settings.secret).await.map_err(error)? {
        return from_secret(&secret, &settings.secret);
    }
    let cert = generate(&names(settings)).map_err(Error::Generate)?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(settings.secret.clone()),
            namespace: Some(settings.namespace.clone()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/name".to_owned(),
                "capwasm".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(secret_data(&cert)),
        ..Secret::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(cert),
        // Another replica made it first: serve that one.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let secret = secrets.get(&settings.secret).await.map_err(error)?;
            from_secret(&secret, &settings.secret)
        }
        Err(e) => Err(error(e)),
    }
}

/// The DNS names and addresses the certificate is for: the Service's names
/// and loopback, and the URL's host when the API server calls a URL.
fn names(settings: &Settings) -> Vec<String> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    match &settings.endpoint {
        WebhookClient::Service {
            name, namespace, ..
        } => {
            names.push(format!("{name}.{namespace}.svc"));
            names.push(format!("{name}.{namespace}.svc.cluster.local"));
        }
        WebhookClient::Url(url) => {
            if let Some(host) = url
                .strip_prefix("https://")
                .and_then(|rest| rest.split(['/', ':']).next())
                .filter(|host| !host.is_empty())
            {
                names.push(host.to_owned());
            }
        }
    }
    names.dedup();
    names
}

/// The Secret's data holding `cert`.
fn secret_data(cert: &ServingCert) -> BTreeMap<String, ByteString> {
    let pem = |text: &str| ByteString(text.as_bytes().to_vec());
    BTreeMap::from([
        (CERT.to_owned(), pem(&cert.cert_pem)),
        (KEY.to_owned(), pem(&cert.key_pem)),
        (CA.to_owned(), pem(&cert.ca_pem)),
    ])
}

fn from_secret(secret: &Secret, name: &str) -> Result<ServingCert, Error> {
    let pem = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .ok_or_else(|| Error::InvalidSecret(name.to_owned()))
    };
    Ok(ServingCert {
        cert_pem: pem(CERT)?,
        key_pem: pem(KEY)?,
        ca_pem: pem(CA)?,
    })
}

/// A new CA and a serving certificate for `names` it signs.
pub fn generate(names: &[String]) -> Result<ServingCert, rcgen::Error> {
    let now = k8s_openapi::jiff::Timestamp::now()
        .to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
        .date();
    let (year, month) = (
        i32::from(now.year()),
        u8::try_from(now.month()).unwrap_or(1),
    );
    let validity = |params: &mut CertificateParams| {
        params.not_before = rcgen::date_time_ymd(year, month, 1);
        params.not_after = rcgen::date_time_ymd(year + VALID_YEARS, month, 1);
    };

    let mut ca_params = CertificateParams::default();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "capwasm-webhook-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut ca_params);
    let ca_key = KeyPair::generate()?;
    let ca = ca_params.self_signed(&ca_key)?;

    let mut params = CertificateParams::new(names.to_vec())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "capwasm-webhook");
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut params);
    let key = KeyPair::generate()?;
    let issuer = Issuer::new(ca_params, ca_key);
    let cert = params.signed_by(&key, &issuer)?;
    Ok(ServingCert {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        ca_pem: ca.pem(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(endpoint: WebhookClient) -> Settings {
        Settings {
            bind: "127.0.0.1:0".parse().unwrap(),
            namespace: "capwasm-system".into(),
            secret: "capwasm-webhook-cert".into(),
            endpoint,
        }
    }

    #[test]
    fn the_certificate_names_the_service_or_the_urls_host() {
        let service = names(&settings(crate::api::installed_webhook().client));
        assert!(service.contains(&"capwasm-webhook.capwasm-system.svc".to_owned()));
        let url = names(&settings(WebhookClient::Url(
            "https://10.1.2.3:9443/convert".into(),
        )));
        assert!(url.contains(&"10.1.2.3".to_owned()), "{url:?}");
    }

    #[test]
    fn a_generated_certificate_is_signed_by_its_ca_and_read_back_from_its_secret() {
        let cert = generate(&["capwasm-webhook.capwasm-system.svc".into()]).unwrap();
        assert!(cert.cert_pem.contains("BEGIN CERTIFICATE"));
        assert_ne!(cert.cert_pem, cert.ca_pem);
        assert!(!format!("{cert:?}").contains("PRIVATE KEY"));
        let secret = Secret {
            data: Some(secret_data(&cert)),
            ..Secret::default()
        };
        let read = from_secret(&secret, "s").unwrap();
        assert_eq!(read.ca_pem, cert.ca_pem);
        let mut partial = secret;
        partial.data.as_mut().unwrap().remove(CA);
        assert!(matches!(
            from_secret(&partial, "s"),
            Err(Error::InvalidSecret(_))
        ));
    }
}
