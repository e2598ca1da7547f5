//! What a provider returns, checked against the contract before anything
//! uses it: providerIDs as Cluster API defines them, instance ids, counts
//! and list sizes within bounds, bootstrap data of the format it claims. A
//! result that breaks a rule is refused whole, naming the rule and the
//! field ([`Violation`]); nothing of it is written.
//!
//! Host memory spent decoding a result is bounded before these checks run:
//! each call's store has `max_output_bytes` of hostcall fuel, which lifting a
//! result spends on every element (at its size in the host) and every byte.

use super::bounds::{
    MAX_ADDRESSES, MAX_ATTRIBUTES, MAX_CAPACITY_RESOURCES, MAX_FAILURE_DOMAINS, MAX_ID_BYTES,
    MAX_PROVIDER_ID_BYTES, max_instances,
};
use super::clusters::ClusterState;
use super::control_planes::ControlPlaneState;
use super::machine_pools::PoolState;
use super::node_shapes::NodeShape;
use super::types::{BootstrapData, BootstrapFormat, Instance, InstanceState};

/// A rule a result broke.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {rule}")]
pub struct Violation {
    /// The rule, for people (`not a providerID (<scheme>://...)`).
    pub rule: &'static str,
    /// Where in the result (`instances[3].providerID`).
    pub field: String,
}

pub(crate) fn violation(rule: &'static str, field: impl Into<String>) -> Violation {
    Violation {
        rule,
        field: field.into(),
    }
}

/// A pool's instances for `replicas`.
pub fn pool_state(state: &PoolState, replicas: u32) -> Result<(), Violation> {
    if state.instances.len() > max_instances(replicas) {
        return Err(violation(
            "more instances than twice the replicas and ten more",
            format!("instances (of {replicas} replicas)"),
        ));
    }
    let mut ids = std::collections::HashSet::new();
    let mut provider_ids = std::collections::HashSet::new();
    for (i, instance) in state.instances.iter().enumerate() {
        let at = |field: &str| format!("instances[{i}].{field}");
        instance_fields(instance, &at)?;
        if !ids.insert(instance.id.as_str()) {
            return Err(violation("an instance id repeated", at("id")));
        }
        if !instance.provider_id.is_empty() && !provider_ids.insert(instance.provider_id.as_str()) {
            return Err(violation("a providerID repeated", at("providerID")));
        }
    }
    Ok(())
}

/// What a removal left: the pool within the bounds of the instances it
/// had, and none of those it was asked to remove still up.
pub fn removal(state: &PoolState, remove: &[String], had: &[Instance]) -> Result<(), Violation> {
    pool_state(state, u32::try_from(had.len()).unwrap_or(u32::MAX))?;
    for (i, instance) in state.instances.iter().enumerate() {
        if remove.contains(&instance.id) && instance.state != InstanceState::Terminating {
            return Err(violation(
                "an instance it was asked to remove, not terminating",
                format!("instances[{i}].state"),
            ));
        }
    }
    Ok(())
}

fn instance_fields(instance: &Instance, at: &dyn Fn(&str) -> String) -> Result<(), Violation> {
    if instance.id.is_empty() {
        return Err(violation("an empty instance id", at("id")));
    }
    token(&instance.id, MAX_ID_BYTES).map_err(|rule| violation(rule, at("id")))?;
    if !instance.provider_id.is_empty() {
        provider_id(&instance.provider_id).map_err(|rule| violation(rule, at("providerID")))?;
    }
    if let Some(domain) = &instance.failure_domain {
        token(domain, MAX_ID_BYTES).map_err(|rule| violation(rule, at("failureDomain")))?;
    }
    if let Some(request_token) = &instance.request_token {
        token(request_token, MAX_ID_BYTES).map_err(|rule| violation(rule, at("requestToken")))?;
    }
    if instance.addresses.len() > MAX_ADDRESSES {
        return Err(violation("more than 32 addresses", at("addresses")));
    }
    for (j, address) in instance.addresses.iter().enumerate() {
        token(&address.address, MAX_ID_BYTES)
            .map_err(|rule| violation(rule, at(&format!("addresses[{j}]"))))?;
    }
    Ok(())
}

/// A cluster's endpoint and failure domains.
pub fn cluster_state(state: &ClusterState) -> Result<(), Violation> {
    if let Some(endpoint) = &state.control_plane_endpoint {
        token(&endpoint.host, 253).map_err(|rule| violation(rule, "controlPlaneEndpoint.host"))?;
        if endpoint.port == 0 {
            return Err(violation("port 0", "controlPlaneEndpoint.port"));
        }
    }
    if state.failure_domains.len() > MAX_FAILURE_DOMAINS {
        return Err(violation("more than 100 failure domains", "failureDomains"));
    }
    let mut names = std::collections::HashSet::new();
    for (i, domain) in state.failure_domains.iter().enumerate() {
        let at = |field: &str| format!("failureDomains[{i}].{field}");
        token(&domain.name, MAX_ID_BYTES).map_err(|rule| violation(rule, at("name")))?;
        if !names.insert(domain.name.as_str()) {
            return Err(violation("a failure domain repeated", at("name")));
        }
        if domain.attributes.len() > MAX_ATTRIBUTES {
            return Err(violation("more than 64 attributes", at("attributes")));
        }
        for (key, value) in &domain.attributes {
            token(key, MAX_ID_BYTES).map_err(|rule| violation(rule, at("attributes")))?;
            printable(value, MAX_ID_BYTES).map_err(|rule| violation(rule, at("attributes")))?;
        }
    }
    Ok(())
}

/// A control plane asked for `replicas`: an endpoint as a cluster's, once
/// initialized; counts that add up (no more ready, available or up to date
/// than exist, no more than [`max_instances`] in a rollout); a version
/// Kubernetes names its releases with.
pub fn control_plane_state(state: &ControlPlaneState, replicas: u32) -> Result<(), Violation> {
    match &state.endpoint {
        Some(endpoint) => {
            token(&endpoint.host, 253).map_err(|rule| violation(rule, "endpoint.host"))?;
            if endpoint.host.is_empty() {
                return Err(violation("an empty host", "endpoint.host"));
            }
            if endpoint.port == 0 {
                return Err(violation("port 0", "endpoint.port"));
            }
        }
        None if state.initialized => {
            return Err(violation("initialized, with no endpoint", "endpoint"));
        }
        None => {}
    }
    let bound = u32::try_from(max_instances(replicas)).unwrap_or(u32::MAX);
    if state.replicas > bound {
        return Err(violation(
            "more replicas than twice those asked for and ten more",
            format!("replicas (of {replicas} asked for)"),
        ));
    }
    for (count, field) in [
        (state.ready_replicas, "readyReplicas"),
        (state.available_replicas, "availableReplicas"),
        (state.up_to_date_replicas, "upToDateReplicas"),
    ] {
        if count > state.replicas {
            return Err(violation("more than the replicas that exist", field));
        }
    }
    if let Some(version) = &state.version {
        kubernetes_version(version).map_err(|rule| violation(rule, "version"))?;
    }
    Ok(())
}

/// `v<major>.<minor>.<patch>`, with an optional pre-release or build
/// suffix, as Kubernetes names its releases.
pub fn kubernetes_version(version: &str) -> Result<(), &'static str> {
    const RULE: &str = "not a Kubernetes version (v<major>.<minor>.<patch>)";
    token(version, MAX_ID_BYTES)?;
    let core = version.strip_prefix('v').ok_or(RULE)?;
    let core = core.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    let numeric = |p: &&str| !p.is_empty() && p.len() <= 9 && p.bytes().all(|b| b.is_ascii_digit());
    if parts.len() == 3 && parts.iter().all(numeric) {
        Ok(())
    } else {
        Err(RULE)
    }
}

/// A node shape: `cpu` and `memory` among at most
/// [`MAX_CAPACITY_RESOURCES`] resources, each named once, as a Kubernetes
/// resource name, with a quantity Kubernetes parses; an architecture and
/// an operating system in Go's lower-case names.
pub fn node_shape(shape: &NodeShape) -> Result<(), Violation> {
    if shape.capacity.len() > MAX_CAPACITY_RESOURCES {
        return Err(violation("more than 32 resources", "capacity"));
    }
    let mut names = std::collections::HashSet::new();
    for (i, (name, quantity)) in shape.capacity.iter().enumerate() {
        resource_name(name).map_err(|rule| violation(rule, format!("capacity[{i}].name")))?;
        if !names.insert(name.as_str()) {
            return Err(violation(
                "a resource repeated",
                format!("capacity[{i}].name"),
            ));
        }
        kubernetes_quantity(quantity)
            .map_err(|rule| violation(rule, format!("capacity[{i}].quantity")))?;
    }
    for needed in ["cpu", "memory"] {
        if !names.contains(needed) {
            return Err(violation("no cpu or no memory", "capacity"));
        }
    }
    for (field, value) in [
        ("architecture", &shape.architecture),
        ("operatingSystem", &shape.operating_system),
    ] {
        let go_name = !value.is_empty()
            && value.len() <= 32
            && value
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !go_name {
            return Err(violation("not 1-32 lower-case letters and digits", field));
        }
    }
    Ok(())
}

/// A resource name as a Node's capacity takes it: `cpu`, or a qualified
/// name such as `nvidia.com/gpu` (letters, digits, `-_.`, one `/`).
fn resource_name(name: &str) -> Result<(), &'static str> {
    let allowed = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    let ok = name.len() <= 253
        && match name.split_once('/') {
            Some((prefix, rest)) => allowed(prefix) && allowed(rest) && !rest.contains('/'),
            None => allowed(name),
        };
    ok.then_some(()).ok_or("not a resource name")
}

/// A non-negative quantity in Kubernetes' notation: a decimal number then
/// a binary (`Ki` … `Ei`) or decimal (`m`, `k`, `M` … `E`) suffix or an
/// exponent (`e3`).
fn kubernetes_quantity(text: &str) -> Result<(), &'static str> {
    const RULE: &str = "not a Kubernetes quantity";
    if text.is_empty() || text.len() > 64 {
        return Err(RULE);
    }
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let digits = number.replacen('.', "", 1);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(RULE);
    }
    let exponent = |rest: &str| {
        let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
        !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())
    };
    let suffix_ok = matches!(
        suffix,
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "m" | "k" | "M" | "G" | "T" | "P" | "E"
    ) || suffix.strip_prefix(['e', 'E']).is_some_and(exponent);
    suffix_ok.then_some(()).ok_or(RULE)
}

/// Bootstrap data of the format it claims: cloud-config is UTF-8 text
/// starting `#cloud-config` (after a `## template:` line, as kubeadm's may),
/// a shell script starts `#!`, Ignition is a JSON object.
pub fn bootstrap_data(data: &BootstrapData) -> Result<(), Violation> {
    let field = "bootstrapData.value";
    match data.format {
        BootstrapFormat::CloudConfig => {
            let text = std::str::from_utf8(&data.value)
                .map_err(|_| violation("cloud-config that is not UTF-8", field))?;
            let first = text
                .lines()
                .find(|line| !line.starts_with("## template:"))
                .unwrap_or_default();
            if first.trim_end() != "#cloud-config" {
                return Err(violation("cloud-config not starting #cloud-config", field));
            }
        }
        BootstrapFormat::ShellScript => {
            if !data.value.starts_with(b"#!") {
                return Err(violation("a shell script not starting #!", field));
            }
        }
        BootstrapFormat::Ignition => {
            let json: serde_json::Value = serde_json::from_slice(&data.value)
                .map_err(|_| violation("Ignition that is not JSON", field))?;
            if !json.is_object() {
                return Err(violation("Ignition that is not a JSON object", field));
            }
        }
    }
    Ok(())
}

/// A providerID as Cluster API matches them against Nodes:
/// `<scheme>://<rest>`, the scheme RFC 3986's, printable ASCII with no
/// whitespace, no `..` segment, at most [`MAX_PROVIDER_ID_BYTES`].
pub fn provider_id(id: &str) -> Result<(), &'static str> {
    token(id, MAX_PROVIDER_ID_BYTES)?;
    let Some((scheme, rest)) = id.split_once("://") else {
        return Err("not a providerID (<scheme>://...)");
    };
    let mut chars = scheme.chars();
    let scheme_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
    if !scheme_ok {
        return Err("a providerID whose scheme is not lower-case letters, digits, + - .");
    }
    if rest.is_empty() {
        return Err("a providerID with nothing after its scheme");
    }
    if rest.split('/').any(|segment| segment == "..") {
        return Err("a providerID with a .. segment");
    }
    Ok(())
}

/// Printable ASCII, no whitespace, at most `max` bytes.
fn token(text: &str, max: usize) -> Result<(), &'static str> {
    if text.len() > max {
        return Err("longer than its bound");
    }
    if !text.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("not printable ASCII without whitespace");
    }
    Ok(())
}

/// No control or invisible-formatting characters, at most `max` bytes.
fn printable(text: &str, max: usize) -> Result<(), &'static str> {
    if text.len() > max {
        return Err("longer than its bound");
    }
    if text.chars().any(super::text::needs_escape) {
        return Err("holds control or invisible characters");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Address, AddressType};

    fn instance(id: &str, provider_id: &str) -> Instance {
        Instance {
            id: id.into(),
            provider_id: provider_id.into(),
            state: InstanceState::Running,
            failure_domain: None,
            addresses: Vec::new(),
            request_token: None,
        }
    }

    fn pool(instances: Vec<Instance>) -> PoolState {
        PoolState {
            instances,
            ready: true,
            requeue_after_seconds: None,
        }
    }

    #[test]
    fn a_removal_leaves_no_instance_it_was_asked_to_remove_up() {
        let had = vec![instance("a", "sim://r/a"), instance("b", "sim://r/b")];
        let remove = ["b".to_owned()];
        let mut going = had.clone();
        going[1].state = InstanceState::Terminating;
        assert_eq!(removal(&pool(going), &remove, &had), Ok(()));
        assert_eq!(removal(&pool(had[..1].to_vec()), &remove, &had), Ok(()));
        let refused = removal(&pool(had.clone()), &remove, &had);
        assert_eq!(
            refused.map_err(|v| v.field),
            Err("instances[1].state".to_owned())
        );
        let many: Vec<_> = (0..15).map(|i| instance(&format!("i-{i}"), "")).collect();
        assert!(removal(&pool(many), &remove, &had).is_err());
    }

    #[test]
    fn provider_ids_are_accepted_as_cluster_api_writes_them() {
        for id in [
            "aws:///us-east-2a/i-0123456789abcdef0",
            "sim://local-1/pool-a-0",
            "azure:///subscriptions/x/resourceGroups/y",
            "gce://project/zone/name",
            "kind://docker/kind/kind-worker",
        ] {
            assert_eq!(provider_id(id), Ok(()), "{id}");
        }
    }

    #[test]
    fn provider_ids_breaking_a_rule_are_refused() {
        let cases = [
            ("", "not a providerID (<scheme>://...)"),
            ("i-0123", "not a providerID (<scheme>://...)"),
            ("sim://", "a providerID with nothing after its scheme"),
            (
                "SIM://a",
                "a providerID whose scheme is not lower-case letters, digits, + - .",
            ),
            ("sim://a/../b", "a providerID with a .. segment"),
            ("sim://a\0b", "not printable ASCII without whitespace"),
            (
                "sim://a\u{1b}[31m",
                "not printable ASCII without whitespace",
            ),
            ("sim://a\r\nb", "not printable ASCII without whitespace"),
            ("sim://a\u{202e}b", "not printable ASCII without whitespace"),
            ("sim://a b", "not printable ASCII without whitespace"),
        ];
        for (id, rule) in cases {
            assert_eq!(provider_id(id), Err(rule), "{id:?}");
        }
    }

    #[test]
    fn a_provider_id_at_its_bound_is_accepted_and_one_byte_over_refused() {
        let at = format!("sim://{}", "a".repeat(MAX_PROVIDER_ID_BYTES - 6));
        assert_eq!(provider_id(&at), Ok(()));
        let over = format!("{at}a");
        assert_eq!(provider_id(&over), Err("longer than its bound"));
    }

    #[test]
    fn instances_up_to_the_surge_bound_are_accepted_and_one_more_refused() {
        let instances = |n: usize| {
            (0..n)
                .map(|i| instance(&format!("i-{i}"), &format!("sim://r/i-{i}")))
                .collect()
        };
        assert_eq!(max_instances(3), 16);
        assert!(pool_state(&pool(instances(16)), 3).is_ok());
        let refused = pool_state(&pool(instances(17)), 3).unwrap_err();
        assert_eq!(refused.field, "instances (of 3 replicas)");
    }

    #[test]
    fn repeated_and_empty_ids_are_refused_naming_the_instance() {
        let repeated = pool(vec![instance("a", "sim://r/a"), instance("a", "sim://r/b")]);
        assert_eq!(
            pool_state(&repeated, 3),
            Err(violation("an instance id repeated", "instances[1].id"))
        );
        let same_provider_id = pool(vec![instance("a", "sim://r/a"), instance("b", "sim://r/a")]);
        assert_eq!(
            pool_state(&same_provider_id, 3).unwrap_err().field,
            "instances[1].providerID"
        );
        let empty = pool(vec![instance("", "sim://r/a")]);
        assert_eq!(
            pool_state(&empty, 3).unwrap_err().rule,
            "an empty instance id"
        );
        // An instance whose providerID is not known yet has none.
        let pending = pool(vec![instance("a", ""), instance("b", "")]);
        assert!(pool_state(&pending, 3).is_ok());
    }

    #[test]
    fn addresses_up_to_their_bound_are_accepted_and_one_more_refused() {
        let mut with = instance("a", "sim://r/a");
        with.addresses = (0..MAX_ADDRESSES)
            .map(|_| Address {
                kind: AddressType::InternalIp,
                address: "10.0.0.1".into(),
            })
            .collect();
        assert!(pool_state(&pool(vec![with.clone()]), 1).is_ok());
        with.addresses.push(with.addresses[0].clone());
        assert_eq!(
            pool_state(&pool(vec![with]), 1).unwrap_err().field,
            "instances[0].addresses"
        );
    }

    #[test]
    fn bootstrap_data_must_be_of_the_format_it_claims() {
        let data = |format, value: &str| BootstrapData {
            format,
            value: value.as_bytes().to_vec(),
        };
        assert!(
            bootstrap_data(&data(
                BootstrapFormat::CloudConfig,
                "#cloud-config\nruncmd: []"
            ))
            .is_ok()
        );
        assert!(
            bootstrap_data(&data(
                BootstrapFormat::CloudConfig,
                "## template: jinja\n#cloud-config\n"
            ))
            .is_ok()
        );
        assert!(bootstrap_data(&data(BootstrapFormat::CloudConfig, "runcmd: []")).is_err());
        assert!(bootstrap_data(&data(BootstrapFormat::ShellScript, "#!/bin/sh\n")).is_ok());
        assert!(bootstrap_data(&data(BootstrapFormat::ShellScript, "echo hi")).is_err());
        assert!(bootstrap_data(&data(BootstrapFormat::Ignition, "{\"ignition\": {}}")).is_ok());
        assert!(bootstrap_data(&data(BootstrapFormat::Ignition, "[]")).is_err());
        let binary = BootstrapData {
            format: BootstrapFormat::CloudConfig,
            value: vec![0xff, 0xfe],
        };
        assert_eq!(
            bootstrap_data(&binary).unwrap_err().rule,
            "cloud-config that is not UTF-8"
        );
    }

    #[test]
    fn a_node_shape_has_cpu_memory_and_quantities_kubernetes_parses() {
        let shape = |capacity: &[(&str, &str)], arch: &str| NodeShape {
            capacity: capacity
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            architecture: arch.to_owned(),
            operating_system: "linux".to_owned(),
        };
        let good = [
            ("cpu", "2"),
            ("memory", "7.5Gi"),
            ("pods", "110"),
            ("ephemeral-storage", "20G"),
            ("nvidia.com/gpu", "1"),
            ("hugepages-2Mi", "1e3"),
        ];
        assert_eq!(node_shape(&shape(&good, "arm64")), Ok(()));
        let rule = |capacity: &[(&str, &str)], arch: &str| node_shape(&shape(capacity, arch));
        assert_eq!(
            rule(&[("cpu", "2")], "amd64").unwrap_err().rule,
            "no cpu or no memory"
        );
        for bad in ["", "-1", "2 Gi", "2GiB", "0x10", "1..5", "Gi", "1e"] {
            let err = rule(&[("cpu", "1"), ("memory", bad)], "amd64").unwrap_err();
            assert_eq!(
                (err.rule, err.field.as_str()),
                ("not a Kubernetes quantity", "capacity[1].quantity"),
                "{bad:?}"
            );
        }
        for bad in ["", "a/b/c", "cpu ", "/gpu", "\u{202e}cpu"] {
            let err = rule(&[(bad, "1"), ("cpu", "1"), ("memory", "1")], "amd64").unwrap_err();
            assert_eq!(err.rule, "not a resource name", "{bad:?}");
        }
        let twice = rule(&[("cpu", "1"), ("memory", "1"), ("cpu", "2")], "amd64");
        assert_eq!(twice.unwrap_err().rule, "a resource repeated");
        assert_eq!(
            rule(&good, "AMD64").unwrap_err().field,
            "architecture",
            "Go names architectures in lower case"
        );
        let many: Vec<(String, String)> = (0..40).map(|i| (format!("r{i}"), "1".into())).collect();
        let many = NodeShape {
            capacity: many,
            ..shape(&good, "amd64")
        };
        assert_eq!(node_shape(&many).unwrap_err().field, "capacity");
    }

    fn control_plane(replicas: u32) -> ControlPlaneState {
        ControlPlaneState {
            endpoint: Some(crate::types::ApiEndpoint {
                host: "127.0.0.1".into(),
                port: 6443,
            }),
            initialized: true,
            replicas,
            ready_replicas: replicas,
            available_replicas: replicas,
            up_to_date_replicas: replicas,
            version: Some("v1.36.3".into()),
            externally_managed: true,
            message: None,
            requeue_after_seconds: None,
        }
    }

    #[test]
    fn a_control_plane_s_counts_add_up_and_its_version_is_a_release() {
        assert_eq!(control_plane_state(&control_plane(3), 3), Ok(()));
        let field = |state: &ControlPlaneState, asked| {
            control_plane_state(state, asked).map_err(|v| v.field)
        };
        let mut state = control_plane(3);
        state.ready_replicas = 4;
        assert_eq!(field(&state, 3), Err("readyReplicas".into()));
        let mut state = control_plane(3);
        state.up_to_date_replicas = 4;
        assert_eq!(field(&state, 3), Err("upToDateReplicas".into()));
        // A rollout may surge, within the bound instances have.
        assert_eq!(field(&control_plane(16), 3), Ok(()));
        assert_eq!(
            field(&control_plane(17), 3),
            Err("replicas (of 3 asked for)".into())
        );
        let mut state = control_plane(1);
        state.endpoint = None;
        assert_eq!(field(&state, 1), Err("endpoint".into()));
        state.initialized = false;
        assert_eq!(field(&state, 1), Ok(()));
        for version in ["1.36.3", "v1.36", "v1.x.3", "v1.36.3 ", "v01234567890.1.1"] {
            let mut state = control_plane(1);
            state.version = Some(version.into());
            assert_eq!(field(&state, 1), Err("version".into()), "{version:?}");
        }
        for version in ["v1.36.3", "v1.37.0-alpha.1", "v1.36.3+k3s1"] {
            assert_eq!(kubernetes_version(version), Ok(()), "{version}");
        }
    }
}
