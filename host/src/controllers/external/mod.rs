//! Referenced objects of kinds known only at run time (bootstrap configs,
//! infrastructure and control-plane objects): their API version comes from
//! the contract labels of their CRD, as upstream resolves v1beta2
//! references, their contract fields are read by contract version, and
//! they are read from caches of their kinds ([`watch`]).

mod watch;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

pub use watch::Changed;

use super::cache::{Cache, Caches};
use super::metrics::Metrics;
use crate::api::conditions::Desired;
use crate::api::{
    Cluster, ConditionStatus, ConditionType, ContractVersionedObjectReference, MachinePool, Reason,
    labels,
};

/// How long a read waits for the first list of a kind it is the first to reference.
const FIRST_LIST: Duration = Duration::from_secs(10);

/// The provider contract a referenced kind implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contract {
    /// `cluster.x-k8s.io/v1beta1`: readiness in `status.ready`.
    V1Beta1,
    /// `cluster.x-k8s.io/v1beta2`: readiness in `status.initialization`.
    V1Beta2,
}

/// A reference resolved to a served version of its kind.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// The contract the version implements.
    pub contract: Contract,
}

/// Why a reference cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// No CRD serves the kind.
    #[error("no CustomResourceDefinition serves kind {kind} of group {group}")]
    NoCrd {
        /// The group.
        group: String,
        /// The kind.
        kind: String,
    },
    /// The CRD implements no Cluster API contract.
    #[error(
        "CustomResourceDefinition {crd} has no cluster.x-k8s.io/v1beta2 or cluster.x-k8s.io/v1beta1 label naming the versions that implement the contract"
    )]
    NoContractLabel {
        /// The CRD's name.
        crd: String,
    },
    /// The kind's objects could not be listed yet (a missing permission, say).
    #[error("the objects of kind {kind} could not be listed within {FIRST_LIST:?}")]
    NotListed {
        /// The kind.
        kind: String,
    },
    /// The object does not exist.
    #[error("{kind} {name:?} does not exist")]
    NotFound {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
    },
    /// Reading the object failed.
    #[error("cannot read {kind} {name:?}")]
    Get {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Another object controls it.
    #[error("{kind} {name:?} is already controlled by {owner_kind} {owner_name:?}")]
    ControlledByOther {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// The controller's kind.
        owner_kind: String,
        /// The controller's name.
        owner_name: String,
    },
    /// Writing the object (its owner reference and label, or its deletion) failed.
    #[error("cannot update {kind} {name:?}")]
    Adopt {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

impl ReferenceError {
    /// The condition reason it shows as.
    pub fn reason(&self) -> Reason {
        match self {
            Self::NoCrd { .. } | Self::NoContractLabel { .. } => Reason::ReferenceInvalid,
            Self::NotFound { .. } => Reason::ReferenceNotFound,
            Self::ControlledByOther { .. } => Reason::ReferenceOwnedByOther,
            Self::NotListed { .. } | Self::Get { .. } | Self::Adopt { .. } => Reason::ApiError,
        }
    }
}

/// Resolves references from the cached CRDs, and reads, adopts and deletes
/// referenced objects, reading them from caches of their kinds.
pub struct ExternalObjects {
    client: Client,
    crds: kube::runtime::reflector::Store<CustomResourceDefinition>,
    kinds: watch::Kinds,
}

impl ExternalObjects {
    /// Uses `client` for writes and watches, and `caches` for CRDs and to
    /// map a changed object to the MachinePools and Clusters that own or
    /// reference it, which the returned streams yield.
    pub fn new(
        client: Client,
        caches: &Caches,
        metrics: Metrics,
    ) -> (Self, Changed<MachinePool>, Changed<Cluster>) {
        let (kinds, pools, clusters) =
            watch::Kinds::new(client.clone(), metrics, watch::Referrers::of(caches));
        let external = Self {
            client,
            crds: caches.crds.store().clone(),
            kinds,
        };
        (external, pools, clusters)
    }

    /// The served version (and contract) of the reference's kind, from the
    /// CRD named `<plural>.<group>`, or else the one CRD of that group and kind.
    pub fn resolve(
        &self,
        reference: &ContractVersionedObjectReference,
    ) -> Result<Resolved, ReferenceError> {
        let name = format!(
            "{}.{}",
            plural(&reference.kind.to_ascii_lowercase()),
            reference.api_group
        );
        let matches = |crd: &CustomResourceDefinition| {
            crd.spec.group == reference.api_group && crd.spec.names.kind == reference.kind
        };
        let crd = self
            .crds
            .get(&kube::runtime::reflector::ObjectRef::new(&name))
            .filter(|crd| matches(crd))
            .or_else(|| self.crds.find(|crd| matches(crd)))
            .ok_or_else(|| ReferenceError::NoCrd {
                group: reference.api_group.clone(),
                kind: reference.kind.clone(),
            })?;
        resolve_from_crd(&crd, reference)
    }

    /// The cache of the resolved kind, once it has listed its objects.
    async fn cache(
        &self,
        resolved: &Resolved,
    ) -> Result<Arc<Cache<DynamicObject>>, ReferenceError> {
        let cache = self.kinds.cache(&resolved.resource);
        tokio::time::timeout(FIRST_LIST, cache.ready())
            .await
            .map_err(|_| ReferenceError::NotListed {
                kind: resolved.resource.kind.clone(),
            })?;
        Ok(cache)
    }

    /// The referenced object in `namespace`, as cached (the kind is watched
    /// from the first read on).
    pub async fn get(
        &self,
        resolved: &Resolved,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<DynamicObject>, ReferenceError> {
        self.cache(resolved)
            .await?
            .get(Some(namespace), name)
            .ok_or_else(|| ReferenceError::NotFound {
                kind: resolved.resource.kind.clone(),
                name: name.to_owned(),
            })
    }

    /// Asks the API server to delete the referenced object unless it is gone
    /// or going already. Whether it still exists: an object the cache does
    /// not hold is looked up on the server before it counts as gone.
    pub async fn delete(
        &self,
        resolved: &Resolved,
        namespace: &str,
        name: &str,
    ) -> Result<bool, ReferenceError> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resolved.resource);
        let deleting = match self.get(resolved, namespace, name).await {
            Ok(object) => object.metadata.deletion_timestamp.is_some(),
            Err(ReferenceError::NotFound { .. }) => match api.get_opt(name).await {
                Ok(None) => return Ok(false),
                Ok(Some(object)) => object.metadata.deletion_timestamp.is_some(),
                Err(source) => {
                    return Err(ReferenceError::Get {
                        kind: resolved.resource.kind.clone(),
                        name: name.to_owned(),
                        source,
                    });
                }
            },
            Err(error) => return Err(error),
        };
        if !deleting {
            match api
                .delete(name, &kube::api::DeleteParams::background())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(false),
                Err(source) => {
                    return Err(ReferenceError::Adopt {
                        kind: resolved.resource.kind.clone(),
                        name: name.to_owned(),
                        source,
                    });
                }
            }
        }
        Ok(true)
    }

    /// Makes `owner` an owner of `object` (its controller if `controller`)
    /// and labels it with the cluster name, in one server-side apply, unless
    /// both are already in place. Refuses an object another controller owns.
    /// Whether it wrote.
    pub async fn adopt(
        &self,
        resolved: &Resolved,
        object: &DynamicObject,
        owner: OwnerReference,
        cluster_name: &str,
        field_manager: &str,
    ) -> Result<bool, ReferenceError> {
        let kind = resolved.resource.kind.clone();
        let name = object.name_any();
        if owner.controller == Some(true)
            && let Some(other) = object
                .owner_references()
                .iter()
                .find(|r| r.controller == Some(true) && r.uid != owner.uid)
        {
            return Err(ReferenceError::ControlledByOther {
                kind,
                name,
                owner_kind: other.kind.clone(),
                owner_name: other.name.clone(),
            });
        }
        let labelled = object
            .labels()
            .get(labels::CLUSTER_NAME)
            .map(String::as_str)
            == Some(cluster_name);
        if labelled && object.owner_references().contains(&owner) {
            return Ok(false);
        }
        let patch = json!({
            "apiVersion": resolved.resource.api_version,
            "kind": kind,
            "metadata": {
                "name": name,
                "labels": { labels::CLUSTER_NAME: cluster_name },
                "ownerReferences": [owner],
            },
        });
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &object.namespace().unwrap_or_default(),
            &resolved.resource,
        );
        api.patch(
            &name,
            &PatchParams::apply(field_manager).force(),
            &Patch::Apply(patch),
        )
        .await
        .map(|_| true)
        .map_err(|source| ReferenceError::Adopt { kind, name, source })
    }
}

/// Picks the contract and version from a CRD's labels: `v1beta2` first,
/// then `v1beta1`; of the versions a label lists (`v1alpha1_v1beta1`), the
/// highest by Kubernetes version priority that the CRD serves.
fn resolve_from_crd(
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
fn plural(kind: &str) -> String {
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

/// A readiness flag by contract: `status.initialization.<v1beta2>` or
/// `status.<v1beta1>`; missing is false.
pub fn contract_flag(
    object: &DynamicObject,
    contract: Contract,
    v1beta2: &str,
    v1beta1: &str,
) -> bool {
    let value = match contract {
        Contract::V1Beta2 => status_field(object, &["initialization", v1beta2]),
        Contract::V1Beta1 => status_field(object, &[v1beta1]),
    };
    value.and_then(Value::as_bool).unwrap_or(false)
}

/// `status.<path>` of a referenced object.
pub fn status_field<'a>(object: &'a DynamicObject, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(object.data.get("status")?, |value, key| value.get(key))
}

/// `spec.<path>` of a referenced object.
pub fn spec_field<'a>(object: &'a DynamicObject, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(object.data.get("spec")?, |value, key| value.get(key))
}

/// How one of our conditions mirrors a referenced object's readiness.
#[derive(Clone, Copy, Debug)]
pub struct Mirror {
    /// Our condition.
    pub type_: ConditionType,
    /// Its reason when the object is ready.
    pub ready: Reason,
    /// Its reason while it is not.
    pub waiting: Reason,
}

impl Mirror {
    /// The condition for an object that is ready or not (`holds`): with the
    /// object's own `Ready` message when it has one, else saying which it is.
    pub fn of(
        &self,
        object: &DynamicObject,
        holds: bool,
        reference: &ContractVersionedObjectReference,
    ) -> Desired {
        let message = ready_condition(object)
            .map(|c| c.message)
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| {
                if holds {
                    format!("{reference} is ready")
                } else {
                    format!("waiting for {reference}")
                }
            });
        Desired {
            type_: self.type_,
            status: ConditionStatus::from_bool(holds),
            reason: if holds { self.ready } else { self.waiting },
            message,
        }
    }
}

/// The object's `Ready` condition (v1beta1 and v1beta2 conditions share the fields read here).
pub fn ready_condition(object: &DynamicObject) -> Option<MirroredCondition> {
    let conditions = status_field(object, &["conditions"])?.as_array()?;
    let ready = conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?;
    let text = |key| {
        ready
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Some(MirroredCondition {
        status: text("status"),
        reason: text("reason"),
        message: text("message"),
    })
}

/// A referenced object's `Ready` condition, as mirrored into ours.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirroredCondition {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Its reason.
    pub reason: String,
    /// Its message.
    pub message: String,
}

/// The failure the object reports (`status.failureReason` / `failureMessage`), if any.
pub fn failure(object: &DynamicObject) -> Option<(String, String)> {
    let text = |key| {
        status_field(object, &[key])
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    match (text("failureReason"), text("failureMessage")) {
        (None, None) => None,
        (reason, message) => Some((reason.unwrap_or_default(), message.unwrap_or_default())),
    }
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
