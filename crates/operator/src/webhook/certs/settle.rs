//! How [`Certs::settle`] makes, renews or keeps the Secret: the plan of
//! [`renewal`](super::renewal) carried out, each write carrying the
//! resourceVersion read.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};

use super::renewal::{self, Plan};
use super::{
    CA, CA_KEY, CERT, Certs, Error, KEY, SETTLE, Settled, Stored, Wrote, inspect, issue, pems,
    period_of, seconds, serial_of, unix_now,
};

impl Certs {
    /// Makes, renews or keeps the Secret, last seen as `current` (none: there
    /// was none), as its [`renewal`] plan says now; `trusted` says whether
    /// its bundle has reached the API server. A write carries `current`'s
    /// resourceVersion: refused because another replica wrote since, it
    /// reads and keeps theirs ([`Wrote::Lost`]).
    ///
    /// # Errors
    ///
    /// When the Secret cannot be written or read back, or a certificate
    /// cannot be made.
    pub async fn settle(&self, current: Option<Stored>, trusted: bool) -> Result<Settled, Error> {
        let now = unix_now();
        let Some(current) = current else {
            return self.create(now).await;
        };
        let plan = self.plan(&current, now, trusted);
        let data = match plan {
            Plan::Foreign | Plan::Keep { .. } | Plan::AwaitTrust => {
                return Ok(self.settled(current, Wrote::Nothing, now, trusted));
            }
            Plan::NewCa => self.new_ca(&current, now)?,
            Plan::Renew { prune } => self.renew(&current, now, prune)?,
        };
        let wrote = if matches!(plan, Plan::NewCa) {
            Wrote::NewCa
        } else {
            Wrote::Renewed
        };
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": current.resource_version },
            "data": data,
        });
        let written = self
            .secrets
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        match written {
            Ok(secret) => {
                let stored = Stored::from_secret(&secret)?;
                self.wrote(wrote, &stored);
                Ok(self.settled(stored, wrote, now, false))
            }
            Err(kube::Error::Api(status)) if status.code == 409 => self.lost(now).await,
            // Deleted since: made anew.
            Err(kube::Error::Api(status)) if status.code == 404 => self.create(now).await,
            Err(e) => Err(self.failed(e)),
        }
    }

    fn plan(&self, stored: &Stored, now: i64, trusted: bool) -> Plan {
        let served = &stored.served;
        let facts = inspect::facts(
            &served.cert_pem,
            &served.ca_pem,
            stored.ca_key_pem.as_deref(),
            &self.names,
        );
        renewal::plan(&facts, now, trusted)
    }

    fn settled(&self, stored: Stored, wrote: Wrote, now: i64, trusted: bool) -> Settled {
        let next = match self.plan(&stored, now, trusted) {
            Plan::Foreign => None,
            Plan::Keep { until } => Some(until),
            Plan::AwaitTrust => Some(now.saturating_add(seconds(SETTLE))),
            Plan::NewCa | Plan::Renew { .. } => Some(now),
        };
        Settled {
            stored,
            wrote,
            next,
        }
    }

    /// Makes the Secret: a new CA and a serving certificate it signs.
    async fn create(&self, now: i64) -> Result<Settled, Error> {
        let (from, until) = issue::period(now, self.validity.ca);
        let ca = issue::ca(from, until).map_err(Error::Generate)?;
        let serving = self.sign(&ca, now, &self.names)?;
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/name".to_owned(),
                    "capwasm".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(data(&serving, &ca.cert_pem, &ca.key_pem)),
            ..Secret::default()
        };
        match self.secrets.create(&PostParams::default(), &secret).await {
            Ok(secret) => {
                let stored = Stored::from_secret(&secret)?;
                self.wrote(Wrote::Created, &stored);
                Ok(self.settled(stored, Wrote::Created, now, false))
            }
            Err(kube::Error::Api(status)) if status.code == 409 => self.lost(now).await,
            Err(e) => Err(self.failed(e)),
        }
    }

    /// Another replica wrote first: what it wrote.
    async fn lost(&self, now: i64) -> Result<Settled, Error> {
        self.metrics
            .webhook_certificate_written(Wrote::Lost.metric_label());
        let stored = self
            .read()
            .await?
            .ok_or_else(|| Error::InvalidSecret(self.name.clone()))?;
        tracing::info!(
            secret = %self.name,
            resource_version = stored.resource_version(),
            serial = serial_of(&stored.served.cert_pem),
            "another replica wrote the webhook certificate first (409 Conflict): serving theirs"
        );
        Ok(self.settled(stored, Wrote::Lost, now, false))
    }

    /// A new CA in front of the bundle, the CAs still valid kept behind it;
    /// the serving certificate unchanged.
    fn new_ca(&self, current: &Stored, now: i64) -> Result<BTreeMap<String, ByteString>, Error> {
        let (from, until) = issue::period(now, self.validity.ca);
        let ca = issue::ca(from, until).map_err(Error::Generate)?;
        let mut bundle = ca.cert_pem.clone();
        for kept in pems(&current.served.ca_pem)
            .into_iter()
            .filter(|pem| period_of(pem).is_some_and(|p| p.not_after > now))
        {
            bundle.push_str(&kept);
        }
        let serving = issue::Pair {
            cert_pem: current.served.cert_pem.clone(),
            key_pem: current.served.key_pem.clone(),
        };
        Ok(data(&serving, &bundle, &ca.key_pem))
    }

    /// A new serving certificate from the signing CA; the other CAs
    /// dropped from the bundle when `prune`. Renewed before it is due (a
    /// name missing), it keeps the names it had besides: replicas reaching
    /// the webhook by other names (a rolling update that changes
    /// `--webhook-url`) then agree after one renewal each, rather than
    /// renewing it in turn for ever.
    fn renew(
        &self,
        current: &Stored,
        now: i64,
        prune: bool,
    ) -> Result<BTreeMap<String, ByteString>, Error> {
        let bundle = &current.served.ca_pem;
        let (Some(signer), Some(key)) = (pems(bundle).into_iter().next(), &current.ca_key_pem)
        else {
            return Err(Error::InvalidSecret(self.name.clone()));
        };
        let ca = issue::Pair {
            cert_pem: signer,
            key_pem: key.clone(),
        };
        let mut names = self.names.clone();
        let cert = &current.served.cert_pem;
        if period_of(cert).is_some_and(|p| now < p.renew_at()) {
            for held in inspect::names_of(cert) {
                if !names.contains(&held) {
                    names.push(held);
                }
            }
        }
        let serving = self.sign(&ca, now, &names)?;
        let bundle = if prune { &ca.cert_pem } else { bundle };
        Ok(data(&serving, bundle, &ca.key_pem))
    }

    /// A serving certificate for `names` signed by `ca`, valid as long as
    /// it is at most.
    fn sign(&self, ca: &issue::Pair, now: i64, names: &[String]) -> Result<issue::Pair, Error> {
        let (from, until) = issue::period(now, self.validity.serving);
        let until = period_of(&ca.cert_pem).map_or(until, |ca| until.min(ca.not_after));
        issue::serving(names, ca, from, until).map_err(Error::Generate)
    }

    fn wrote(&self, wrote: Wrote, stored: &Stored) {
        self.metrics
            .webhook_certificate_written(wrote.metric_label());
        let served = &stored.served;
        tracing::info!(
            secret = %self.name,
            outcome = wrote.metric_label(),
            resource_version = stored.resource_version(),
            serial = serial_of(&served.cert_pem),
            not_after = period_of(&served.cert_pem).map(|p| p.not_after),
            ca_not_after = period_of(&served.ca_pem).map(|p| p.not_after),
            cas = pems(&served.ca_pem).len(),
            "wrote the webhook certificate"
        );
    }
}

/// The Secret's data: `serving`, the `bundle` and the signing CA's key.
pub(super) fn data(
    serving: &issue::Pair,
    bundle: &str,
    ca_key: &str,
) -> BTreeMap<String, ByteString> {
    let pem = |text: &str| ByteString(text.as_bytes().to_vec());
    BTreeMap::from([
        (CERT.to_owned(), pem(&serving.cert_pem)),
        (KEY.to_owned(), pem(&serving.key_pem)),
        (CA.to_owned(), pem(bundle)),
        (CA_KEY.to_owned(), pem(ca_key)),
    ])
}
