//! Shards: when one replica is not enough, N processes each reconcile the
//! Clusters a stable hash of `namespace/name` assigns them, and every object
//! of a Cluster (its pools, provider objects, Secrets, Nodes) follows it.
//! Each shard is leader-elected on a Lease of its own ([`crate::leader`]),
//! so no two processes ever write one object.
//!
//! The hash is the first eight bytes of the SHA-256 of `namespace/name`,
//! big-endian, modulo N: anyone can work out which shard holds a Cluster
//! (`printf %s ns/name | sha256sum`), and it never changes with a release.
//! Objects that belong to no Cluster yet (a provider object its owner has
//! not adopted) are cached by every shard, since the owner's shard must
//! find them, and reconciled by shard 0 only. ProviderModules are loaded by
//! every shard (each runs guests) and written by shard 0 only: a canary is
//! judged by each shard on its own calls, and the status shows shard 0's.

use kube::ResourceExt as _;
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use sha2::{Digest as _, Sha256};

use crate::api::{
    Cluster, Machine, MachinePool, WasmBootstrapConfig, WasmCluster, WasmControlPlane, WasmMachine,
    WasmMachinePool, labels,
};

/// Which share of the fleet this process reconciles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    index: u32,
    count: u32,
}

/// A shard that cannot be.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// No shards at all.
    #[error("--shards must be at least 1")]
    NoShards,
    /// An index past the last shard.
    #[error(
        "--shard-index {index} does not fit --shards {count}: shards are numbered 0 to {last}",
        last = count - 1
    )]
    IndexTooHigh {
        /// The index given.
        index: u32,
        /// The shard count given.
        count: u32,
    },
}

/// What a shard does with an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Reconciles and writes it.
    Owner,
    /// Runs its phases for their effect on this process (a module loaded
    /// into its runtime), writes nothing.
    Reader,
    /// Leaves it to another shard.
    Other,
}

impl Default for Shard {
    fn default() -> Self {
        Self::ALL
    }
}

impl Shard {
    /// The one shard of an unsharded operator.
    pub const ALL: Self = Self { index: 0, count: 1 };

    /// Shard `index` of `count`.
    pub fn new(index: u32, count: u32) -> Result<Self, ShardError> {
        if count == 0 {
            return Err(ShardError::NoShards);
        }
        if index >= count {
            return Err(ShardError::IndexTooHigh { index, count });
        }
        Ok(Self { index, count })
    }

    /// Its index, from 0.
    pub fn index(self) -> u32 {
        self.index
    }

    /// How many shards there are.
    pub fn count(self) -> u32 {
        self.count
    }

    /// Whether the objects of Cluster `name` in `namespace` are this shard's.
    pub fn owns_cluster(self, namespace: &str, name: &str) -> bool {
        self.count == 1 || of(namespace, name, self.count) == self.index
    }

    /// Whether this shard writes what belongs to no Cluster.
    pub fn writes_shared(self) -> bool {
        self.index == 0
    }

    /// Whether this shard caches `object`: its own, and those of no Cluster yet.
    pub fn keeps<K: OfCluster>(self, object: &K) -> bool {
        self.owns(object).unwrap_or(true)
    }

    /// What this shard does with `object`: those of no Cluster yet are
    /// shard 0's to reconcile.
    pub fn role<K: OfCluster>(self, object: &K) -> Role {
        if self.owns(object).unwrap_or_else(|| self.writes_shared()) {
            Role::Owner
        } else {
            Role::Other
        }
    }

    /// Whether `object`'s Cluster is this shard's; `None` if it names none yet.
    fn owns<K: OfCluster>(self, object: &K) -> Option<bool> {
        let cluster = object.cluster_name()?;
        Some(self.owns_cluster(&object.namespace().unwrap_or_default(), cluster))
    }

    /// What this shard does with an object every shard needs.
    pub fn role_shared(self) -> Role {
        if self.writes_shared() {
            Role::Owner
        } else {
            Role::Reader
        }
    }
}

/// The shard of Cluster `namespace/name` among `count`.
pub fn of(namespace: &str, name: &str, count: u32) -> u32 {
    let digest = Sha256::new()
        .chain_update(namespace)
        .chain_update("/")
        .chain_update(name)
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let count = u64::from(count.max(1));
    // Below `count`, which is a u32.
    u32::try_from(u64::from_be_bytes(first) % count).unwrap_or_default()
}

/// An object that belongs to a Cluster, in its namespace.
pub trait OfCluster: kube::Resource {
    /// The Cluster's name, if the object names one yet.
    fn cluster_name(&self) -> Option<&str>;
}

impl OfCluster for Cluster {
    fn cluster_name(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }
}

impl OfCluster for MachinePool {
    fn cluster_name(&self) -> Option<&str> {
        Some(&self.spec.cluster_name)
    }
}

impl OfCluster for Machine {
    fn cluster_name(&self) -> Option<&str> {
        Some(&self.spec.cluster_name)
    }
}

/// Objects a Cluster's controllers label with its name when they adopt or
/// create them.
macro_rules! labelled {
    ($($kind:ty),*) => {$(
        impl OfCluster for $kind {
            fn cluster_name(&self) -> Option<&str> {
                self.labels().get(labels::CLUSTER_NAME).map(String::as_str)
            }
        }
    )*};
}

labelled!(
    WasmMachine,
    WasmBootstrapConfig,
    WasmMachinePool,
    WasmCluster,
    WasmControlPlane,
    DynamicObject,
    PartialObjectMeta<k8s_openapi::api::core::v1::Secret>
);

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use capwasm_api::testing::MachinePoolBuilder;

    #[test]
    fn a_shard_that_does_not_fit_is_refused_saying_why() {
        assert_eq!(Shard::new(0, 0), Err(ShardError::NoShards));
        let error = Shard::new(3, 3).unwrap_err();
        assert_eq!(error, ShardError::IndexTooHigh { index: 3, count: 3 });
        assert_eq!(
            error.to_string(),
            "--shard-index 3 does not fit --shards 3: shards are numbered 0 to 2"
        );
        assert!(Shard::new(2, 3).is_ok());
    }

    #[test]
    fn the_hash_is_the_sha256_of_namespace_and_name() {
        // printf %s ns/c1 | sha256sum: 2b726ab7ba6f7660…, and so on: the
        // shard of a Cluster never changes with a release.
        assert_eq!((of("ns", "c1", 3), of("ns", "c1", 7)), (0, 1));
        assert_eq!((of("fleet", "c42", 3), of("fleet", "c42", 7)), (1, 6));
        assert_eq!(
            (of("default", "prod-eu", 3), of("default", "prod-eu", 7)),
            (0, 5)
        );
        assert_eq!(of("ns", "c1", 1), 0);
    }

    #[test]
    fn every_cluster_has_exactly_one_shard_and_they_are_spread() {
        let shards: Vec<Shard> = (0..3).map(|i| Shard::new(i, 3).unwrap()).collect();
        let mut per_shard = [0usize; 3];
        for n in 0..3000 {
            let name = format!("c{n}");
            let owners: Vec<u32> = shards
                .iter()
                .filter(|s| s.owns_cluster("fleet", &name))
                .map(|s| s.index())
                .collect();
            assert_eq!(owners.len(), 1, "{name}: {owners:?}");
            per_shard[owners[0] as usize] += 1;
        }
        for count in per_shard {
            assert!((900..1100).contains(&count), "{per_shard:?}");
        }
    }

    #[test]
    fn a_pool_follows_its_cluster_and_an_unadopted_object_is_everyones_to_read() {
        let pool = MachinePoolBuilder::new("ns", "p", "c1").build();
        let owner = of("ns", "c1", 3);
        for index in 0..3 {
            let shard = Shard::new(index, 3).unwrap();
            let expected = if index == owner {
                Role::Owner
            } else {
                Role::Other
            };
            assert_eq!(shard.role(&pool), expected);
            assert_eq!(shard.keeps(&pool), index == owner);
        }
        let mut config = WasmBootstrapConfig::new(
            "b",
            crate::api::provider::WasmBootstrapConfigSpec::default(),
        );
        config.metadata.namespace = Some("ns".into());
        for index in 0..3 {
            let shard = Shard::new(index, 3).unwrap();
            assert!(shard.keeps(&config));
            let expected = if index == 0 { Role::Owner } else { Role::Other };
            assert_eq!(shard.role(&config), expected);
        }
        config.metadata.labels = Some(BTreeMap::from([(
            labels::CLUSTER_NAME.to_owned(),
            "c1".to_owned(),
        )]));
        for index in 0..3 {
            let shard = Shard::new(index, 3).unwrap();
            assert_eq!(shard.keeps(&config), index == owner);
        }
        assert_eq!(Shard::ALL.role(&config), Role::Owner);
        assert_eq!(Shard::new(1, 2).unwrap().role_shared(), Role::Reader);
        assert_eq!(Shard::ALL.role_shared(), Role::Owner);
    }
}
