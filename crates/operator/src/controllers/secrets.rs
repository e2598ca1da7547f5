//! Secrets as a reconcile reads them. Their metadata comes from the cache
//! of labelled Secrets, or from the server for one the cache does not hold
//! (unlabelled, or too new for it): the cache alone never says a Secret is
//! not there. Their data is read when needed and, for the Secrets a
//! reconcile hands on (a pool's bootstrap data, to its infrastructure
//! provider), kept by the version the cache says it is at: read once per
//! change of the Secret, not once per reconcile, and only while the cache
//! holds it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::{Api, Client};

use super::cache::Cache;

/// A Secret's data.
pub type Data = Arc<BTreeMap<String, ByteString>>;

/// Reads Secrets; data kept by (namespace, name), with the resourceVersion
/// it was read at.
pub struct Secrets {
    client: Client,
    kept: Mutex<HashMap<(String, String), (String, Data)>>,
}

impl Secrets {
    /// Reads Secrets with `client`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            kept: Mutex::new(HashMap::new()),
        }
    }

    /// The metadata of Secret `name` in `namespace`: as `secrets` (the cache)
    /// holds it, or else as the server has it. `None` if there is none.
    pub async fn metadata(
        &self,
        secrets: &Cache<PartialObjectMeta<Secret>>,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<PartialObjectMeta<Secret>>>, kube::Error> {
        if let Some(cached) = secrets.get(Some(namespace), name) {
            return Ok(Some(cached));
        }
        Ok(Api::<Secret>::namespaced(self.client.clone(), namespace)
            .get_metadata_opt(name)
            .await?
            .map(Arc::new))
    }

    /// The data of Secret `name` in `namespace`: kept, if `secrets` (the
    /// cache of their metadata) says it has not changed since it was read;
    /// else read now. `None` if there is no such Secret.
    pub async fn data(
        &self,
        secrets: &Cache<PartialObjectMeta<Secret>>,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Data>, kube::Error> {
        let key = (namespace.to_owned(), name.to_owned());
        let cached = secrets.get(Some(namespace), name);
        let version = cached
            .as_ref()
            .and_then(|s| s.metadata.resource_version.clone());
        if let Some(version) = &version
            && let Some((read_at, data)) = self.kept().get(&key)
            && read_at == version
        {
            return Ok(Some(data.clone()));
        }
        let Some(secret) = Api::<Secret>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await?
        else {
            self.kept().remove(&key);
            return Ok(None);
        };
        let data: Data = Arc::new(secret.data.unwrap_or_default());
        // Kept only for Secrets the cache follows: others are read each time.
        if cached.is_some()
            && let Some(read_at) = secret.metadata.resource_version
        {
            let mut kept = self.kept();
            kept.insert(key, (read_at, data.clone()));
            if kept.len() > secrets.store().len() + 64 {
                kept.retain(|(namespace, name), _| secrets.get(Some(namespace), name).is_some());
            }
        }
        Ok(Some(data))
    }

    fn kept(&self) -> MutexGuard<'_, HashMap<(String, String), (String, Data)>> {
        // Every change under the lock is one insert, remove or retain.
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
