//! Which instances a pool has, which to launch and which to terminate:
//! pure functions over what EC2 lists.
//!
//! Each instance carries its ordinal in the [`tags::ORDINAL`] tag, set in
//! the call that launches it, and the pool's key in [`tags::POOL`]. Every
//! reconcile lists the pool by that tag first, so an instance launched just
//! before a crash is found, and its ordinal is not launched again, whatever
//! the host recorded. New instances take the lowest ordinals no listed
//! instance holds (terminating ones included); scaling down terminates
//! instances of unknown ordinal first, then the highest, so ordinals stay
//! dense and the oldest instances survive.
//!
//! What a node of the pool offers ([`node_shape`]) comes from its instance
//! type, as Cluster API's AWS provider reports it for scaling from zero.

use capwasm_provider_sdk::infrastructure::{NodeShape, PoolState};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{Address, AddressType, Instance, InstanceState};

use crate::ec2::model;
use crate::tags;

/// EC2 client tokens are at most 64 ASCII characters.
const MAX_CLIENT_TOKEN: usize = 64;

/// The EC2 states of instances a pool still has: all but `terminated`.
pub const LISTED_STATES: [&str; 5] = ["pending", "running", "shutting-down", "stopping", "stopped"];

/// The client token of ordinal `ordinal`: `<key>-<ordinal>`, the key cut
/// so that the ordinal always fits.
pub fn client_token(key: &str, ordinal: u32) -> String {
    let suffix = format!("-{ordinal}");
    let mut token: String = key
        .chars()
        .filter(char::is_ascii_graphic)
        .take(MAX_CLIENT_TOKEN - suffix.len())
        .collect();
    token.push_str(&suffix);
    token
}

/// The providerID of instance `id` in zone `zone`, as Cluster API's AWS
/// provider and the AWS cloud provider write them.
pub fn provider_id(zone: &str, id: &str) -> String {
    format!("aws:///{zone}/{id}")
}

/// The contract's state of an EC2 state name. A stopped instance will not
/// run again by itself: it counts as failed.
pub fn instance_state(ec2: &str) -> InstanceState {
    match ec2 {
        "pending" => InstanceState::Pending,
        "running" => InstanceState::Running,
        "shutting-down" | "terminated" => InstanceState::Terminating,
        _ => InstanceState::Failed,
    }
}

fn is_active(instance: &model::Instance) -> bool {
    !matches!(instance.state.as_str(), "shutting-down" | "terminated")
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Member {
    ordinal: Option<u32>,
    instance: model::Instance,
}

/// A pool's instances as EC2 lists them, each with the ordinal its tag
/// holds.
#[derive(Clone, Debug)]
pub struct Pool {
    key: String,
    members: Vec<Member>,
}

impl Pool {
    pub fn new(key: &str, listed: Vec<model::Instance>) -> Self {
        let members = listed
            .into_iter()
            .map(|instance| Member {
                ordinal: instance.tag(tags::ORDINAL).and_then(|o| o.parse().ok()),
                instance,
            })
            .collect();
        Self {
            key: key.to_owned(),
            members,
        }
    }

    fn active(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| is_active(&m.instance))
    }

    /// The ordinals to launch so that `desired` instances are active: the
    /// lowest that no listed instance holds.
    pub fn missing(&self, desired: u32) -> Vec<u32> {
        let wanted = usize::try_from(desired)
            .unwrap_or(usize::MAX)
            .saturating_sub(self.active().count());
        (0..=u32::MAX)
            .filter(|n| self.members.iter().all(|m| m.ordinal != Some(*n)))
            .take(wanted)
            .collect()
    }

    /// Adds an instance just launched with `ordinal`, or updates it if EC2
    /// answered with one already listed.
    pub fn launched(&mut self, ordinal: u32, instance: model::Instance) {
        match self
            .members
            .iter_mut()
            .find(|m| m.instance.id == instance.id)
        {
            Some(member) => member.instance = instance,
            None => self.members.push(Member {
                ordinal: Some(ordinal),
                instance,
            }),
        }
    }

    /// Active instances beyond `desired`, to terminate: those of unknown
    /// ordinal first, then the highest ordinals.
    pub fn surplus(&self, desired: u32) -> Vec<String> {
        let mut active: Vec<&Member> = self.active().collect();
        active.sort_by_key(|m| (m.ordinal.is_none(), m.ordinal));
        active
            .into_iter()
            .skip(usize::try_from(desired).unwrap_or(usize::MAX))
            .map(|m| m.instance.id.clone())
            .collect()
    }

    /// Every instance not yet shutting down, to terminate when the pool goes.
    pub fn all_active(&self) -> Vec<String> {
        self.active().map(|m| m.instance.id.clone()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Marks the instances `ids` as shutting down after a terminate.
    pub fn terminating(&mut self, ids: &[String]) {
        for member in self
            .members
            .iter_mut()
            .filter(|m| ids.contains(&m.instance.id))
        {
            "shutting-down".clone_into(&mut member.instance.state);
        }
    }

    /// The pool's state for the host: every listed instance, in ordinal
    /// order; ready when exactly `desired` are active and all of them run.
    /// Until the pool has settled, the host is asked to look again after
    /// `poll_seconds`.
    pub fn state(mut self, desired: u32, poll_seconds: u32) -> PoolState {
        self.members
            .sort_by_key(|m| (m.ordinal.is_none(), m.ordinal));
        let active: Vec<&Member> = self.active().collect();
        let ready = active.len() == usize::try_from(desired).unwrap_or(usize::MAX)
            && active.iter().all(|m| m.instance.state == "running");
        let settled = ready && self.members.iter().all(|m| is_active(&m.instance));
        let key = self.key;
        PoolState {
            instances: self
                .members
                .into_iter()
                .map(|m| to_instance(&key, m))
                .collect(),
            ready,
            requeue_after_seconds: (!settled).then_some(poll_seconds),
        }
    }
}

fn to_instance(key: &str, member: Member) -> Instance {
    let Member { ordinal, instance } = member;
    let addresses = [
        (AddressType::InternalIp, instance.private_ip),
        (AddressType::ExternalIp, instance.public_ip),
        (AddressType::InternalDns, instance.private_dns),
        (AddressType::ExternalDns, instance.public_dns),
    ]
    .into_iter()
    .filter_map(|(kind, address)| address.map(|address| Address { kind, address }))
    .collect();
    Instance {
        provider_id: instance
            .zone
            .as_deref()
            .map(|zone| provider_id(zone, &instance.id))
            .unwrap_or_default(),
        state: instance_state(&instance.state),
        failure_domain: instance.zone,
        addresses,
        request_token: ordinal.map(|n| client_token(key, n)),
        id: instance.id,
    }
}

/// Kubernetes' name of an EC2 architecture a Linux node runs on. `i386`
/// is left out: Kubernetes releases no node binaries for it, and the types
/// listing it list `x86_64` too. The `_mac` ones run macOS.
fn go_architecture(ec2: &str) -> Option<&'static str> {
    match ec2 {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    }
}

/// The architectures a node of `instance_type` may run, in EC2's order.
pub fn architectures(instance_type: &model::InstanceType) -> Vec<&'static str> {
    let mut found = Vec::new();
    for name in instance_type
        .architectures
        .iter()
        .filter_map(|a| go_architecture(a))
    {
        if !found.contains(&name) {
            found.push(name);
        }
    }
    found
}

/// Of the architectures a type offers, the one the pool's image runs
/// (`image`, EC2's name), else the first.
pub fn architecture(offered: &[&'static str], image: Option<&str>) -> Option<&'static str> {
    image
        .and_then(go_architecture)
        .filter(|a| offered.contains(a))
        .or_else(|| offered.first().copied())
}

/// A node of `instance_type` running on `architecture`: capacity as
/// Cluster API's AWS provider computes it (vCPUs, memory in MiB, NVIDIA
/// GPUs). No `pods`: the kubelet's maxPods comes from the bootstrap
/// config, which this provider does not see.
pub fn node_shape(instance_type: &model::InstanceType, architecture: &str) -> NodeShape {
    let mut capacity = vec![
        ("cpu".to_owned(), instance_type.default_vcpus.to_string()),
        (
            "memory".to_owned(),
            format!("{}Mi", instance_type.memory_mib),
        ),
    ];
    let nvidia: u64 = instance_type
        .gpus
        .iter()
        .filter(|gpu| gpu.manufacturer.eq_ignore_ascii_case("NVIDIA"))
        .map(|gpu| u64::from(gpu.count))
        .sum();
    if nvidia > 0 {
        capacity.push(("nvidia.com/gpu".to_owned(), nvidia.to_string()));
    }
    NodeShape {
        capacity,
        architecture: architecture.to_owned(),
        // The provider's nodes join with cloud-init's bootstrap data.
        operating_system: "linux".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "00000000-0000-4000-8000-000000000006";
    const POLL: u32 = 5;

    fn ec2(id: &str, ordinal: Option<u32>, state: &str) -> model::Instance {
        model::Instance {
            id: id.to_owned(),
            state: state.to_owned(),
            zone: Some("us-east-1a".to_owned()),
            private_ip: Some("10.0.0.4".to_owned()),
            public_ip: None,
            private_dns: Some("ip-10-0-0-4.ec2.internal".to_owned()),
            public_dns: None,
            tags: ordinal
                .map(|n| vec![(tags::ORDINAL.to_owned(), n.to_string())])
                .unwrap_or_default(),
        }
    }

    #[test]
    fn client_tokens_fit_64_characters_and_keep_the_ordinal() {
        assert_eq!(client_token(KEY, 3), format!("{KEY}-3"));
        let long = client_token(&"k".repeat(100), 12);
        assert_eq!(long.len(), 64);
        assert!(long.ends_with("k-12"));
        assert_eq!(client_token("a b\u{e9}c", 0), "abc-0");
    }

    #[test]
    fn provider_ids_are_capas() {
        assert_eq!(
            provider_id("us-east-1a", "i-0123456789abcdef0"),
            "aws:///us-east-1a/i-0123456789abcdef0"
        );
    }

    #[test]
    fn ec2_states_map_to_the_contracts() {
        assert_eq!(instance_state("pending"), InstanceState::Pending);
        assert_eq!(instance_state("running"), InstanceState::Running);
        assert_eq!(instance_state("shutting-down"), InstanceState::Terminating);
        assert_eq!(instance_state("terminated"), InstanceState::Terminating);
        assert_eq!(instance_state("stopping"), InstanceState::Failed);
        assert_eq!(instance_state("stopped"), InstanceState::Failed);
        assert_eq!(instance_state("rebooting?"), InstanceState::Failed);
    }

    #[test]
    fn missing_fills_the_lowest_free_ordinals() {
        let pool = Pool::new(
            KEY,
            vec![ec2("a", Some(0), "running"), ec2("c", Some(2), "running")],
        );
        assert_eq!(pool.missing(5), [1, 3, 4]);
        assert!(pool.missing(2).is_empty());
        assert!(Pool::new(KEY, Vec::new()).missing(0).is_empty());
    }

    #[test]
    fn missing_skips_ordinals_of_terminating_instances() {
        let pool = Pool::new(KEY, vec![ec2("a", Some(0), "shutting-down")]);
        assert_eq!(pool.missing(1), [1]);
    }

    #[test]
    fn instances_without_an_ordinal_count_but_go_first() {
        let pool = Pool::new(
            KEY,
            vec![
                ec2("c", Some(2), "running"),
                ec2("x", None, "running"),
                ec2("a", Some(0), "running"),
                ec2("b", Some(1), "pending"),
            ],
        );
        assert!(pool.missing(4).is_empty());
        assert_eq!(pool.surplus(2), ["c", "x"]);
        assert_eq!(pool.surplus(1), ["b", "c", "x"]);
        assert!(pool.surplus(4).is_empty());
    }

    #[test]
    fn launched_adds_new_instances_and_updates_listed_ones() {
        let mut pool = Pool::new(KEY, vec![ec2("a", Some(0), "pending")]);
        pool.launched(0, ec2("a", Some(0), "running"));
        pool.launched(1, ec2("b", None, "pending"));
        let state = pool.state(2, POLL);
        let tokens: Vec<_> = state
            .instances
            .iter()
            .map(|i| i.request_token.clone())
            .collect();
        assert_eq!(
            tokens,
            [Some(client_token(KEY, 0)), Some(client_token(KEY, 1))]
        );
        assert_eq!(state.instances[0].state, InstanceState::Running);
        assert!(!state.ready);
    }

    #[test]
    fn state_is_ready_and_settled_when_desired_instances_run() {
        let pool = Pool::new(
            KEY,
            vec![ec2("b", Some(1), "running"), ec2("a", Some(0), "running")],
        );
        let state = pool.state(2, POLL);
        assert!(state.ready);
        assert_eq!(state.requeue_after_seconds, None);
        let first = &state.instances[0];
        assert_eq!(first.id, "a");
        assert_eq!(first.provider_id, "aws:///us-east-1a/a");
        assert_eq!(first.failure_domain.as_deref(), Some("us-east-1a"));
        let kinds: Vec<_> = first.addresses.iter().map(|a| a.kind).collect();
        assert_eq!(kinds, [AddressType::InternalIp, AddressType::InternalDns]);
    }

    #[test]
    fn state_waits_while_instances_start_stop_or_terminate() {
        let starting = Pool::new(KEY, vec![ec2("a", Some(0), "pending")]).state(1, POLL);
        assert!(!starting.ready);
        assert_eq!(starting.requeue_after_seconds, Some(POLL));

        let stopped = Pool::new(KEY, vec![ec2("a", Some(0), "stopped")]).state(1, POLL);
        assert!(!stopped.ready);
        assert_eq!(stopped.instances[0].state, InstanceState::Failed);

        let mut shrinking = Pool::new(
            KEY,
            vec![ec2("a", Some(0), "running"), ec2("b", Some(1), "running")],
        );
        let surplus = shrinking.surplus(1);
        shrinking.terminating(&surplus);
        let state = shrinking.state(1, POLL);
        assert!(state.ready);
        assert_eq!(state.requeue_after_seconds, Some(POLL));
        assert_eq!(state.instances[1].state, InstanceState::Terminating);
    }

    #[test]
    fn an_instance_without_a_zone_has_no_provider_id_yet() {
        let mut instance = ec2("a", Some(0), "pending");
        instance.zone = None;
        let state = Pool::new(KEY, vec![instance]).state(1, POLL);
        assert_eq!(state.instances[0].provider_id, "");
        assert_eq!(state.instances[0].failure_domain, None);
    }

    fn instance_type(architectures: &[&str], gpus: &[(&str, u32)]) -> model::InstanceType {
        model::InstanceType {
            name: "p3.8xlarge".to_owned(),
            default_vcpus: 32,
            memory_mib: 249_856,
            architectures: architectures.iter().map(|a| (*a).to_owned()).collect(),
            gpus: gpus
                .iter()
                .map(|(manufacturer, count)| model::Gpu {
                    manufacturer: (*manufacturer).to_owned(),
                    count: *count,
                })
                .collect(),
        }
    }

    #[test]
    fn node_shapes_count_vcpus_mebibytes_and_nvidia_gpus() {
        let shape = node_shape(
            &instance_type(&["x86_64"], &[("NVIDIA", 4), ("AMD", 2), ("NVIDIA", 1)]),
            "amd64",
        );
        assert_eq!(
            shape.capacity,
            [
                ("cpu".to_owned(), "32".to_owned()),
                ("memory".to_owned(), "249856Mi".to_owned()),
                ("nvidia.com/gpu".to_owned(), "5".to_owned()),
            ]
        );
        assert_eq!(
            (shape.architecture.as_str(), shape.operating_system.as_str()),
            ("amd64", "linux")
        );
        let shape = node_shape(&instance_type(&["arm64"], &[("AMD", 1)]), "arm64");
        assert_eq!(
            shape
                .capacity
                .iter()
                .map(|(name, _)| name.as_str())
                .collect::<Vec<_>>(),
            ["cpu", "memory"]
        );
    }

    #[test]
    fn architectures_are_go_names_of_what_a_linux_node_runs() {
        assert_eq!(
            architectures(&instance_type(&["i386", "x86_64"], &[])),
            ["amd64"]
        );
        assert_eq!(architectures(&instance_type(&["arm64"], &[])), ["arm64"]);
        assert!(architectures(&instance_type(&["x86_64_mac"], &[])).is_empty());
        let both = ["arm64", "amd64"];
        assert_eq!(architecture(&both, None), Some("arm64"));
        assert_eq!(architecture(&both, Some("x86_64")), Some("amd64"));
        // An image the type cannot run does not decide.
        assert_eq!(architecture(&["arm64"], Some("x86_64")), Some("arm64"));
        assert_eq!(architecture(&[], Some("x86_64")), None);
    }
}
