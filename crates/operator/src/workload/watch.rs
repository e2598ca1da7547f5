//! The watch on one workload cluster's Nodes: a watcher feeding a reflector
//! store, its state for callers, and the events for the controllers.
//!
//! After any failure but a 410 Gone (which the watcher recovers from by
//! listing again on its own) the watcher is dropped and, after a backoff,
//! started afresh. Every start therefore begins with a list, so the first
//! successful list after a failure is what says the cluster is reachable
//! again: kube's watcher resumes a watch silently, which would leave the
//! failure standing until some Node happened to change.
//!
//! A cluster with more Nodes than [`Settings::max_nodes`] fails the same
//! way, as soon as the list or the watch goes past the bound.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::watcher::{self, DefaultBackoff, Event};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

use super::cluster::{ClusterKey, NodeEvent};
use super::error::{Error, WatchFailure};
use super::nodes::{self, Nodes};
use super::settings::Settings;

/// Nodes per list request (kube's default is 500): a page of honest Nodes
/// stays well inside the bounds on a response (`bounded.rs`), and a
/// cluster of 10,000 Nodes lists in 200 requests.
pub(super) const PAGE_SIZE: u32 = 50;

/// The state of a watch, as callers of `nodes()` see it.
#[derive(Clone, Debug)]
enum State {
    /// No list has completed yet, and no attempt has failed.
    Listing,
    /// The last list completed and nothing has failed since.
    Synced,
    /// The last attempt failed; the store keeps what the last list saw.
    Failed(Arc<WatchFailure>),
}

/// A running watch on one cluster's Nodes. Dropping it stops the task.
pub(super) struct NodeWatch {
    cluster: ClusterKey,
    store: Store<Node>,
    state: watch::Receiver<State>,
    task: JoinHandle<()>,
}

impl NodeWatch {
    /// Starts watching the Nodes `client` sees, sending changes to `events`,
    /// with the watch timeout and Node bound of `settings`.
    pub(super) fn start(
        cluster: ClusterKey,
        client: kube::Client,
        settings: &Settings,
        events: mpsc::UnboundedSender<NodeEvent>,
    ) -> Self {
        let (store, writer) = reflector::store();
        let (state_tx, state) = watch::channel(State::Listing);
        let config = watcher::Config::default()
            .timeout(u32::try_from(settings.watch_timeout.as_secs()).unwrap_or(u32::MAX))
            .page_size(PAGE_SIZE);
        let task = Task {
            cluster: cluster.clone(),
            api: Api::all(client),
            config,
            max_nodes: settings.max_nodes,
            writer,
            reader: store.clone(),
            state: state_tx,
            events,
        };
        let span = tracing::info_span!("node_watch", cluster = %cluster);
        let task = tokio::spawn(task.run().instrument(span));
        Self {
            cluster,
            store,
            state,
            task,
        }
    }

    /// The Nodes, once the first list has completed. Waits at most `bound`
    /// for that; fails at once if the last attempt failed.
    pub(super) async fn nodes(&self, bound: Duration) -> Result<Nodes, Error> {
        let mut state = self.state.clone();
        let waited = tokio::time::timeout(
            bound,
            state.wait_for(|state| !matches!(state, State::Listing)),
        )
        .await;
        let current = match waited {
            Err(_elapsed) => {
                return Err(Error::NodeListTimeout {
                    cluster: self.cluster.clone(),
                    waited: bound,
                });
            }
            Ok(Err(_closed)) => {
                return Err(Error::WatchStopped {
                    cluster: self.cluster.clone(),
                });
            }
            Ok(Ok(seen)) => State::clone(&seen),
        };
        match current {
            State::Failed(source) => Err(Error::Unreachable {
                cluster: self.cluster.clone(),
                source,
            }),
            State::Synced | State::Listing => Ok(Nodes::new(self.store.state())),
        }
    }
}

impl Drop for NodeWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the spawned task owns.
struct Task {
    cluster: ClusterKey,
    api: Api<Node>,
    config: watcher::Config,
    max_nodes: usize,
    writer: Writer<Node>,
    reader: Store<Node>,
    state: watch::Sender<State>,
    events: mpsc::UnboundedSender<NodeEvent>,
}

/// Bookkeeping of one relist, between `Init` and `InitDone`.
#[derive(Default)]
struct Relist {
    /// Nodes listed so far, counted as they come (a name listed twice is
    /// held twice until the list is done).
    listed: usize,
    /// Names listed so far.
    seen: HashSet<String>,
    /// Events for listed Nodes that are new or changed, sent once the store
    /// holds the new list.
    pending: Vec<NodeEvent>,
}

impl Task {
    async fn run(mut self) {
        // client-go's reflector parameters; they reset after 120 s without failure.
        let mut backoff = DefaultBackoff::default();
        loop {
            if let Some(error) = self.watch_until_failure().await {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "watching the workload cluster's Nodes failed"
                );
                self.state.send_replace(State::Failed(Arc::new(error)));
            }
            let delay = backoff.next().unwrap_or(Duration::from_secs(30));
            tokio::time::sleep(delay).await;
        }
    }

    /// Runs one watcher from its first list until it fails (or, which it
    /// is not meant to do, ends).
    async fn watch_until_failure(&mut self) -> Option<WatchFailure> {
        let stream = watcher::watcher(self.api.clone(), self.config.clone())
            .map(|event| event.map(|event| event.modify(nodes::strip)));
        let mut stream = std::pin::pin!(stream);
        let mut relist = Relist::default();
        loop {
            match stream.next().await {
                Some(Ok(event)) => {
                    if let Err(failure) = self.apply(&event, &mut relist) {
                        // Drops the part of a list held for the store.
                        self.writer.apply_watcher_event(&Event::Init);
                        return Some(failure);
                    }
                }
                // The watcher lists again by itself, and the store keeps serving the old list meanwhile.
                Some(Err(error)) if is_gone(&error) => {
                    tracing::debug!(
                        error = &error as &dyn std::error::Error,
                        "Node watch expired, listing again"
                    );
                }
                Some(Err(error)) => return Some(WatchFailure::Watcher(error)),
                None => return None,
            }
        }
    }

    /// Applies `event` to the store and sends what changed, unless it would
    /// take the cluster past its Node bound.
    fn apply(&mut self, event: &Event<Node>, relist: &mut Relist) -> Result<(), WatchFailure> {
        let too_many = WatchFailure::TooManyNodes {
            limit: self.max_nodes,
        };
        match event {
            Event::Init => {
                *relist = Relist::default();
                self.writer.apply_watcher_event(event);
            }
            Event::InitApply(node) => {
                relist.listed += 1;
                if relist.listed > self.max_nodes {
                    return Err(too_many);
                }
                if let Some(name) = &node.metadata.name {
                    relist.seen.insert(name.clone());
                }
                if self.is_news(node) {
                    relist.pending.push(self.event_for(node));
                }
                self.writer.apply_watcher_event(event);
            }
            Event::InitDone => {
                // Nodes the new list lacks were deleted while no watch ran.
                let gone: Vec<NodeEvent> = self
                    .reader
                    .state()
                    .iter()
                    .filter(|node| {
                        node.metadata
                            .name
                            .as_ref()
                            .is_some_and(|name| !relist.seen.contains(name))
                    })
                    .map(|node| self.event_for(node))
                    .collect();
                self.writer.apply_watcher_event(event);
                let nodes = self.reader.len();
                match self.state.send_replace(State::Synced) {
                    State::Listing => tracing::info!(nodes, "listed the workload cluster's Nodes"),
                    State::Failed(_) => tracing::info!(
                        nodes,
                        "listed the workload cluster's Nodes again after a failure"
                    ),
                    State::Synced => {
                        tracing::debug!(nodes, "listed the workload cluster's Nodes again");
                    }
                }
                for event in std::mem::take(&mut relist.pending).into_iter().chain(gone) {
                    self.send(event);
                }
            }
            Event::Apply(node) => {
                let cached = self.reader.get(&ObjectRef::from_obj(node)).is_some();
                if !cached && self.reader.len() >= self.max_nodes {
                    return Err(too_many);
                }
                let news = self.is_news(node);
                self.writer.apply_watcher_event(event);
                if news {
                    self.send(self.event_for(node));
                }
            }
            Event::Delete(node) => {
                self.writer.apply_watcher_event(event);
                self.send(self.event_for(node));
            }
        }
        Ok(())
    }

    /// Whether `node` is new to the store or differs from its cached copy.
    fn is_news(&self, node: &Node) -> bool {
        self.reader
            .get(&ObjectRef::from_obj(node))
            .is_none_or(|cached| nodes::changed(&cached, node))
    }

    fn event_for(&self, node: &Node) -> NodeEvent {
        NodeEvent {
            cluster: self.cluster.clone(),
            node_name: node.metadata.name.clone().unwrap_or_default(),
            provider_id: nodes::provider_id(node).map(str::to_owned),
        }
    }

    fn send(&self, event: NodeEvent) {
        // The receiver is gone only when the controllers stopped; the cache is still served.
        if self.events.send(event).is_err() {
            tracing::trace!("no receiver for Node events");
        }
    }
}

/// 410 Gone: the watch's resourceVersion expired.
fn is_gone(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::WatchError(status) if status.code == 410)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(name: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    /// A task whose client never reaches a server: `apply` makes no request.
    fn task(max_nodes: usize) -> Task {
        let service = tower::service_fn(|_: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("no server"))
        });
        let (reader, writer) = reflector::store();
        let (state, _) = watch::channel(State::Listing);
        let (events, _) = mpsc::unbounded_channel();
        Task {
            cluster: ClusterKey::new("ns".to_owned(), "c".to_owned()),
            api: Api::all(kube::Client::new(service, "default")),
            config: watcher::Config::default(),
            max_nodes,
            writer,
            reader,
            state,
            events,
        }
    }

    fn list(task: &mut Task, relist: &mut Relist, names: &[&str]) -> Result<(), WatchFailure> {
        task.apply(&Event::Init, relist)?;
        for name in names {
            task.apply(&Event::InitApply(node(name)), relist)?;
        }
        task.apply(&Event::InitDone, relist)
    }

    #[tokio::test]
    async fn list_fails_at_the_first_node_past_the_bound() {
        let mut task = task(2);
        let mut relist = Relist::default();

        let failure = list(&mut task, &mut relist, &["a", "b", "c", "d"]).unwrap_err();

        assert!(matches!(failure, WatchFailure::TooManyNodes { limit: 2 }));
        assert_eq!(relist.listed, 3);
        assert_eq!(
            failure.to_string(),
            "it has more than 2 Nodes, the most the operator watches in one cluster"
        );
    }

    #[tokio::test]
    async fn watched_node_past_the_bound_fails_and_is_not_cached() {
        let mut task = task(2);
        let mut relist = Relist::default();
        list(&mut task, &mut relist, &["a", "b"]).unwrap();

        task.apply(&Event::Apply(node("a")), &mut relist).unwrap();
        let failure = task
            .apply(&Event::Apply(node("c")), &mut relist)
            .unwrap_err();

        assert!(matches!(failure, WatchFailure::TooManyNodes { limit: 2 }));
        assert_eq!(task.reader.len(), 2);
        task.apply(&Event::Delete(node("b")), &mut relist).unwrap();
        task.apply(&Event::Apply(node("c")), &mut relist).unwrap();
        assert_eq!(task.reader.len(), 2);
    }
}
