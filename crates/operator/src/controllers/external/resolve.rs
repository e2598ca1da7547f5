//! Which served version of a referenced kind to use, and which contract it
//! implements: from the contract labels of its CRD, as upstream resolves
//! v1beta2 references.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt as _;
use kube::api::{ApiResource, GroupVersionKind};

use super::{Contract, ReferenceError, Resolved};
use crate::api::{ContractVersionedObjectReference, labels};

/// Picks the contract and version from a CRD's labels: `v1beta2` first,
/// then `v1beta1`; of the versions a label lists (`v1alpha1_v1beta1`), the
/// highest by Kubernetes version priority that the CRD serves.
pub(super) fn resolve_from_crd(
    crd: &CustomResourceDefinition,
    reference: &ContractVersionedObjectReference,
) -> Result<Resolved, ReferenceError> {
    let crd_labels = crd.metadata.labels.clone().unwrap_or_default();
    for (label, contract) in [
        (labels::CONTRACT_V1BETA2, Contract::V1Beta2),
        (labels::CONTRACT_V1BETA1, Contract::V1Beta1),
    ] {
        let Some(value) = crd_labels.get(label) else {
            continue;
        };
        let version = value
            .split('_')
            .filter(|v| crd.spec.versions.iter().any(|s| s.served && s.name == *v))
            .max_by(|a, b| version_priority(a).cmp(&version_priority(b)));
        if let Some(version) = version {
            let gvk = GroupVersionKind::gvk(&crd.spec.group, version, &reference.kind);
            return Ok(Resolved {
                resource: ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural),
                contract,
            });
        }
    }
    Err(ReferenceError::NoContractLabel {
        crd: crd.name_any(),
    })
}

/// Kubernetes version ordering: GA above beta above alpha, then by major
/// and by the pre-release number; unparseable versions sort lowest.
fn version_priority(version: &str) -> (u8, u32, u32) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u32>() else {
        return (0, 0, 0);
    };
    match &rest[digits.len()..] {
        "" => (3, major, 0),
        tail => {
            let (stability, number) = if let Some(n) = tail.strip_prefix("beta") {
                (2, n)
            } else if let Some(n) = tail.strip_prefix("alpha") {
                (1, n)
            } else {
                return (0, 0, 0);
            };
            number.parse().map_or((0, 0, 0), |n| (stability, major, n))
        }
    }
}

/// English plurals as Kubernetes kinds use them (flect's common rules).
pub(super) fn plural(kind: &str) -> String {
    if let Some(stem) = kind.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        return format!("{stem}ies");
    }
    if kind.ends_with('s') || kind.ends_with('x') || kind.ends_with("ch") || kind.ends_with("sh") {
        return format!("{kind}es");
    }
    format!("{kind}s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_priority_orders_ga_beta_alpha() {
        let mut versions = vec![
            "v1alpha1",
            "v1beta2",
            "v2",
            "v1",
            "v1beta1",
            "v10alpha3",
            "x",
        ];
        versions.sort_by_key(|v| version_priority(v));
        assert_eq!(
            versions,
            [
                "x",
                "v1alpha1",
                "v10alpha3",
                "v1beta1",
                "v1beta2",
                "v1",
                "v2"
            ]
        );
    }

    #[test]
    fn plural_follows_common_english_rules() {
        assert_eq!(plural("wasmmachinepool"), "wasmmachinepools");
        assert_eq!(plural("policy"), "policies");
        assert_eq!(plural("gateway"), "gateways");
        assert_eq!(plural("box"), "boxes");
        assert_eq!(plural("address"), "addresses");
    }

    fn crd(labels: &[(&str, &str)], served: &[&str]) -> CustomResourceDefinition {
        let mut crd = <crate::api::WasmMachinePool as kube::CustomResourceExt>::crd();
        crd.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        let template = crd.spec.versions[0].clone();
        crd.spec.versions = served
            .iter()
            .map(|name| {
                let mut v = template.clone();
                v.name = (*name).to_owned();
                v
            })
            .collect();
        crd
    }

    fn reference() -> ContractVersionedObjectReference {
        ContractVersionedObjectReference::new(
            "infrastructure.cluster.x-k8s.io",
            "WasmMachinePool",
            "p",
        )
    }

    #[test]
    fn resolve_prefers_the_v1beta2_contract_and_the_highest_served_version() {
        let crd = crd(
            &[
                (labels::CONTRACT_V1BETA1, "v1alpha1"),
                (labels::CONTRACT_V1BETA2, "v1alpha1_v1beta1_v1beta9"),
            ],
            &["v1alpha1", "v1beta1"],
        );
        let resolved = resolve_from_crd(&crd, &reference()).unwrap();
        assert_eq!(resolved.contract, Contract::V1Beta2);
        assert_eq!(
            resolved.resource.api_version,
            "infrastructure.cluster.x-k8s.io/v1beta1"
        );
        assert_eq!(resolved.resource.plural, "wasmmachinepools");
    }

    #[test]
    fn resolve_falls_back_to_v1beta1_and_refuses_a_crd_without_labels() {
        let v1 = crd(&[(labels::CONTRACT_V1BETA1, "v1alpha1")], &["v1alpha1"]);
        assert_eq!(
            resolve_from_crd(&v1, &reference()).unwrap().contract,
            Contract::V1Beta1
        );
        let none = crd(&[], &["v1alpha1"]);
        assert!(matches!(
            resolve_from_crd(&none, &reference()),
            Err(ReferenceError::NoContractLabel { .. })
        ));
    }
}
