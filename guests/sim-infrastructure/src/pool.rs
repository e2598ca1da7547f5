//! Which instances a pool has, which to create and which to remove: pure
//! functions over what the host recorded and what the cloud lists.
//!
//! Each instance is created with request token `<idempotency-key>-<n>`,
//! where the ordinal `n` is the lowest not held by any instance the cloud
//! still lists. The token goes back to the host in `request-token`, so the
//! next call knows every instance's ordinal. After a crash between
//! creating an instance and the host recording it, the instance is listed
//! but unknown; the next call picks the same lowest free ordinal, sends the
//! same token, and the cloud answers with the existing instance instead of
//! creating a second one. Scaling down removes instances of unknown ordinal
//! first, then the highest ordinals, so ordinals stay dense.

use capwasm_provider_sdk::infrastructure::PoolState;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{Address, AddressType, Instance, InstanceState};

use crate::api::{SimInstance, SimState};

/// The request token for ordinal `n`.
pub fn request_token(key: &str, ordinal: u32) -> String {
    format!("{key}-{ordinal}")
}

fn ordinal_of(key: &str, token: &str) -> Option<u32> {
    token.strip_prefix(key)?.strip_prefix('-')?.parse().ok()
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Member {
    ordinal: Option<u32>,
    instance: SimInstance,
}

impl Member {
    fn active(&self) -> bool {
        self.instance.state != SimState::Terminating
    }
}

/// A pool's instances as the cloud lists them, each with its ordinal where
/// known.
#[derive(Clone, Debug)]
pub struct Pool {
    key: String,
    members: Vec<Member>,
}

impl Pool {
    /// Matches the listed instances with the ones the host recorded.
    pub fn new(key: &str, recorded: &[Instance], listed: Vec<SimInstance>) -> Self {
        let members = listed
            .into_iter()
            .map(|instance| {
                let ordinal = recorded
                    .iter()
                    .find(|r| r.id == instance.id)
                    .and_then(|r| r.request_token.as_deref())
                    .and_then(|token| ordinal_of(key, token));
                Member { ordinal, instance }
            })
            .collect();
        Self {
            key: key.to_owned(),
            members,
        }
    }

    /// Of `ids`, those the cloud lists as active, to terminate.
    pub fn active_of(&self, ids: &[String]) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| m.active() && ids.contains(&m.instance.id))
            .map(|m| m.instance.id.clone())
            .collect()
    }

    /// How many instances are not terminating.
    pub fn active_count(&self) -> usize {
        self.members.iter().filter(|m| m.active()).count()
    }

    /// The ordinal to create next, while fewer than `desired` instances are
    /// active: the lowest one no listed instance holds.
    pub fn next_ordinal(&self, desired: u32) -> Option<u32> {
        if self.active_count() >= usize::try_from(desired).unwrap_or(usize::MAX) {
            return None;
        }
        (0..=u32::MAX).find(|n| self.members.iter().all(|m| m.ordinal != Some(*n)))
    }

    /// Records what the cloud answered to a create with ordinal `ordinal`:
    /// a new instance, or one already listed that the token identifies.
    pub fn created(&mut self, ordinal: u32, instance: SimInstance) {
        match self
            .members
            .iter_mut()
            .find(|m| m.instance.id == instance.id)
        {
            Some(member) => {
                member.ordinal = Some(ordinal);
                member.instance = instance;
            }
            None => self.members.push(Member {
                ordinal: Some(ordinal),
                instance,
            }),
        }
    }

    /// Active instances beyond `desired`, to terminate: those of unknown
    /// ordinal first, then the highest ordinals.
    pub fn surplus(&self, desired: u32) -> Vec<String> {
        let mut active: Vec<&Member> = self.members.iter().filter(|m| m.active()).collect();
        active.sort_by_key(|m| (m.ordinal.is_none(), m.ordinal));
        active
            .into_iter()
            .skip(usize::try_from(desired).unwrap_or(usize::MAX))
            .map(|m| m.instance.id.clone())
            .collect()
    }

    /// Marks instance `id` as terminating after a successful delete.
    pub fn terminating(&mut self, id: &str) {
        for member in self.members.iter_mut().filter(|m| m.instance.id == id) {
            member.instance.state = SimState::Terminating;
        }
    }

    /// The pool's state for the host: every listed instance, in ordinal
    /// order; ready when exactly `desired` are active and all of them run.
    /// Until the pool has settled, the host is asked to look again after
    /// `poll_seconds`.
    pub fn state(
        mut self,
        desired: u32,
        poll_seconds: u32,
        provider_id: impl Fn(&str) -> String,
    ) -> PoolState {
        self.members
            .sort_by_key(|m| (m.ordinal.is_none(), m.ordinal));
        let active: Vec<&Member> = self.members.iter().filter(|m| m.active()).collect();
        let ready = active.len() == usize::try_from(desired).unwrap_or(usize::MAX)
            && active.iter().all(|m| m.instance.state == SimState::Running);
        let settled = ready && self.members.iter().all(Member::active);
        let key = self.key;
        let instances = self
            .members
            .into_iter()
            .map(|m| to_instance(&key, m, &provider_id))
            .collect();
        PoolState {
            instances,
            ready,
            requeue_after_seconds: (!settled).then_some(poll_seconds),
        }
    }
}

fn to_instance(key: &str, member: Member, provider_id: &impl Fn(&str) -> String) -> Instance {
    let Member { ordinal, instance } = member;
    Instance {
        provider_id: if instance.provider_id.is_empty() {
            provider_id(&instance.id)
        } else {
            instance.provider_id
        },
        id: instance.id,
        state: match instance.state {
            SimState::Pending => InstanceState::Pending,
            SimState::Running => InstanceState::Running,
            SimState::Failed => InstanceState::Failed,
            SimState::Terminating => InstanceState::Terminating,
        },
        failure_domain: instance.failure_domain,
        addresses: instance
            .addresses
            .into_iter()
            .filter_map(|a| {
                let kind = match a.kind.as_str() {
                    "Hostname" => AddressType::Hostname,
                    "ExternalIP" => AddressType::ExternalIp,
                    "InternalIP" => AddressType::InternalIp,
                    "ExternalDNS" => AddressType::ExternalDns,
                    "InternalDNS" => AddressType::InternalDns,
                    _ => return None,
                };
                Some(Address {
                    kind,
                    address: a.address,
                })
            })
            .collect(),
        request_token: ordinal.map(|n| request_token(key, n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "uid-1234";
    const POLL: u32 = 7;

    fn sim(id: &str, state: SimState) -> SimInstance {
        SimInstance {
            id: id.to_owned(),
            provider_id: format!("sim://r/{id}"),
            pool: "ns/p".to_owned(),
            state,
            failure_domain: None,
            addresses: Vec::new(),
        }
    }

    fn recorded(id: &str, ordinal: u32) -> Instance {
        Instance {
            id: id.to_owned(),
            provider_id: format!("sim://r/{id}"),
            state: InstanceState::Running,
            failure_domain: None,
            addresses: Vec::new(),
            request_token: Some(request_token(KEY, ordinal)),
        }
    }

    fn pid(id: &str) -> String {
        format!("sim://r/{id}")
    }

    #[test]
    fn next_ordinal_fills_lowest_gap_until_desired_reached() {
        let pool = Pool::new(
            KEY,
            &[recorded("a", 0), recorded("c", 2)],
            vec![sim("a", SimState::Running), sim("c", SimState::Running)],
        );
        assert_eq!(pool.next_ordinal(3), Some(1));
        assert_eq!(pool.next_ordinal(2), None);
    }

    #[test]
    fn next_ordinal_skips_ordinals_held_by_terminating_instances() {
        let pool = Pool::new(
            KEY,
            &[recorded("a", 0)],
            vec![sim("a", SimState::Terminating)],
        );
        assert_eq!(pool.next_ordinal(1), Some(1));
    }

    #[test]
    fn created_adopts_an_unrecorded_instance_the_token_identifies() {
        // A crash lost the record of "b"; the cloud answers the retried
        // token with it instead of creating another.
        let mut pool = Pool::new(
            KEY,
            &[recorded("a", 0)],
            vec![sim("a", SimState::Running), sim("b", SimState::Pending)],
        );
        assert_eq!(pool.next_ordinal(3), Some(1));
        pool.created(1, sim("b", SimState::Pending));
        assert_eq!(pool.next_ordinal(3), Some(2));
        pool.created(2, sim("c", SimState::Pending));
        assert_eq!(pool.next_ordinal(3), None);
        let state = pool.state(3, POLL, pid);
        let tokens: Vec<_> = state
            .instances
            .iter()
            .map(|i| i.request_token.clone())
            .collect();
        assert_eq!(
            tokens,
            [0, 1, 2].map(|n| Some(request_token(KEY, n))).to_vec()
        );
    }

    #[test]
    fn surplus_removes_unknown_then_highest_ordinals() {
        let pool = Pool::new(
            KEY,
            &[recorded("a", 0), recorded("b", 1), recorded("c", 2)],
            vec![
                sim("c", SimState::Running),
                sim("x", SimState::Running),
                sim("a", SimState::Running),
                sim("b", SimState::Running),
            ],
        );
        assert_eq!(pool.surplus(2), ["c", "x"]);
        assert_eq!(pool.surplus(0), ["a", "b", "c", "x"]);
        assert!(pool.surplus(4).is_empty());
    }

    #[test]
    fn state_is_ready_when_desired_instances_run() {
        let pool = Pool::new(
            KEY,
            &[recorded("a", 0), recorded("b", 1)],
            vec![sim("a", SimState::Running), sim("b", SimState::Running)],
        );
        let state = pool.state(2, POLL, pid);
        assert!(state.ready);
        assert_eq!(state.requeue_after_seconds, None);
    }

    #[test]
    fn state_waits_while_instances_start_or_terminate() {
        let starting = Pool::new(KEY, &[], vec![sim("a", SimState::Pending)]).state(1, POLL, pid);
        assert!(!starting.ready);
        assert_eq!(starting.requeue_after_seconds, Some(POLL));

        let mut shrinking = Pool::new(
            KEY,
            &[recorded("a", 0), recorded("b", 1)],
            vec![sim("a", SimState::Running), sim("b", SimState::Running)],
        );
        for id in shrinking.surplus(1) {
            shrinking.terminating(&id);
        }
        let state = shrinking.state(1, POLL, pid);
        assert!(state.ready);
        assert_eq!(state.requeue_after_seconds, Some(POLL));
        assert_eq!(state.instances[1].state, InstanceState::Terminating);
    }

    #[test]
    fn only_listed_active_instances_are_removed() {
        let mut pool = Pool::new(
            KEY,
            &[recorded("a", 0), recorded("b", 1)],
            vec![
                sim("a", SimState::Running),
                sim("b", SimState::Running),
                sim("c", SimState::Terminating),
            ],
        );
        let asked = ["b".to_owned(), "c".to_owned(), "gone".to_owned()];
        assert_eq!(pool.active_of(&asked), vec!["b".to_owned()]);
        pool.terminating("b");
        assert_eq!(pool.active_count(), 1);
        let state = pool.state(1, POLL, pid);
        assert!(state.ready);
        assert_eq!(state.instances[1].state, InstanceState::Terminating);
    }

    #[test]
    fn state_is_not_ready_with_a_failed_instance() {
        let pool = Pool::new(KEY, &[recorded("a", 0)], vec![sim("a", SimState::Failed)]);
        assert!(!pool.state(1, POLL, pid).ready);
    }

    #[test]
    fn state_maps_addresses_and_drops_unknown_kinds() {
        let mut instance = sim("a", SimState::Running);
        instance.provider_id = String::new();
        instance.addresses = vec![
            crate::api::SimAddress {
                kind: "InternalIP".to_owned(),
                address: "10.0.0.1".to_owned(),
            },
            crate::api::SimAddress {
                kind: "Carrier".to_owned(),
                address: "x".to_owned(),
            },
        ];
        let state = Pool::new(KEY, &[], vec![instance]).state(1, POLL, pid);
        let reported = &state.instances[0];
        assert_eq!(reported.provider_id, "sim://r/a");
        assert_eq!(reported.addresses.len(), 1);
        assert_eq!(reported.addresses[0].kind, AddressType::InternalIp);
        assert_eq!(reported.request_token, None);
    }

    #[test]
    fn ordinal_of_ignores_tokens_of_other_keys() {
        assert_eq!(ordinal_of(KEY, "uid-1234-7"), Some(7));
        assert_eq!(ordinal_of(KEY, "uid-12345-7"), None);
        assert_eq!(ordinal_of(KEY, "other-7"), None);
    }
}
