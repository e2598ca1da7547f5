//! Leader election on a `coordination.k8s.io` Lease: only the replica that
//! holds the Lease runs the controllers. A replica that loses it stops, so
//! that two never reconcile the same objects.
//!
//! A sharded operator has a Lease per shard, named for its index and the
//! shard count (`capwasm-shard-1-of-3`). Replicas of different shard counts
//! would split the fleet differently and write the same objects, so none
//! leads while a Lease of another count is held: a change of the count is
//! a hand-over, old shards out before new ones in.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt as _};
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::controllers::shard::Shard;

/// The Lease of an unsharded operator.
const LEADER_LEASE: &str = "capwasm-leader";
/// How often a replica looks again at Leases of another shard count.
const CONFLICT_POLL: Duration = Duration::from_secs(2);

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
    /// How many shards the Lease's replicas split the fleet into.
    pub shards: u32,
}

impl Election {
    /// The Lease `capwasm-leader` in `namespace`, held for 15 s and renewed 5 s before expiry.
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            lease: LEADER_LEASE.into(),
            identity: identity.into(),
            duration: Duration::from_secs(15),
            grace: Duration::from_secs(5),
            shards: 1,
        }
    }

    /// The Lease of `shard` ([`lease_name`]), otherwise as [`Election::new`].
    pub fn of_shard(
        namespace: impl Into<String>,
        identity: impl Into<String>,
        shard: Shard,
    ) -> Self {
        Self {
            lease: lease_name(shard),
            shards: shard.count(),
            ..Self::new(namespace, identity)
        }
    }
}

/// `capwasm-leader` for an unsharded operator, else `capwasm-shard-<index>-of-<count>`.
pub fn lease_name(shard: Shard) -> String {
    if shard.count() == 1 {
        LEADER_LEASE.into()
    } else {
        format!("capwasm-shard-{}-of-{}", shard.index(), shard.count())
    }
}

/// The shard count of one of our Leases, from its name.
fn shards_of(lease: &str) -> Option<u32> {
    if lease == LEADER_LEASE {
        return Some(1);
    }
    let (index, count) = lease.strip_prefix("capwasm-shard-")?.split_once("-of-")?;
    index.parse::<u32>().ok()?;
    count.parse().ok()
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

/// Waits until this replica holds the Lease and no replica of another
/// shard count holds one; it is renewed in the background.
pub async fn acquire(client: Client, election: &Election) -> Result<Leadership, Error> {
    loop {
        until_no_other_count(&client, election).await;
        let leadership = take(client.clone(), election).await?;
        // Another count's replica may have checked at the same moment.
        match other_count(&client, election).await {
            Ok(Some(other)) => {
                tracing::warn!(
                    lease = election.lease,
                    other,
                    "a replica of another shard count leads too: giving the Lease back"
                );
                leadership.release().await;
                // Apart, so that the two do not meet again.
                let apart = u64::from(std::process::id() % 2000);
                tokio::time::sleep(CONFLICT_POLL + Duration::from_millis(apart)).await;
            }
            _ => return Ok(leadership),
        }
    }
}

/// Waits while a Lease of another shard count is held.
async fn until_no_other_count(client: &Client, election: &Election) {
    let mut said = false;
    loop {
        match other_count(client, election).await {
            Ok(None) => return,
            Ok(Some(other)) => {
                if !said {
                    tracing::warn!(
                        lease = election.lease,
                        other,
                        "waiting: a replica of another shard count holds its Lease, and the two would split the fleet differently"
                    );
                    said = true;
                }
            }
            Err(kube::Error::Api(status)) if status.code == 403 => {
                tracing::warn!(
                    namespace = election.namespace,
                    "cannot list Leases (forbidden): not checking for replicas of another shard count"
                );
                return;
            }
            Err(error) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                "cannot list Leases; trying again"
            ),
        }
        tokio::time::sleep(CONFLICT_POLL).await;
    }
}

/// A held Lease of ours for another shard count: its name and holder.
async fn other_count(client: &Client, election: &Election) -> Result<Option<String>, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), &election.namespace);
    let now = Timestamp::now();
    Ok(leases
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find_map(|lease| {
            let name = lease.name_any();
            let count = shards_of(&name)?;
            let spec = lease.spec?;
            let holder = spec.holder_identity.filter(|h| !h.is_empty())?;
            let expires = spec
                .renew_time?
                .0
                .checked_add(SignedDuration::from_secs(i64::from(
                    spec.lease_duration_seconds.unwrap_or_default(),
                )));
            let held = expires.is_ok_and(|expires| expires > now);
            (count != election.shards && held).then(|| format!("{name} (held by {holder})"))
        }))
}

/// Waits until this replica holds the Lease.
async fn take(client: Client, election: &Election) -> Result<Leadership, Error> {
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
    // "became the leader" is the caller's to say, once what a leader is
    // judged by (its readiness) is in place.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_names_its_shard_and_the_count() {
        assert_eq!(lease_name(Shard::ALL), "capwasm-leader");
        let shard = Shard::new(1, 3).unwrap();
        assert_eq!(lease_name(shard), "capwasm-shard-1-of-3");
        assert_eq!(shards_of("capwasm-shard-1-of-3"), Some(3));
        assert_eq!(shards_of("capwasm-leader"), Some(1));
        for other in ["capwasm-shard-x-of-3", "capwasm-shard-1-of-", "some-lease"] {
            assert_eq!(shards_of(other), None, "{other}");
        }
    }
}
