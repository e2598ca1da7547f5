//! The instance types this cloud offers and what a node of each has: what
//! `GET /v1/instance-types/{name}` answers and what the simulated kubelets
//! report as their Nodes' capacity. An instance created without a type is
//! of [`DEFAULT`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The type of an instance created without one.
pub const DEFAULT: &str = "small";

/// One instance type: (name, cpu, memory, architecture, GPUs).
const CATALOGUE: &[(&str, &str, &str, &str, u8)] = &[
    ("small", "2", "4Gi", "amd64", 0),
    ("medium", "4", "16Gi", "amd64", 0),
    ("large", "8", "32Gi", "amd64", 0),
    ("small-arm", "2", "4Gi", "arm64", 0),
    ("gpu", "8", "61Gi", "amd64", 1),
];

/// Pods a kubelet here admits, whatever the size (a kubelet's default).
const MAX_PODS: &str = "110";

/// Body of `GET /v1/instance-types/{name}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceType {
    /// Its name, as `instanceType` of an instance.
    pub name: String,
    /// What its Node reports as capacity: resource name to quantity.
    pub capacity: BTreeMap<String, String>,
    /// GOARCH of its image: `amd64` or `arm64`.
    pub architecture: String,
    /// GOOS of its image: always `linux` here.
    pub operating_system: String,
}

/// The instance type named `name`, if the cloud offers it.
pub fn find(name: &str) -> Option<InstanceType> {
    let &(name, cpu, memory, architecture, gpus) =
        CATALOGUE.iter().find(|(known, ..)| *known == name)?;
    let mut capacity = BTreeMap::from([
        ("cpu".to_owned(), cpu.to_owned()),
        ("memory".to_owned(), memory.to_owned()),
        ("pods".to_owned(), MAX_PODS.to_owned()),
        ("ephemeral-storage".to_owned(), "20Gi".to_owned()),
    ]);
    if gpus > 0 {
        capacity.insert("nvidia.com/gpu".to_owned(), gpus.to_string());
    }
    Some(InstanceType {
        name: name.to_owned(),
        capacity,
        architecture: architecture.to_owned(),
        operating_system: "linux".to_owned(),
    })
}

/// The type an instance of `instance_type` (none: [`DEFAULT`]) is, if known.
pub fn of(instance_type: Option<&str>) -> Option<InstanceType> {
    find(instance_type.unwrap_or(DEFAULT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_has_cpu_memory_and_pods_and_unknown_ones_are_none() {
        for (name, ..) in CATALOGUE {
            let found = find(name).unwrap_or_else(|| panic!("{name}"));
            for resource in ["cpu", "memory", "pods"] {
                assert!(found.capacity.contains_key(resource), "{name} {resource}");
            }
        }
        assert_eq!(of(None).map(|t| t.name), Some(DEFAULT.to_owned()));
        assert_eq!(find("gpu").unwrap().capacity["nvidia.com/gpu"], "1");
        assert_eq!(find("small-arm").unwrap().architecture, "arm64");
        assert!(find("m5.large").is_none());
    }
}
