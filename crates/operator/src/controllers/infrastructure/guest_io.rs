//! CRD fields to WIT records and back, for the infrastructure provider.

use std::collections::BTreeMap;

use crate::api::cluster::FailureDomain;
use crate::api::provider::{InstanceState, InstanceStatus, MachineAddress};
use crate::wasm::clusters;
use crate::wasm::types::{self, AddressType};

/// The instances recorded in status, as the provider returned them.
pub fn to_instances(recorded: &[InstanceStatus]) -> Vec<types::Instance> {
    recorded
        .iter()
        .map(|i| types::Instance {
            id: i.id.clone(),
            provider_id: i.provider_id.clone(),
            state: match i.state {
                InstanceState::Pending => types::InstanceState::Pending,
                InstanceState::Running => types::InstanceState::Running,
                InstanceState::Failed => types::InstanceState::Failed,
                InstanceState::Terminating => types::InstanceState::Terminating,
            },
            failure_domain: i.failure_domain.clone(),
            addresses: i
                .addresses
                .iter()
                .filter_map(|a| {
                    Some(types::Address {
                        kind: address_type(&a.type_)?,
                        address: a.address.clone(),
                    })
                })
                .collect(),
            request_token: i.request_token.clone(),
        })
        .collect()
}

/// What the provider returned, to record in status.
pub fn from_instances(instances: &[types::Instance]) -> Vec<InstanceStatus> {
    instances
        .iter()
        .map(|i| InstanceStatus {
            id: i.id.clone(),
            provider_id: i.provider_id.clone(),
            state: match i.state {
                types::InstanceState::Pending => InstanceState::Pending,
                types::InstanceState::Running => InstanceState::Running,
                types::InstanceState::Failed => InstanceState::Failed,
                types::InstanceState::Terminating => InstanceState::Terminating,
            },
            failure_domain: i.failure_domain.clone(),
            addresses: i
                .addresses
                .iter()
                .map(|a| MachineAddress {
                    type_: address_name(a.kind).into(),
                    address: a.address.clone(),
                })
                .collect(),
            request_token: i.request_token.clone(),
            // The host's, given by the reconcile: never the provider's word.
            revision: None,
        })
        .collect()
}

/// The providerIDs of instances that are or will be machines (not failed,
/// not terminating), in the provider's order.
pub fn provider_id_list(instances: &[InstanceStatus]) -> Vec<String> {
    instances
        .iter()
        .filter(|i| matches!(i.state, InstanceState::Pending | InstanceState::Running))
        .filter(|i| !i.provider_id.is_empty())
        .map(|i| i.provider_id.clone())
        .collect()
}

/// Failure domains as the v1beta2 list.
pub fn failure_domains(domains: &[clusters::FailureDomain]) -> Vec<FailureDomain> {
    domains
        .iter()
        .map(|d| FailureDomain {
            name: d.name.clone(),
            control_plane: Some(d.control_plane),
            attributes: d.attributes.iter().cloned().collect::<BTreeMap<_, _>>(),
        })
        .collect()
}

fn address_name(kind: AddressType) -> &'static str {
    match kind {
        AddressType::Hostname => "Hostname",
        AddressType::ExternalIp => "ExternalIP",
        AddressType::InternalIp => "InternalIP",
        AddressType::ExternalDns => "ExternalDNS",
        AddressType::InternalDns => "InternalDNS",
    }
}

fn address_type(name: &str) -> Option<AddressType> {
    Some(match name {
        "Hostname" => AddressType::Hostname,
        "ExternalIP" => AddressType::ExternalIp,
        "InternalIP" => AddressType::InternalIp,
        "ExternalDNS" => AddressType::ExternalDns,
        "InternalDNS" => AddressType::InternalDns,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(id: &str, state: InstanceState) -> InstanceStatus {
        InstanceStatus {
            id: id.into(),
            provider_id: format!("sim://r/{id}"),
            state,
            failure_domain: Some("a".into()),
            addresses: vec![MachineAddress {
                type_: "InternalIP".into(),
                address: "10.0.0.1".into(),
            }],
            request_token: Some(format!("t-{id}")),
            revision: None,
        }
    }

    #[test]
    fn instances_survive_the_round_trip_through_the_provider() {
        let recorded = vec![
            instance("a", InstanceState::Running),
            instance("b", InstanceState::Terminating),
        ];
        assert_eq!(from_instances(&to_instances(&recorded)), recorded);
    }

    #[test]
    fn provider_id_list_skips_failed_and_terminating_instances() {
        let recorded = vec![
            instance("a", InstanceState::Running),
            instance("b", InstanceState::Terminating),
            instance("c", InstanceState::Pending),
            instance("d", InstanceState::Failed),
        ];
        assert_eq!(provider_id_list(&recorded), ["sim://r/a", "sim://r/c"]);
    }
}
