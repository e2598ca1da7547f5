//! Rollouts: each instance carries the pool's revision (a digest of the
//! version, bootstrap config and provider config it was made from) from
//! the reconcile that first saw it. When the revision changes, a provider
//! that removes chosen instances (`pool-machines`) has the old ones
//! replaced the way CAPZ's AzureMachinePool rolls: up to `maxSurge` new
//! instances beyond the replicas, then old ones drained and removed (their
//! Machines deleted) while no fewer than the replicas less `maxUnavailable`
//! have a Ready Node.

use std::collections::BTreeSet;

use serde_json::json;
use sha2::Digest as _;

use crate::api::MachinePool;
use crate::api::provider::{DeletePolicy, InstanceStatus, RollingUpdate, WasmMachinePool};
use crate::controllers::machinepool::ready_since;
use crate::workload::Nodes;

use super::machines::up;

/// The pool's revision: what its new instances are made from. The
/// bootstrap config counts by reference (a new config, or data Secret,
/// rolls; the data itself does not, as it changes with every token).
pub fn revision(config: &str, machine_pool: &MachinePool) -> String {
    let template = &machine_pool.spec.template.spec;
    let bootstrap = template.bootstrap.config_ref.as_ref().map_or_else(
        || json!(template.bootstrap.data_secret_name),
        |r| json!([r.api_group, r.kind, r.name]),
    );
    digest(&json!({
        "config": config,
        "version": template.version,
        "bootstrap": bootstrap,
    }))
}

/// 16 hex digits of a sha256 over `value`: a revision of what it holds.
pub fn digest(value: &serde_json::Value) -> String {
    let digest = sha2::Sha256::digest(value.to_string().as_bytes());
    hex::encode(digest).chars().take(16).collect()
}

/// Gives each of `instances` the revision `recorded` has for it; one that
/// has none yet (new, or made before revisions were kept) gets `current`.
pub fn stamp(instances: &mut [InstanceStatus], recorded: &[InstanceStatus], current: &str) {
    for instance in instances {
        let kept = recorded
            .iter()
            .find(|r| r.id == instance.id)
            .and_then(|r| r.revision.clone());
        instance.revision = Some(kept.unwrap_or_else(|| current.to_owned()));
    }
}

/// Whether `instance` was made from revision `current`.
pub fn up_to_date(instance: &InstanceStatus, current: &str) -> bool {
    instance.revision.as_deref().is_none_or(|r| r == current)
}

/// What one reconcile does about the pool's size and its old instances.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The instances to ask the provider for.
    pub asked: u32,
    /// How many of the instances staying to remove now (by their Machines).
    pub goes: usize,
    /// The ids of instances up and staying that are not up to date.
    pub out_of_date: BTreeSet<String>,
}

impl Plan {
    /// For a provider that removes no chosen instance: `replicas` asked,
    /// none removed here, the old instances only counted.
    pub fn as_asked(recorded: &[InstanceStatus], current: &str, replicas: u32) -> Self {
        Self {
            asked: replicas,
            goes: 0,
            out_of_date: out_of_date(recorded.iter().filter(|i| up(i)), current),
        }
    }
}

/// The ids of `instances` that are not up to date.
fn out_of_date<'a>(
    instances: impl Iterator<Item = &'a InstanceStatus>,
    current: &str,
) -> BTreeSet<String> {
    instances
        .filter(|i| !up_to_date(i, current))
        .map(|i| i.id.clone())
        .collect()
}

/// The plan for `recorded` instances, `going` the ids of those whose
/// Machine (or WasmMachine) is being deleted, `replicas` wanted.
pub fn plan(
    pool: &WasmMachinePool,
    recorded: &[InstanceStatus],
    going: &BTreeSet<String>,
    nodes: Option<&Nodes>,
    current: &str,
    replicas: u32,
) -> Plan {
    let up_count = recorded.iter().filter(|i| up(i)).count();
    let staying: Vec<&InstanceStatus> = recorded
        .iter()
        .filter(|i| up(i) && !going.contains(&i.id))
        .collect();
    let out_of_date = out_of_date(staying.iter().copied(), current);
    let wanted = usize::try_from(replicas).unwrap_or(usize::MAX);
    let never_fewer = |asked: usize| u32::try_from(asked.max(up_count)).unwrap_or(u32::MAX);
    if out_of_date.is_empty() {
        return Plan {
            asked: never_fewer(wanted),
            goes: staying.len().saturating_sub(wanted),
            out_of_date,
        };
    }
    let strategy = pool.spec.strategy.as_ref();
    let (surge, unavailable) =
        RollingUpdate::bounds(strategy.and_then(|s| s.rolling_update.as_ref()), replicas);
    let surge = usize::try_from(surge).unwrap_or(usize::MAX);
    let unavailable = usize::try_from(unavailable).unwrap_or(usize::MAX);
    // New instances up to the replicas, with no more than `surge` beyond
    // them in all (those going count until they are gone).
    let ceiling = wanted.saturating_add(surge);
    let up_to_date_staying = staying.len() - out_of_date.len();
    let create = wanted
        .saturating_sub(up_to_date_staying)
        .min(ceiling.saturating_sub(up_count));
    // Old instances go while enough others have a Ready Node; those with a
    // Node that is not Ready go freely, but only when the Nodes are known
    // (an unreachable workload cluster removes nothing).
    let may_go = nodes.map_or(0, |nodes| {
        let ready = |i: &&&InstanceStatus| node_ready(nodes, &i.provider_id);
        let ready_count = staying.iter().filter(ready).count();
        let old_not_ready = staying
            .iter()
            .filter(|i| out_of_date.contains(&i.id) && !ready(i))
            .count();
        old_not_ready + ready_count.saturating_sub(wanted.saturating_sub(unavailable))
    });
    let goes = may_go
        .min(out_of_date.len())
        .max(staying.len().saturating_sub(ceiling));
    Plan {
        asked: never_fewer(up_count + create),
        goes,
        out_of_date,
    }
}

/// Whether the Node of `provider_id` is Ready.
fn node_ready(nodes: &Nodes, provider_id: &str) -> bool {
    nodes
        .by_provider_id(provider_id)
        .is_some_and(|n| ready_since(&n).is_some())
}

/// The rank of an instance among those that may go: out of date first, then
/// as the pool's `deletePolicy` says (a key sorting first goes first).
pub fn rank(pool: &WasmMachinePool, created: i64, name: &str) -> (i64, String) {
    let policy = pool
        .spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.delete_policy)
        .unwrap_or_default();
    match policy {
        DeletePolicy::Oldest => (created, name.to_owned()),
        DeletePolicy::Newest => (-created, name.to_owned()),
        // Random, yet the same on every pass: a digest of the name.
        DeletePolicy::Random => (0, hex::encode(sha2::Sha256::digest(name.as_bytes()))),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Node;

    use serde_json::json;

    use super::*;
    use crate::api::provider::InstanceState;

    fn instance(id: &str, revision: &str) -> InstanceStatus {
        InstanceStatus {
            id: id.into(),
            provider_id: format!("sim://r/{id}"),
            state: InstanceState::Running,
            revision: Some(revision.into()),
            ..InstanceStatus::default()
        }
    }

    /// Nodes of `ready` instances Ready, of `booting` ones not yet.
    fn nodes(ready: &[&str], booting: &[&str]) -> Nodes {
        let node = |id: &&str, status: &str| -> Arc<Node> {
            Arc::new(
                serde_json::from_value(json!({
                    "metadata": {"name": id},
                    "spec": {"providerID": format!("sim://r/{id}")},
                    "status": {"conditions": [{"type": "Ready", "status": status}]},
                }))
                .unwrap(),
            )
        };
        Nodes::new(
            ready
                .iter()
                .map(|id| node(id, "True"))
                .chain(booting.iter().map(|id| node(id, "False")))
                .collect(),
        )
    }

    fn pool(strategy: &serde_json::Value) -> WasmMachinePool {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"provider": "sim", "strategy": strategy},
        }))
        .unwrap()
    }

    fn planned(
        strategy: &serde_json::Value,
        instances: &[InstanceStatus],
        nodes: Option<&Nodes>,
    ) -> (u32, usize, usize) {
        let plan = plan(
            &pool(strategy),
            instances,
            &BTreeSet::new(),
            nodes,
            "new",
            3,
        );
        (plan.asked, plan.goes, plan.out_of_date.len())
    }

    #[test]
    fn a_rollout_surges_one_then_removes_an_old_instance_once_the_new_one_is_ready() {
        let old = ["a", "b", "c"].map(|id| instance(id, "old"));
        let all_ready = nodes(&["a", "b", "c"], &[]);
        assert_eq!(planned(&json!({}), &old, Some(&all_ready)), (4, 0, 3));
        let mut surged = old.to_vec();
        surged.push(instance("d", "new"));
        let booting = nodes(&["a", "b", "c"], &["d"]);
        assert_eq!(planned(&json!({}), &surged, Some(&booting)), (4, 0, 3));
        let ready = nodes(&["a", "b", "c", "d"], &[]);
        assert_eq!(planned(&json!({}), &surged, Some(&ready)), (4, 1, 3));
        // Unknown Nodes (an unreachable workload cluster): nothing goes.
        assert_eq!(planned(&json!({}), &surged, None), (4, 0, 3));
    }

    #[test]
    fn an_instance_going_counts_against_the_surge_until_it_is_gone() {
        let instances = ["a", "b", "c"]
            .map(|id| instance(id, "old"))
            .into_iter()
            .chain([instance("d", "new")])
            .collect::<Vec<_>>();
        let going = BTreeSet::from(["a".to_owned()]);
        let ready = nodes(&["a", "b", "c", "d"], &[]);
        let plan = plan(
            &pool(&json!({})),
            &instances,
            &going,
            Some(&ready),
            "new",
            3,
        );
        assert_eq!((plan.asked, plan.goes), (4, 0));
    }

    #[test]
    fn without_surge_an_old_instance_goes_first_and_one_not_ready_goes_freely() {
        let strategy = json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}});
        let old = ["a", "b", "c"].map(|id| instance(id, "old"));
        let ready = nodes(&["a", "b", "c"], &[]);
        assert_eq!(planned(&strategy, &old, Some(&ready)), (3, 1, 3));
        let one_down = nodes(&["a", "b"], &["c"]);
        assert_eq!(planned(&json!({}), &old, Some(&one_down)), (4, 1, 3));
    }

    #[test]
    fn with_nothing_out_of_date_the_replicas_are_asked_and_the_rest_goes() {
        let current = ["a", "b", "c", "d"].map(|id| instance(id, "new"));
        assert_eq!(planned(&json!({}), &current, None), (4, 1, 0));
        assert_eq!(planned(&json!({}), &current[..2], None), (3, 0, 0));
    }

    #[test]
    fn bounds_default_resolve_percentages_and_are_never_both_zero() {
        let update = |v: serde_json::Value| serde_json::from_value::<RollingUpdate>(v).unwrap();
        assert_eq!(RollingUpdate::bounds(None, 10), (1, 0));
        let percent = update(json!({"maxSurge": "25%", "maxUnavailable": "25%"}));
        assert_eq!(RollingUpdate::bounds(Some(&percent), 10), (3, 2));
        let zero = update(json!({"maxSurge": 0, "maxUnavailable": "0%"}));
        assert_eq!(RollingUpdate::bounds(Some(&zero), 10), (1, 0));
    }

    #[test]
    fn the_revision_follows_the_version_config_and_bootstrap_reference_only() {
        let machine_pool = |version: &str, config: &str| -> MachinePool {
            serde_json::from_value(json!({
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"clusterName": "c", "replicas": 3, "template": {"spec": {
                    "clusterName": "c", "version": version,
                    "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "WasmBootstrapConfig", "name": config}, "dataSecretName": "data-1"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "WasmMachinePool", "name": "p"}}}},
            }))
            .unwrap()
        };
        let base = revision("{}", &machine_pool("v1.36.3", "a"));
        assert_eq!(base, revision("{}", &machine_pool("v1.36.3", "a")));
        assert_ne!(base, revision("{}", &machine_pool("v1.36.4", "a")));
        assert_ne!(base, revision("{}", &machine_pool("v1.36.3", "b")));
        assert_ne!(
            base,
            revision(r#"{"size":"m"}"#, &machine_pool("v1.36.3", "a"))
        );
        let mut scaled = machine_pool("v1.36.3", "a");
        scaled.spec.replicas = Some(7);
        scaled.spec.template.spec.bootstrap.data_secret_name = Some("data-2".into());
        assert_eq!(
            base,
            revision("{}", &scaled),
            "replicas and the data Secret do not roll"
        );
    }

    #[test]
    fn instances_keep_their_revision_and_new_ones_get_the_current() {
        let recorded = vec![instance("a", "old")];
        let mut fresh = vec![
            InstanceStatus {
                revision: None,
                ..instance("a", "")
            },
            InstanceStatus {
                revision: None,
                ..instance("b", "")
            },
        ];
        stamp(&mut fresh, &recorded, "new");
        assert_eq!(fresh[0].revision.as_deref(), Some("old"));
        assert_eq!(fresh[1].revision.as_deref(), Some("new"));
    }
}
