//! Leader election on a `coordination.k8s.io` Lease: only the replica that
//! holds the Lease runs the controllers. A replica that loses it stops, so
//! that two never reconcile the same objects.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Where the Lease lives and who this replica is.
#[derive(Clone, Debug)]
pub struct Election {
    /// The Lease's namespace (the operator's own).
    pub namespace: String,
    /// The Lease's name.
    pub lease: String,
    /// This replica's identity (its pod name, say).
    pub identity: String,
    /// How long a Lease stays held without renewal.
    pub duration: Duration,
    /// How long before expiry the holder renews it.
    pub grace: Duration,
}

impl Election {
    /// The Lease `capwasm-leader` in `namespace`, held for 15 s and renewed 5 s before expiry.
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            lease: "capwasm-leader".into(),
            identity: identity.into(),
            duration: Duration::from_secs(15),
            grace: Duration::from_secs(5),
        }
    }
}

/// Why leadership could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Lease could not be read or created.
    #[error("cannot use Lease {namespace}/{lease}")]
    Lease {
        /// Its namespace.
        namespace: String,
        /// Its name.
        lease: String,
        /// The cause.
        #[source]
        source: LeaseManagerError,
    },
    /// The election task ended before this replica became leader.
    #[error("leader election stopped before this replica became the leader")]
    Stopped,
}

/// This replica holds the Lease until [`Leadership::release`] or until it is lost.
pub struct Leadership {
    leading: watch::Receiver<bool>,
    task: JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
}

/// Waits until this replica holds the Lease; it is renewed in the background.
pub async fn acquire(client: Client, election: &Election) -> Result<Leadership, Error> {
    let lease_error = |source| Error::Lease {
        namespace: election.namespace.clone(),
        lease: election.lease.clone(),
        source,
    };
    let manager = LeaseManagerBuilder::new(client, &election.lease)
        .with_namespace(&election.namespace)
        .with_identity(&election.identity)
        .with_duration(election.duration.as_secs().max(2))
        .with_grace(election.grace.as_secs().max(1))
        .with_field_manager("capwasm-leader-election")
        .build()
        .await
        .map_err(lease_error)?;
    let (mut leading, task) = manager.watch().await;
    tracing::info!(
        lease = election.lease,
        identity = election.identity,
        "waiting to become the leader"
    );
    leading
        .wait_for(|leading| *leading)
        .await
        .map_err(|_| Error::Stopped)?;
    tracing::info!(
        lease = election.lease,
        identity = election.identity,
        "became the leader"
    );
    Ok(Leadership { leading, task })
}

impl Leadership {
    /// Completes when the Lease is lost (another replica took it, or it could not be renewed).
    pub async fn lost(&mut self) {
        let _ = self.leading.wait_for(|leading| !*leading).await;
    }

    /// Gives the Lease up, so another replica can take over at once.
    pub async fn release(self) {
        drop(self.leading);
        match self.task.await {
            Ok(Ok(_)) => tracing::info!("released the leader Lease"),
            Ok(Err(error)) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                "cannot release the leader Lease"
            ),
            Err(error) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                "the leader election task failed"
            ),
        }
    }
}
