//! The tags that identify the provider's resources. Every resource gets
//! them in the call that creates it, and is found again by them before
//! anything is created: they are the provider's only memory of what it
//! made, so a crash between two calls never makes a second of anything.

use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::ClusterInfo;

use crate::config::Config;

/// Keys under this prefix are the provider's own.
pub const PREFIX: &str = "capwasm.dev/";
/// `<namespace>/<name>` of the CAPI Cluster: on every resource.
pub const CLUSTER: &str = "capwasm.dev/cluster";
/// The pool's idempotency key: on its instances.
pub const POOL: &str = "capwasm.dev/pool";
/// An instance's ordinal within its pool: `0`, `1`, ...
pub const ORDINAL: &str = "capwasm.dev/ordinal";
/// The name consoles show.
pub const NAME: &str = "Name";

/// The value of [`CLUSTER`] for `cluster`.
pub fn cluster_value(cluster: &ClusterInfo) -> String {
    format!("{}/{}", cluster.namespace, cluster.name)
}

/// A resource name from `parts`: `capwasm-<part>-<part>...`.
pub fn name(parts: &[&str]) -> String {
    let mut name = String::from("capwasm");
    for part in parts {
        name.push('-');
        name.push_str(part);
    }
    name
}

/// The tags of a new resource: the config's, then the cluster tag, the
/// name and `own` (keys the config may not use, so none repeats).
pub fn for_resource(
    config: &Config,
    cluster: &str,
    name: String,
    own: &[(&str, String)],
) -> Vec<(String, String)> {
    let mut tags: Vec<(String, String)> = config
        .tags
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    tags.push((CLUSTER.to_owned(), cluster.to_owned()));
    tags.push((NAME.to_owned(), name));
    tags.extend(own.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    tags
}
