//! The requests of `capwasm provider test` fixtures, one a call.

#[allow(clippy::wildcard_imports)]
use super::*;

/// `bootstrap.generate`'s request.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GenerateRequest {
    config_object: ObjectRef,
    cluster: ClusterInfo,
    #[serde(default = "empty_config")]
    pub config: Value,
    owner_name: String,
    idempotency_key: String,
    #[serde(default)]
    credentials: Vec<Credential>,
}

impl GenerateRequest {
    pub fn into_wit(self) -> bootstrap::GenerateRequest {
        bootstrap::GenerateRequest {
            config: self.config.to_string(),
            config_object: self.config_object.into(),
            cluster: self.cluster.into(),
            owner_name: self.owner_name,
            idempotency_key: self.idempotency_key,
            credentials: credentials(self.credentials),
        }
    }
}

/// `machine-pools.reconcile`'s request.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReconcilePoolRequest {
    pool: ObjectRef,
    cluster: ClusterInfo,
    #[serde(default = "empty_config")]
    pub config: Value,
    replicas: u32,
    #[serde(default)]
    bootstrap_data: Option<BootstrapData>,
    #[serde(default)]
    instances: Vec<Instance>,
    idempotency_key: String,
    #[serde(default)]
    credentials: Vec<Credential>,
}

impl ReconcilePoolRequest {
    pub fn into_wit(self) -> machine_pools::ReconcileRequest {
        machine_pools::ReconcileRequest {
            config: self.config.to_string(),
            pool: self.pool.into(),
            cluster: self.cluster.into(),
            replicas: self.replicas,
            bootstrap_data: self.bootstrap_data.map(Into::into),
            instances: instances(self.instances),
            idempotency_key: self.idempotency_key,
            credentials: credentials(self.credentials),
        }
    }
}

/// `machine-pools.delete`'s request.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeletePoolRequest {
    pool: ObjectRef,
    cluster: ClusterInfo,
    #[serde(default = "empty_config")]
    pub config: Value,
    #[serde(default)]
    instances: Vec<Instance>,
    idempotency_key: String,
    #[serde(default)]
    credentials: Vec<Credential>,
}

impl DeletePoolRequest {
    pub fn into_wit(self) -> machine_pools::DeleteRequest {
        machine_pools::DeleteRequest {
            config: self.config.to_string(),
            pool: self.pool.into(),
            cluster: self.cluster.into(),
            instances: instances(self.instances),
            idempotency_key: self.idempotency_key,
            credentials: credentials(self.credentials),
        }
    }
}

/// `clusters.reconcile`'s and `clusters.delete`'s request.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterRequest {
    cluster_object: ObjectRef,
    cluster: ClusterInfo,
    #[serde(default = "empty_config")]
    pub config: Value,
    idempotency_key: String,
    #[serde(default)]
    credentials: Vec<Credential>,
}

impl ClusterRequest {
    pub fn into_wit(self) -> clusters::ClusterRequest {
        clusters::ClusterRequest {
            config: self.config.to_string(),
            cluster_object: self.cluster_object.into(),
            cluster: self.cluster.into(),
            idempotency_key: self.idempotency_key,
            credentials: credentials(self.credentials),
        }
    }
}

/// `provider-ids.provider-id`'s arguments.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderIdRequest {
    #[serde(default = "empty_config")]
    pub config: Value,
    pub instance: Instance,
}

/// `provider-ids.owns`'s argument.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OwnsRequest {
    pub provider_id: String,
}

/// The calls without arguments (`info`, `config-schema`) take `{}` or nothing.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoArguments {}
