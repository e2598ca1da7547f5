//! A Cluster's `<cluster>-kubeconfig` Secret made from its CA Secret
//! (`<cluster>-ca`), as upstream does ([`crate::workload::generated`]),
//! and made anew when its client certificate is within [`RENEW_BEFORE`]
//! of expiry. The Cluster controller writes it for a Cluster without a
//! control-plane provider; the WasmControlPlane controller for its own.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::context::Context;
use super::error::{Error, KindError};
use crate::api::{ApiEndpoint, CLUSTER_SECRET_TYPE, Reason, labels};
use crate::workload::ClusterKey;
use crate::workload::generated::{self, GenerateError, RENEW_BEFORE};

/// Whose kubeconfig, pointing where, written by whom.
pub struct Kubeconfig<'a> {
    /// The Cluster's namespace and name.
    pub key: &'a ClusterKey,
    /// Where its API server answers, once known.
    pub endpoint: Option<ApiEndpoint>,
    /// The Secret's controller.
    pub owner: OwnerReference,
    /// The object Events are about.
    pub reference: ObjectReference,
    /// The controller writing, for metrics.
    pub controller: &'static str,
}

impl Kubeconfig<'_> {
    /// Creates the Secret unless it exists (then rotates it when due);
    /// false when it cannot be made yet (no endpoint or no CA Secret).
    pub async fn ensure(&self, ctx: &Context) -> Result<bool, Error> {
        let name = self.key.kubeconfig_secret_name();
        if ctx
            .secret_metadata(&self.key.namespace, &name)
            .await?
            .is_some()
        {
            self.rotate(ctx).await?;
            return Ok(true);
        }
        self.create(ctx, &name).await
    }

    /// A kubeconfig made from the CA Secret; `None` while the endpoint or
    /// the CA Secret is not there.
    async fn signed_by_ca(&self, secrets: &Api<Secret>) -> Result<Option<String>, Error> {
        let Some(endpoint) = &self.endpoint else {
            return Ok(None);
        };
        let ca_name = format!("{}-ca", self.key.name);
        let Some(ca) = secrets
            .get_opt(&ca_name)
            .await
            .map_err(|source| Error::Get {
                kind: "Secret",
                name: ca_name.clone(),
                source,
            })?
        else {
            return Ok(None);
        };
        generated::generate(&self.key.name, endpoint, &ca)
            .map(Some)
            .map_err(|e| KubeconfigError(e).into())
    }

    /// Creates Secret `name`; false when it cannot be made yet. One made
    /// meanwhile by someone else stands.
    async fn create(&self, ctx: &Context, name: &str) -> Result<bool, Error> {
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &self.key.namespace);
        let Some(yaml) = self.signed_by_ca(&secrets).await? else {
            return Ok(false);
        };
        let secret = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(self.key.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    labels::CLUSTER_NAME.to_owned(),
                    self.key.name.clone(),
                )])),
                owner_references: Some(vec![self.owner.clone()]),
                ..kube::api::ObjectMeta::default()
            },
            type_: Some(CLUSTER_SECRET_TYPE.to_owned()),
            data: Some(generated::secret_data(yaml)),
            ..Secret::default()
        };
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => {
                ctx.metrics.write(self.controller, "kubeconfig");
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(true),
            Err(source) => Err(Error::Write {
                what: "Secret",
                name: name.to_owned(),
                source,
            }),
        }
    }

    /// Makes the kubeconfig anew from the CA when its client certificate
    /// expires within [`RENEW_BEFORE`] (upstream rotates any kubeconfig it
    /// can; one without a client certificate, or without a CA to sign a
    /// new one, is left as it is). The Secret is read only when it changed.
    async fn rotate(&self, ctx: &Context) -> Result<(), Error> {
        let key = self.key;
        let expiry = ctx
            .workload
            .client_certificate_expiry(key)
            .await
            .map_err(|source| Error::Workload(key.to_string(), source))?;
        let Some(expiry) = expiry else {
            return Ok(());
        };
        let renew_from = expiry.checked_sub(RENEW_BEFORE).unwrap_or(expiry);
        if Timestamp::now() < renew_from {
            return Ok(());
        }
        let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &key.namespace);
        let Some(yaml) = self.signed_by_ca(&secrets).await? else {
            return Ok(());
        };
        let name = key.kubeconfig_secret_name();
        let patch = json!({ "data": generated::secret_data(yaml) });
        secrets
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|source| Error::Write {
                what: "Secret",
                name: name.clone(),
                source,
            })?;
        ctx.metrics.write(self.controller, "kubeconfig");
        ctx.publish(
            &self.reference,
            Reason::KubeconfigRotated,
            format!(
                "kubeconfig Secret {name:?} made anew: its client certificate expires at {expiry}"
            ),
        )
        .await;
        Ok(())
    }
}

/// No kubeconfig could be generated from the Cluster's CA Secret.
#[derive(Debug, thiserror::Error)]
#[error("cannot generate the kubeconfig")]
pub struct KubeconfigError(#[source] GenerateError);

impl KindError for KubeconfigError {
    fn reason(&self) -> Reason {
        Reason::KubeconfigInvalid
    }

    fn metric_label(&self) -> &'static str {
        "kubeconfig"
    }
}
