//! The kubeconfig Secrets of workload clusters: which version a client was
//! built from, read from the server only when the cache of labelled Secrets
//! says it changed (or does not hold it), and when its client certificate
//! expires.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};

use super::cluster::ClusterKey;
use super::error::Error;
use super::generated;

pub(super) use generated::KUBECONFIG_KEY;

/// Reads kubeconfig Secrets, and keeps when their client certificates expire.
pub(super) struct KubeconfigSecrets {
    management: Client,
    /// The management cluster's labelled Secrets, metadata only.
    cache: Store<PartialObjectMeta<Secret>>,
    /// When each cluster's kubeconfig client certificate expires, by the
    /// version of the Secret it was read from.
    expiries: Mutex<HashMap<ClusterKey, (SecretVersion, Option<Timestamp>)>>,
}

/// Which version of a kubeconfig Secret a client was built from. A Secret
/// deleted and created again has a new uid even if the resourceVersion
/// happened to match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct SecretVersion {
    pub(super) uid: Option<String>,
    pub(super) resource_version: Option<String>,
}

impl SecretVersion {
    pub(super) fn of(metadata: &ObjectMeta) -> Self {
        Self {
            uid: metadata.uid.clone(),
            resource_version: metadata.resource_version.clone(),
        }
    }
}

impl KubeconfigSecrets {
    pub(super) fn new(management: Client, cache: Store<PartialObjectMeta<Secret>>) -> Self {
        Self {
            management,
            cache,
            expiries: Mutex::new(HashMap::new()),
        }
    }

    /// Forgets what was read of the cluster's Secret.
    pub(super) fn forget(&self, cluster: &ClusterKey) {
        self.expiries().remove(cluster);
    }

    /// When the client certificate of the cluster's kubeconfig expires, if
    /// it has one (whether or not the kubeconfig is otherwise usable). The
    /// Secret is read only when the cache says it changed.
    pub(super) async fn client_certificate_expiry(
        &self,
        cluster: &ClusterKey,
    ) -> Result<Option<Timestamp>, Error> {
        let cached = self.cached_version(cluster);
        if let Some(version) = &cached
            && let Some((read, expiry)) = self.expiries().get(cluster)
            && read == version
        {
            return Ok(*expiry);
        }
        let Some(secret) = self.read(cluster).await? else {
            self.expiries().remove(cluster);
            return Ok(None);
        };
        let expiry = secret
            .data
            .as_ref()
            .and_then(|data| data.get(KUBECONFIG_KEY))
            .and_then(|value| generated::client_certificate_expiry(&value.0));
        self.expiries().insert(
            cluster.clone(),
            (SecretVersion::of(&secret.metadata), expiry),
        );
        Ok(expiry)
    }

    /// The version of the cluster's kubeconfig Secret the cache holds, if
    /// it holds it (it has the cluster-name label).
    pub(super) fn cached_version(&self, cluster: &ClusterKey) -> Option<SecretVersion> {
        let name = cluster.kubeconfig_secret_name();
        self.cache
            .get(&ObjectRef::new(&name).within(&cluster.namespace))
            .map(|cached| SecretVersion::of(&cached.metadata))
    }

    /// The cluster's kubeconfig Secret, read from the server.
    pub(super) async fn read(&self, cluster: &ClusterKey) -> Result<Option<Secret>, Error> {
        let name = cluster.kubeconfig_secret_name();
        Api::<Secret>::namespaced(self.management.clone(), &cluster.namespace)
            .get_opt(&name)
            .await
            .map_err(|source| Error::GetKubeconfigSecret {
                namespace: cluster.namespace.clone(),
                name,
                source,
            })
    }

    fn expiries(&self) -> MutexGuard<'_, HashMap<ClusterKey, (SecretVersion, Option<Timestamp>)>> {
        // Every change is a single insert or remove.
        self.expiries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
