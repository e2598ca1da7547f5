//! The webhook's certificate: a CA and a serving certificate it signs, kept
//! in one `kubernetes.io/tls` Secret so that every replica serves the same
//! one and the API server trusts it through one caBundle. The Secret holds
//! `tls.crt` and `tls.key` (the serving certificate), `ca.crt` (the CAs
//! the API server is to trust, the one signing first) and `ca.key` (that
//! CA's key), as cert-controller's rotator keeps them.
//!
//! Any replica makes it when there is none and renews it when it is due
//! ([`renewal`]); each write carries the resourceVersion it read, so two
//! replicas renewing at once end with one certificate: the second write is
//! refused (409 Conflict) and that replica reads and serves the first's.
//! A Secret whose CA is not capwasm's is served as it is and never written.
//! No key is ever logged.

mod inspect;
mod issue;
mod renewal;
mod settle;

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::{Error, Settings};
use crate::api::WebhookClient;
use crate::controllers::Metrics;

pub use inspect::{pems, period_of, serial_and_expiry, serial_of};

const CERT: &str = "tls.crt";
const KEY: &str = "tls.key";
const CA: &str = "ca.crt";
const CA_KEY: &str = "ca.key";

/// How long after a new CA reached the API server a serving certificate it
/// signs may be served: the API server reloads a CRD's or a webhook
/// configuration's caBundle within about a second.
pub const SETTLE: Duration = Duration::from_secs(5);

/// How long the certificates capwasm makes are valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    /// The serving certificate's (a year).
    pub serving: Duration,
    /// The CA's (ten years).
    pub ca: Duration,
}

impl Default for Validity {
    fn default() -> Self {
        const DAY: u64 = 24 * 3600;
        Self {
            serving: Duration::from_secs(365 * DAY),
            ca: Duration::from_secs(10 * 365 * DAY),
        }
    }
}

/// A serving certificate, its key and the CAs to trust, as PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct ServingCert {
    /// The serving certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
    /// The CA bundle, for the CRDs' caBundle: the CA signing first.
    pub ca_pem: String,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert").finish_non_exhaustive()
    }
}

/// What the Secret holds, as read.
#[derive(Clone)]
pub struct Stored {
    /// What it serves.
    pub served: ServingCert,
    ca_key_pem: Option<String>,
    resource_version: Option<String>,
}

impl std::fmt::Debug for Stored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stored")
            .field("resource_version", &self.resource_version)
            .finish_non_exhaustive()
    }
}

impl Stored {
    /// What `secret` holds, or why it cannot serve.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSecret`] when `tls.crt`, `tls.key` or `ca.crt` is
    /// missing or not text.
    pub fn from_secret(secret: &Secret) -> Result<Self, Error> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let text = |key: &str| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .and_then(|v| String::from_utf8(v.0.clone()).ok())
        };
        let pem = |key: &str| text(key).ok_or_else(|| Error::InvalidSecret(name.clone()));
        Ok(Self {
            served: ServingCert {
                cert_pem: pem(CERT)?,
                key_pem: pem(KEY)?,
                ca_pem: pem(CA)?,
            },
            ca_key_pem: text(CA_KEY),
            resource_version: secret.metadata.resource_version.clone(),
        })
    }

    /// The Secret's resourceVersion when it was read.
    pub fn resource_version(&self) -> Option<&str> {
        self.resource_version.as_deref()
    }
}

/// What [`Certs::settle`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wrote {
    /// Nothing: the Secret is as it should be, or not capwasm's.
    Nothing,
    /// The Secret, there being none.
    Created,
    /// A new serving certificate.
    Renewed,
    /// A new CA, added to the bundle.
    NewCa,
    /// Nothing: another replica wrote first (409 Conflict), and what it
    /// wrote was read back.
    Lost,
}

impl Wrote {
    /// Its label in `capwasm_webhook_certificate_writes_total{outcome}`.
    pub fn metric_label(self) -> &'static str {
        match self {
            Self::Nothing => "none",
            Self::Created => "created",
            Self::Renewed => "renewed",
            Self::NewCa => "new_ca",
            Self::Lost => "conflict",
        }
    }
}

/// What one look at the Secret left.
#[derive(Clone, Debug)]
pub struct Settled {
    /// What the Secret holds now.
    pub stored: Stored,
    /// What this look wrote.
    pub wrote: Wrote,
    /// When to look again (seconds since the epoch); none for a Secret that
    /// is not capwasm's, looked at again only when it changes.
    pub next: Option<i64>,
}

/// The certificate Secret of one webhook: reads it, and makes or renews
/// what it holds.
#[derive(Clone)]
pub struct Certs {
    secrets: Api<Secret>,
    name: String,
    names: Vec<String>,
    validity: Validity,
    metrics: Metrics,
}

impl std::fmt::Debug for Certs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certs")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Certs {
    /// The Secret of `settings`, written as its validity says; `metrics`
    /// count the writes.
    pub fn new(client: kube::Client, settings: &Settings, metrics: Metrics) -> Self {
        Self {
            secrets: Api::namespaced(client, &settings.namespace),
            name: settings.secret.clone(),
            names: names(settings),
            validity: settings.validity,
            metrics,
        }
    }

    /// The Secret's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Secret's API (the operator's namespace).
    pub(crate) fn api(&self) -> &Api<Secret> {
        &self.secrets
    }

    fn failed(&self, source: kube::Error) -> Error {
        Error::Secret {
            namespace: self.secrets.namespace().unwrap_or_default().to_owned(),
            name: self.name.clone(),
            source,
        }
    }

    /// What the Secret holds now; none when there is none.
    ///
    /// # Errors
    ///
    /// When it cannot be read, or holds no certificate.
    pub async fn read(&self) -> Result<Option<Stored>, Error> {
        let secret = self
            .secrets
            .get_opt(&self.name)
            .await
            .map_err(|e| self.failed(e))?;
        secret.as_ref().map(Stored::from_secret).transpose()
    }

    /// Reads the Secret and settles it ([`Certs::settle`]), the bundle not
    /// known to be trusted.
    ///
    /// # Errors
    ///
    /// As [`Certs::read`] and [`Certs::settle`].
    pub async fn ensure(&self) -> Result<Settled, Error> {
        let current = self.read().await?;
        self.settle(current, false).await
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

/// Seconds since the epoch.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, seconds)
}

fn seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

/// A new CA and a serving certificate for `names` it signs, valid as
/// `validity` says from now.
///
/// # Errors
///
/// When a key or certificate cannot be made.
pub fn generate(names: &[String], validity: Validity) -> Result<ServingCert, rcgen::Error> {
    let now = unix_now();
    let (from, until) = issue::period(now, validity.ca);
    let ca = issue::ca(from, until)?;
    let (from, until) = issue::period(now, validity.serving);
    let serving = issue::serving(names, &ca, from, until)?;
    Ok(ServingCert {
        cert_pem: serving.cert_pem,
        key_pem: serving.key_pem,
        ca_pem: ca.cert_pem,
    })
}

#[cfg(test)]
mod tests {
    use super::settle::data;
    use super::*;
    use renewal::Plan;

    fn settings(endpoint: WebhookClient) -> Settings {
        Settings {
            bind: "127.0.0.1:0".parse().unwrap(),
            namespace: "capwasm-system".into(),
            secret: "capwasm-webhook-cert".into(),
            endpoint,
            validity: Validity::default(),
        }
    }

    fn secret(serving: &issue::Pair, bundle: &str, ca_key: Option<&str>) -> Secret {
        let mut data = data(serving, bundle, ca_key.unwrap_or_default());
        if ca_key.is_none() {
            data.remove(CA_KEY);
        }
        Secret {
            data: Some(data),
            ..Secret::default()
        }
    }

    fn facts_of(secret: &Secret, names: &[String]) -> renewal::Facts {
        let stored = Stored::from_secret(secret).unwrap();
        inspect::facts(
            &stored.served.cert_pem,
            &stored.served.ca_pem,
            stored.ca_key_pem.as_deref(),
            names,
        )
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
    fn a_made_secret_is_ours_signed_by_its_kept_ca_and_holds_its_names() {
        let names = vec![
            "capwasm-webhook.capwasm-system.svc".into(),
            "127.0.0.1".into(),
        ];
        let now = unix_now();
        let ca = issue::ca(now - 10, now + 1000).unwrap();
        let serving = issue::serving(&names, &ca, now - 10, now + 100).unwrap();
        let secret = secret(&serving, &ca.cert_pem, Some(&ca.key_pem));
        let facts = facts_of(&secret, &names);
        assert!(
            facts.ours && facts.signed_by_signer && facts.names_match,
            "{facts:?}"
        );
        assert_eq!(
            facts.serving,
            renewal::Period {
                not_before: now - 10,
                not_after: now + 100
            }
        );
        assert_eq!(facts.signer.map(|p| p.not_after), Some(now + 1000));
        // Another name, or another CA's key, and it is renewed.
        let more = [names.clone(), vec!["10.9.9.9".into()]].concat();
        assert!(!facts_of(&secret, &more).names_match);
        assert_eq!(inspect::names_of(&serving.cert_pem), names);
        let other = issue::ca(now, now + 1000).unwrap();
        let foreign_key = self::secret(&serving, &ca.cert_pem, Some(&other.key_pem));
        assert_eq!(facts_of(&foreign_key, &names).signer, None);
        assert!(!format!("{serving:?} {ca:?}").contains("PRIVATE KEY"));
    }

    #[test]
    fn an_older_versions_secret_is_ours_without_a_signer_and_a_foreign_one_is_not_ours() {
        let names = vec!["localhost".to_owned()];
        let old = generate(&names, Validity::default()).unwrap();
        let serving = issue::Pair {
            cert_pem: old.cert_pem.clone(),
            key_pem: old.key_pem.clone(),
        };
        let facts = facts_of(&secret(&serving, &old.ca_pem, None), &names);
        assert!(facts.ours && facts.signer.is_none() && !facts.signed_by_signer);
        assert_eq!(
            renewal::plan(&facts, unix_now(), false),
            Plan::NewCa,
            "migrated by a new CA"
        );
        // A bundle whose first CA is someone else's.
        let garbage = facts_of(&secret(&serving, "not a certificate", None), &names);
        assert!(!garbage.ours);
        let mut partial = secret(&serving, &old.ca_pem, None);
        partial.data.as_mut().unwrap().remove(CA);
        assert!(matches!(
            Stored::from_secret(&partial),
            Err(Error::InvalidSecret(_))
        ));
    }

    #[test]
    fn a_new_ca_leads_the_bundle_and_signs_only_the_next_serving_certificate() {
        let names = vec!["localhost".to_owned()];
        let old = generate(&names, Validity::default()).unwrap();
        let serving = issue::Pair {
            cert_pem: old.cert_pem.clone(),
            key_pem: old.key_pem.clone(),
        };
        let now = unix_now();
        let new = issue::ca(now, now + 1000).unwrap();
        let bundle = format!("{}{}", new.cert_pem, old.ca_pem);
        let rotated = secret(&serving, &bundle, Some(&new.key_pem));
        let facts = facts_of(&rotated, &names);
        assert!(facts.ours && facts.signer.is_some() && !facts.signed_by_signer);
        assert_eq!(pems(&bundle).len(), 2);
        let next = issue::serving(&names, &new, now, now + 100).unwrap();
        let renewed = secret(&next, &bundle, Some(&new.key_pem));
        assert!(facts_of(&renewed, &names).signed_by_signer);
    }
}
