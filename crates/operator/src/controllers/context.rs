//! The one `Context` every reconcile gets: clients, the provider runtime,
//! the Event recorder, metrics, backoff state and settings — built once.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::{ObjectReference, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Client;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;

use crate::api::platform::CLUSTER_LABEL;
use crate::api::{Cluster, MachinePool, PlatformCluster, Reason};
use crate::wasm::{Limits, Runtime};
use crate::workload::WorkloadClusters;

use super::backoff::Backoff;
use super::cache::Caches;
use super::cache::labelled::LabelledWatches;
use super::config::ConfigSchemas;
use super::error::{Error, Retry};
use super::external::ExternalObjects;
use super::metrics::Metrics;
use super::own_writes::OwnWrites;
use super::secrets::{Data, Secrets};

/// Settings fixed for the operator's life.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The Sigstore trust root of keyless signers when a ProviderModule
    /// names none (`--trusted-root`).
    pub trusted_root: Option<std::sync::Arc<crate::oci::Trust>>,
    /// Limits of provider calls where a ProviderModule sets none.
    pub default_limits: Limits,
    /// First delay after a failed reconcile; it doubles per failure.
    pub backoff_first: Duration,
    /// Longest delay after failed reconciles.
    pub backoff_max: Duration,
    /// How long a provider controller waits for more changes to an object
    /// before reconciling it.
    pub debounce: Duration,
    /// The same for the Cluster and MachinePool controllers: longer, so
    /// that what the provider controllers do in reaction to one of their
    /// writes arrives before they look again, and lands in one write.
    pub core_debounce: Duration,
    /// Reconciles each controller runs at once (upstream's
    /// `--machinepool-concurrency` and kin). Unbounded, a fleet's burst of
    /// changes becomes as many requests in flight, each on a connection of
    /// its own (HTTP/1.1) that stays open, idle, long after.
    pub concurrency: u16,
    /// The Event reporter's instance (the pod name, say).
    pub instance: Option<String>,
    /// The only namespace credentials Secrets are read from, if set: a
    /// ProviderModule cannot then hand a guest any Secret of the cluster.
    pub credentials_namespace: Option<String>,
    /// How ProviderModules' OCI images are pulled.
    pub oci: crate::oci::Puller,
    /// The share of the fleet this process reconciles.
    pub shard: super::shard::Shard,
    /// How long a bootstrap token the host makes is valid, and how long it
    /// is extended by while its pool has machines to join (upstream's
    /// `--bootstrap-token-ttl`).
    pub bootstrap_token_ttl: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            default_limits: Limits::default(),
            backoff_first: Duration::from_millis(500),
            backoff_max: Duration::from_secs(300),
            debounce: Duration::from_millis(100),
            core_debounce: Duration::from_millis(500),
            concurrency: crate::wasm::bounds::CONCURRENCY,
            instance: None,
            credentials_namespace: None,
            oci: crate::oci::Puller::default(),
            trusted_root: None,
            shard: super::shard::Shard::ALL,
            // kubeadm's and upstream's kubeadm provider's default.
            bootstrap_token_ttl: Duration::from_secs(15 * 60),
        }
    }
}

impl Settings {
    /// A controller's configuration: changes to an object within
    /// `debounce` land in one reconcile, and at most [`Self::concurrency`]
    /// reconciles run at once.
    pub fn controller(&self, debounce: Duration) -> kube::runtime::controller::Config {
        kube::runtime::controller::Config::default()
            .debounce(debounce)
            .concurrency(self.concurrency)
    }
}

/// What the context is built around.
pub struct Parts {
    /// The management cluster.
    pub client: Client,
    /// The provider runtime.
    pub runtime: Runtime,
    /// Workload-cluster access.
    pub workload: WorkloadClusters,
    /// The caches of the kinds the controllers read.
    pub caches: Arc<Caches>,
}

/// Shared by every reconcile.
pub struct Context {
    /// The management cluster.
    pub client: Client,
    /// The provider runtime.
    pub runtime: Runtime,
    /// Reconcile figures.
    pub metrics: Metrics,
    /// Settings.
    pub settings: Settings,
    /// What the controllers read: one watch per kind, shared.
    pub caches: Arc<Caches>,
    /// Referenced objects of run-time kinds, and caches of their kinds.
    pub external: ExternalObjects,
    /// Compiled provider config schemas.
    pub schemas: ConfigSchemas,
    /// Secrets: metadata from the cache or the server, data kept by version.
    pub secrets: Secrets,
    /// Clients and Node caches of workload clusters.
    pub workload: WorkloadClusters,
    /// The answers to our writes the caches have not shown yet.
    pub own_writes: Arc<OwnWrites>,
    /// Watches of kinds known at run time (a platform module's
    /// `allowedKinds`), of the objects labelled for a platform cluster.
    pub labelled: LabelledWatches,
    recorder: Recorder,
    backoff: Backoff,
}

/// Streams of objects to reconcile that the `Context`'s parts produce.
pub struct Triggers {
    /// MachinePools owning or referencing a changed bootstrap or infrastructure object.
    pub pools: Box<dyn Stream<Item = ObjectRef<MachinePool>> + Send + Unpin>,
    /// Clusters owning or referencing a changed infrastructure or control-plane object.
    pub clusters: Box<dyn Stream<Item = ObjectRef<Cluster>> + Send + Unpin>,
    /// PlatformClusters whose objects changed.
    pub platforms: Box<dyn Stream<Item = ObjectRef<PlatformCluster>> + Send + Unpin>,
}

impl Context {
    /// Builds the context around `parts`; the triggers go to the controllers.
    pub fn new(parts: Parts, metrics: Metrics, settings: Settings) -> (Arc<Self>, Triggers) {
        let Parts {
            client,
            runtime,
            workload,
            caches,
        } = parts;
        let own_writes = Arc::new(OwnWrites::default());
        let (external, pools, clusters) =
            ExternalObjects::new(client.clone(), &caches, metrics.clone(), own_writes.clone());
        let (labelled, changed) = LabelledWatches::new(client.clone(), CLUSTER_LABEL);
        let reporter = Reporter {
            controller: "capwasm".into(),
            instance: settings.instance.clone(),
        };
        let context = Self {
            recorder: Recorder::new(client.clone(), reporter),
            external,
            schemas: ConfigSchemas::default(),
            own_writes,
            labelled,
            secrets: Secrets::new(client.clone()),
            backoff: Backoff::new(settings.backoff_first, settings.backoff_max),
            client,
            runtime,
            metrics,
            settings,
            caches,
            workload,
        };
        let platforms =
            Box::new(changed.map(|(name, namespace)| ObjectRef::new(&name).within(&namespace)));
        (
            Arc::new(context),
            Triggers {
                pools,
                clusters,
                platforms,
            },
        )
    }

    /// Secret `namespace/name`'s metadata: the cache's, else the API
    /// server's; none if it does not exist.
    pub async fn secret_metadata(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<PartialObjectMeta<Secret>>>, Error> {
        self.secrets
            .metadata(&self.caches.secrets, namespace, name)
            .await
            .map_err(|source| secret_not_read(name, source))
    }

    /// Secret `namespace/name`'s data (read once per version of it); none
    /// if it does not exist.
    pub async fn secret_data(&self, namespace: &str, name: &str) -> Result<Option<Data>, Error> {
        self.secrets
            .data(&self.caches.secrets, namespace, name)
            .await
            .map_err(|source| secret_not_read(name, source))
    }

    /// Publishes an Event about `object`: a Warning for reasons a person may
    /// have to act on, Normal otherwise. A failure to publish is logged only.
    pub async fn publish(&self, object: &ObjectReference, reason: Reason, note: impl Into<String>) {
        let event = Event {
            type_: if reason.is_warning() {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.as_str().into(),
            note: Some(crate::report::truncate(note.into(), 1000)),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, object).await {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                reason = reason.as_str(),
                "cannot publish an Event"
            );
        }
    }

    /// The Events a status change is worth ([`noteworthy`]).
    pub async fn announce(
        &self,
        object: &ObjectReference,
        before: &[Condition],
        after: &[Condition],
    ) {
        for (reason, note) in noteworthy(before, after) {
            self.publish(object, reason, note).await;
        }
    }

    /// What `error_policy` does: count the failure, then come back as the
    /// error asks — after the object's next backoff delay, after a
    /// provider's retry-after, or on the next change.
    pub fn error_action(&self, controller: &'static str, uid: &str, error: &Error) -> Action {
        self.metrics.failure(controller, error.metric_label());
        if error.is_busy() {
            tracing::debug!(controller, %error, "provider busy; again shortly");
        } else {
            tracing::warn!(
                controller,
                error = error as &dyn std::error::Error,
                "reconcile failed"
            );
        }
        match error.retry() {
            Retry::Backoff => Action::requeue(self.backoff.next(uid)),
            Retry::After(delay) => Action::requeue(delay),
            Retry::OnChange => Action::requeue(super::outcome::RESYNC),
        }
    }

    /// How many reconciles of the object failed in a row.
    pub fn failures(&self, uid: &str) -> u32 {
        self.backoff.failures(uid)
    }

    /// Forgets an object's failures after a reconcile without error.
    pub fn succeeded(&self, uid: &str) {
        self.backoff.reset(uid);
    }
}

/// What changed conditions are worth an Event (named after the new reason,
/// `type: message` as the note): a condition that newly holds a reason a
/// person may have to act on, and one that recovered from such a reason.
/// Progress alone (waiting, provisioning, ready) is in the status and says
/// nothing more: an Event per step cost more API writes than the status
/// itself, and upstream's core publishes none for it.
fn noteworthy(before: &[Condition], after: &[Condition]) -> Vec<(Reason, String)> {
    after
        .iter()
        .filter_map(|condition| {
            let reason = Reason::parse(&condition.reason)?;
            let previous = before.iter().find(|b| b.type_ == condition.type_);
            let unchanged = previous
                .is_some_and(|b| b.status == condition.status && b.reason == condition.reason);
            let recovered = previous
                .and_then(|b| Reason::parse(&b.reason))
                .is_some_and(Reason::is_warning);
            (!unchanged && (reason.is_warning() || recovered)).then(|| {
                (
                    reason,
                    format!("{}: {}", condition.type_, condition.message),
                )
            })
        })
        .collect()
}

fn secret_not_read(name: &str, source: kube::Error) -> Error {
    Error::Get {
        kind: "Secret",
        name: name.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: format!("{type_} is {reason}"),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
            observed_generation: None,
        }
    }

    fn reasons(before: &[Condition], after: &[Condition]) -> Vec<&'static str> {
        noteworthy(before, after)
            .into_iter()
            .map(|(reason, _)| reason.as_str())
            .collect()
    }

    #[test]
    fn a_new_warning_is_announced_with_its_message() {
        let after = [condition(
            "InfrastructureReady",
            "False",
            "ReferenceNotFound",
        )];
        let events = noteworthy(&[], &after);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].0, Reason::ReferenceNotFound);
        assert_eq!(
            events[0].1,
            "InfrastructureReady: InfrastructureReady is ReferenceNotFound"
        );
    }

    #[test]
    fn progress_is_not_announced() {
        let waiting = [condition(
            "InfrastructureReady",
            "False",
            "WaitingForInfrastructure",
        )];
        let ready = [condition("InfrastructureReady", "True", "Ready")];
        assert!(reasons(&[], &waiting).is_empty());
        assert!(reasons(&waiting, &ready).is_empty());
        assert!(reasons(&[], &[condition("Paused", "False", "NotPaused")]).is_empty());
    }

    #[test]
    fn recovery_from_a_warning_is_announced_once() {
        let broken = [condition("BootstrapConfigReady", "False", "GuestTrapped")];
        let ready = [condition("BootstrapConfigReady", "True", "Ready")];
        assert_eq!(reasons(&broken, &ready), ["Ready"]);
        assert!(reasons(&ready, &ready).is_empty());
    }

    #[test]
    fn an_unchanged_warning_is_not_announced_again_but_a_different_one_is() {
        let trapped = [condition("Ready", "False", "GuestTrapped")];
        let timed_out = [condition("Ready", "False", "GuestTimedOut")];
        assert!(reasons(&trapped, &trapped).is_empty());
        assert_eq!(reasons(&trapped, &timed_out), ["GuestTimedOut"]);
    }

    #[test]
    fn unknown_reasons_are_not_announced() {
        let after = [condition("Ready", "False", "SomethingElse")];
        assert!(noteworthy(&[], &after).is_empty());
    }
}
