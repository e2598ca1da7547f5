//! The one `Context` every reconcile gets: clients, the provider runtime,
//! the Event recorder, metrics, backoff state and settings — built once.

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Client;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;

use crate::api::{Cluster, MachinePool, Reason};
use crate::wasm::{Limits, Runtime};
use crate::workload::WorkloadClusters;

use super::backoff::Backoff;
use super::cache::Caches;
use super::config::ConfigSchemas;
use super::error::{Error, Retry};
use super::external::ExternalObjects;
use super::metrics::Metrics;
use super::secrets::Secrets;

/// Settings fixed for the operator's life.
#[derive(Clone, Debug)]
pub struct Settings {
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
    /// The Event reporter's instance (the pod name, say).
    pub instance: Option<String>,
    /// The only namespace credentials Secrets are read from, if set: a
    /// ProviderModule cannot then hand a guest any Secret of the cluster.
    pub credentials_namespace: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            default_limits: Limits::default(),
            backoff_first: Duration::from_millis(500),
            backoff_max: Duration::from_secs(300),
            debounce: Duration::from_millis(100),
            core_debounce: Duration::from_millis(500),
            instance: None,
            credentials_namespace: None,
        }
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
    recorder: Recorder,
    backoff: Backoff,
}

/// Streams of objects to reconcile that the `Context`'s parts produce.
pub struct Triggers {
    /// MachinePools owning or referencing a changed bootstrap or infrastructure object.
    pub pools: Box<dyn Stream<Item = ObjectRef<MachinePool>> + Send + Unpin>,
    /// Clusters owning or referencing a changed infrastructure or control-plane object.
    pub clusters: Box<dyn Stream<Item = ObjectRef<Cluster>> + Send + Unpin>,
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
        let (external, pools, clusters) =
            ExternalObjects::new(client.clone(), &caches, metrics.clone());
        let reporter = Reporter {
            controller: "capwasm".into(),
            instance: settings.instance.clone(),
        };
        let context = Self {
            recorder: Recorder::new(client.clone(), reporter),
            external,
            schemas: ConfigSchemas::default(),
            secrets: Secrets::new(client.clone()),
            backoff: Backoff::new(settings.backoff_first, settings.backoff_max),
            client,
            runtime,
            metrics,
            settings,
            caches,
            workload,
        };
        (Arc::new(context), Triggers { pools, clusters })
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

    /// One Event per condition whose status or reason changed from `before`
    /// to `after` (named after the new reason, its message as the note). A
    /// condition that first appears at rest (not paused, not deleting, not
    /// scaling, no workers) says nothing worth an Event.
    pub async fn announce(
        &self,
        object: &ObjectReference,
        before: &[Condition],
        after: &[Condition],
    ) {
        for condition in after {
            let unchanged = before.iter().any(|b| {
                b.type_ == condition.type_
                    && b.status == condition.status
                    && b.reason == condition.reason
            });
            let Some(reason) = Reason::parse(&condition.reason) else {
                continue;
            };
            let new = !before.iter().any(|b| b.type_ == condition.type_);
            let at_rest = matches!(
                reason,
                Reason::NotPaused
                    | Reason::NotDeleting
                    | Reason::NotScalingUp
                    | Reason::NotScalingDown
                    | Reason::NoWorkers
            );
            if unchanged || (new && at_rest) {
                continue;
            }
            self.publish(
                object,
                reason,
                format!("{}: {}", condition.type_, condition.message),
            )
            .await;
        }
    }

    /// What `error_policy` does: count the failure, then come back as the
    /// error asks — after the object's next backoff delay, after a
    /// provider's retry-after, or on the next change.
    pub fn error_action(&self, controller: &'static str, uid: &str, error: &Error) -> Action {
        self.metrics.failure(controller, error.metric_label());
        tracing::warn!(
            controller,
            error = error as &dyn std::error::Error,
            "reconcile failed"
        );
        match error.retry() {
            Retry::Backoff => Action::requeue(self.backoff.next(uid)),
            Retry::After(delay) => Action::requeue(delay),
            Retry::OnChange => Action::requeue(super::outcome::RESYNC),
        }
    }

    /// Forgets an object's failures after a reconcile without error.
    pub fn succeeded(&self, uid: &str) {
        self.backoff.reset(uid);
    }
}
