//! Referenced objects of kinds known only at run time (bootstrap configs,
//! infrastructure and control-plane objects): their API version comes from
//! the contract labels of their CRD, as upstream resolves v1beta2
//! references, their contract fields are read by contract version, and
//! they are read from caches of their kinds ([`watch`]).

mod contract;
mod resolve;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

pub use contract::{Mirror, condition, contract_flag, failure, spec_field, status_field};
pub use watch::Changed;

use super::cache::Caches;
use super::metrics::Metrics;
use super::own_writes::OwnWrites;
use crate::api::{Cluster, ContractVersionedObjectReference, MachinePool, Reason, labels};

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

/// Who adopts a referenced object, and as what.
pub struct Adopter<'a> {
    /// The owner reference it gets (its controller's, or not).
    pub owner: OwnerReference,
    /// The Cluster it is labelled with.
    pub cluster: &'a str,
    /// The field manager of the adoption.
    pub manager: &'a str,
}

/// The served version (and contract) of the reference's kind among `crds`:
/// the CRD named `<plural>.<group>`, or else the one CRD of that group and kind.
pub fn resolve_in(
    crds: &kube::runtime::reflector::Store<CustomResourceDefinition>,
    reference: &ContractVersionedObjectReference,
) -> Result<Resolved, ReferenceError> {
    let name = format!(
        "{}.{}",
        resolve::plural(&reference.kind.to_ascii_lowercase()),
        reference.api_group
    );
    let matches = |crd: &CustomResourceDefinition| {
        crd.spec.group == reference.api_group && crd.spec.names.kind == reference.kind
    };
    let crd = crds
        .get(&kube::runtime::reflector::ObjectRef::new(&name))
        .filter(|crd| matches(crd))
        .or_else(|| crds.find(|crd| matches(crd)))
        .ok_or_else(|| ReferenceError::NoCrd {
            group: reference.api_group.clone(),
            kind: reference.kind.clone(),
        })?;
    resolve::resolve_from_crd(&crd, reference)
}

/// Resolves references from the cached CRDs, and reads, adopts and deletes
/// referenced objects, reading them from caches of their kinds.
pub struct ExternalObjects {
    client: Client,
    crds: kube::runtime::reflector::Store<CustomResourceDefinition>,
    kinds: watch::Kinds,
    own_writes: Arc<OwnWrites>,
}

impl ExternalObjects {
    /// Uses `client` for writes and watches, and `caches` for CRDs and to
    /// map a changed object to the MachinePools and Clusters that own or
    /// reference it, which the returned streams yield. An adoption's answer
    /// is read back through `own_writes` until the cache shows it.
    pub fn new(
        client: Client,
        caches: &Caches,
        metrics: Metrics,
        own_writes: Arc<OwnWrites>,
    ) -> (Self, Changed<MachinePool>, Changed<Cluster>) {
        let (kinds, pools, clusters) = watch::Kinds::new(
            client.clone(),
            metrics,
            watch::Referrers::of(caches),
            caches.shard,
            watch::Own::kinds(caches),
        );
        let external = Self {
            client,
            crds: caches.crds.store().clone(),
            kinds,
            own_writes,
        };
        (external, pools, clusters)
    }

    /// The served version (and contract) of the reference's kind, from the
    /// CRD named `<plural>.<group>`, or else the one CRD of that group and kind.
    pub fn resolve(
        &self,
        reference: &ContractVersionedObjectReference,
    ) -> Result<Resolved, ReferenceError> {
        resolve_in(&self.crds, reference)
    }

    /// The cache of the resolved kind, once it has listed its objects.
    async fn cache(&self, resolved: &Resolved) -> Result<Arc<dyn watch::Objects>, ReferenceError> {
        let cache = self.kinds.cache(&resolved.resource);
        let started = std::time::Instant::now();
        tokio::time::timeout(FIRST_LIST, cache.ready())
            .await
            .map_err(|_| ReferenceError::NotListed {
                kind: resolved.resource.kind.clone(),
            })?;
        if started.elapsed() > Duration::from_millis(500) {
            tracing::info!(kind = resolved.resource.kind, waited = ?started.elapsed(), "waited for the first list of a referenced kind");
        }
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
            .map(|cached| self.own_writes.latest(cached))
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

    /// Makes `adopter`'s owner an owner of `object` (its controller if the
    /// reference says so) and labels it with the cluster name, in one
    /// server-side apply, unless both are already in place. Refuses an
    /// object another controller owns. Whether it wrote.
    pub async fn adopt(
        &self,
        resolved: &Resolved,
        object: &DynamicObject,
        adopter: Adopter<'_>,
    ) -> Result<bool, ReferenceError> {
        let Adopter {
            owner,
            cluster: cluster_name,
            manager: field_manager,
        } = adopter;
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
        let answer = api
            .patch(
                &name,
                &PatchParams::apply(field_manager).force(),
                &Patch::Apply(patch),
            )
            .await
            .map_err(|source| ReferenceError::Adopt { kind, name, source })?;
        self.own_writes.wrote(object, answer);
        Ok(true)
    }
}
