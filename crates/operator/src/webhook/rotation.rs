//! Keeping the served certificate current, on every replica: a watch of
//! the certificate Secret serves what any replica wrote from the next TLS
//! handshake on, and points the CRDs and the admission configuration at a
//! changed CA bundle; a timer renews what is due ([`Certs::settle`]). A
//! Secret deleted is made anew, which is how a rotation is forced.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};

use super::certs::{Certs, Settled, Stored, period_of, serial_of};
use super::server::CertResolver;
use super::{Error, RETRY, point_crds_at, register_admission};
use crate::api::WebhookClient;
use crate::controllers::Metrics;

/// The longest the timer sleeps, whatever the certificates say: a clock
/// set forward, or a host that slept, is noticed within it.
const LONGEST_SLEEP: Duration = Duration::from_secs(3600);

/// Past a renewal's second, so that the plan finds it due.
const MARGIN: Duration = Duration::from_millis(50);

/// What keeps one replica's certificate current.
pub struct Rotation {
    /// The certificate Secret.
    pub certs: Certs,
    /// What the server presents.
    pub resolver: Arc<CertResolver>,
    /// The client the CRDs and admission configuration are written with.
    pub client: kube::Client,
    /// How the API server reaches the webhook.
    pub endpoint: WebhookClient,
    /// Counts the writes, and says when the served certificate expires.
    pub metrics: Metrics,
}

/// The CA bundle this replica last pointed the API server at, and when.
struct Published {
    bundle: String,
    at: Instant,
}

impl Rotation {
    /// Serves `settled` and keeps it current until the task is dropped.
    pub async fn run(self, settled: Settled) {
        let mut stored = Some(settled.stored);
        let mut next = wake_at(settled.next);
        let mut published: Option<Published> = None;
        let mut watch = self.watch();
        // Whether the watch's current listing held the Secret.
        let mut listed = false;
        loop {
            if let Some(current) = &stored {
                self.serve(current);
                let bundle = &current.served.ca_pem;
                if published.as_ref().is_none_or(|p| p.bundle != *bundle) {
                    match self.publish(bundle).await {
                        Ok(()) => {
                            published = Some(Published {
                                bundle: bundle.clone(),
                                at: Instant::now(),
                            });
                        }
                        Err(error) => {
                            not_published(&error);
                            next = next.min(Instant::now() + RETRY);
                        }
                    }
                }
            }
            tokio::select! {
                event = watch.next() => {
                    let now = Instant::now();
                    match event {
                        Some(Ok(Event::Init)) => listed = false,
                        Some(Ok(Event::InitApply(secret) | Event::Apply(secret))) => {
                            listed = true;
                            match Stored::from_secret(&secret) {
                                Ok(read) => stored = Some(read),
                                Err(error) => not_served(&error),
                            }
                            next = now;
                        }
                        Some(Ok(Event::Delete(_))) => {
                            stored = None;
                            next = now;
                        }
                        Some(Ok(Event::InitDone)) if !listed => {
                            stored = None;
                            next = now;
                        }
                        Some(Ok(Event::InitDone)) => {}
                        Some(Err(error)) => {
                            self.metrics.watch_error("secrets");
                            tracing::warn!(
                                error = %crate::report::error_chain(&error),
                                "cannot watch the webhook certificate Secret"
                            );
                        }
                        None => watch = self.watch(),
                    }
                }
                () = tokio::time::sleep_until(next.into()) => {
                    let trusted = match (&published, &stored) {
                        (Some(p), Some(s)) => {
                            p.bundle == s.served.ca_pem && p.at.elapsed() >= super::certs::SETTLE
                        }
                        _ => false,
                    };
                    match self.certs.settle(stored.clone(), trusted).await {
                        Ok(settled) => {
                            next = wake_at(settled.next);
                            stored = Some(settled.stored);
                        }
                        Err(error) => {
                            not_renewed(&error);
                            next = Instant::now() + RETRY;
                        }
                    }
                }
            }
        }
    }

    /// The Secret's events, by name.
    fn watch(&self) -> BoxStream<'static, Result<Event<Secret>, watcher::Error>> {
        let config =
            watcher::Config::default().fields(&format!("metadata.name={}", self.certs.name()));
        watcher::watcher(self.certs.api().clone(), config)
            .default_backoff()
            .boxed()
    }

    /// Serves `stored` from the next handshake on, if it is not already.
    fn serve(&self, stored: &Stored) {
        let served = &stored.served;
        match self.resolver.set(served) {
            Ok(false) => {}
            Ok(true) => {
                let not_after = period_of(&served.cert_pem).map(|p| p.not_after);
                if let Some(not_after) = not_after {
                    self.metrics.webhook_certificate_served(not_after);
                }
                tracing::info!(
                    secret = %self.certs.name(),
                    resource_version = stored.resource_version(),
                    serial = serial_of(&served.cert_pem),
                    not_after,
                    "serving the webhook certificate"
                );
            }
            Err(error) => not_served(&error),
        }
    }

    /// Points the CRDs and the admission configuration at `bundle`.
    async fn publish(&self, bundle: &str) -> Result<(), Error> {
        point_crds_at(&self.client, &self.endpoint, bundle).await?;
        register_admission(&self.client, &self.endpoint, bundle).await?;
        tracing::info!(
            cas = super::certs::pems(bundle).len(),
            "the CRDs and the admission webhook trust the webhook's CA bundle"
        );
        Ok(())
    }
}

/// The instant `at` (seconds since the epoch) is reached, just past it;
/// none, or far ahead: within [`LONGEST_SLEEP`].
fn wake_at(at: Option<i64>) -> Instant {
    let now = Instant::now();
    let Some(at) = at else {
        return now + LONGEST_SLEEP;
    };
    let target = UNIX_EPOCH + Duration::from_secs(u64::try_from(at).unwrap_or_default());
    let wait = target
        .duration_since(SystemTime::now())
        .unwrap_or_default()
        .min(LONGEST_SLEEP);
    now + wait + MARGIN
}

fn not_served(error: &Error) {
    tracing::error!(
        error = %crate::report::error_chain(error),
        "the webhook certificate Secret cannot be served: the certificate served stays"
    );
}

fn not_renewed(error: &Error) {
    tracing::error!(
        error = %crate::report::error_chain(error),
        retry_in = ?RETRY,
        "cannot make or renew the webhook certificate"
    );
}

fn not_published(error: &Error) {
    tracing::error!(
        error = %crate::report::error_chain(error),
        retry_in = ?RETRY,
        "cannot point the CRDs and the admission webhook at the webhook's CA bundle"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timer_wakes_just_past_the_second_and_never_sleeps_past_an_hour() {
        let now = Instant::now();
        let past = wake_at(Some(0));
        assert!(past >= now + MARGIN && past < now + MARGIN + Duration::from_secs(1));
        assert!(wake_at(None) >= now + LONGEST_SLEEP);
        assert!(wake_at(Some(i64::MAX)) <= Instant::now() + LONGEST_SLEEP + MARGIN);
    }
}
