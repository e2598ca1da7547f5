//! A Cluster without a control-plane provider: its control plane counts as
//! initialized once its `<cluster>-kubeconfig` Secret exists, as an
//! externally managed one. Without the Secret, one is generated from the
//! Cluster's CA (`<cluster>-ca`) as upstream does
//! ([`crate::workload::generated`]); a generated kubeconfig whose client
//! certificate is within [`RENEW_BEFORE`] of expiry is made anew.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt as _};
use serde_json::json;

use super::CONTROLLER;
use super::infrastructure::initialization;
use crate::api::conditions::Desired;
use crate::api::{CLUSTER_SECRET_TYPE, Cluster, ConditionType, Reason, labels};
use crate::controllers::context::Context;
use crate::controllers::error::{Error, KindError};
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::reconciler::Scope;
use crate::workload::ClusterKey;
use crate::workload::generated::{self, GenerateError, RENEW_BEFORE};

/// How soon to look for a kubeconfig Secret that is not there yet (labelled
/// Secrets are watched; this catches one created without the label).
const KUBECONFIG_POLL: Duration = Duration::from_secs(30);

pub async fn run(
    scope: &mut Scope<Cluster>,
    ctx: &Context,
    initialized: bool,
) -> Result<Outcome, Error> {
    let key = ClusterKey::new(scope.namespace(), scope.object.name_any());
    let name = key.kubeconfig_secret_name();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let exists = ctx.secret_metadata(&key.namespace, &name).await?.is_some();
    if exists {
        rotate(scope, ctx, &key).await?;
    } else if !generate(scope, ctx, &secrets, &name).await? {
        let message = format!(
            "waiting for the kubeconfig Secret {name:?}, or for a control-plane endpoint and the CA Secret \"{}-ca\" to generate it",
            key.name
        );
        scope.set(Desired::fails(
            ConditionType::ControlPlaneInitialized,
            Reason::KubeconfigSecretNotFound,
            message.clone(),
        ));
        return Ok(Outcome::Wait(Wait::after(
            Reason::KubeconfigSecretNotFound,
            message,
            KUBECONFIG_POLL,
        )));
    }
    if !initialized {
        initialization(scope).control_plane_initialized = Some(true);
        scope.set(Desired::holds(
            ConditionType::ControlPlaneInitialized,
            Reason::Ready,
            format!("kubeconfig Secret {name:?} exists"),
        ));
    }
    Ok(Outcome::Continue)
}

/// A kubeconfig for the Cluster made from its CA Secret; `None` while the
/// endpoint or the CA Secret is not there.
async fn from_ca(scope: &Scope<Cluster>, secrets: &Api<Secret>) -> Result<Option<String>, Error> {
    let Some(endpoint) = scope
        .object
        .endpoint()
        .cloned()
        .or_else(|| scope.found.endpoint.clone())
    else {
        return Ok(None);
    };
    let cluster = scope.object.name_any();
    let ca_name = format!("{cluster}-ca");
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
    generated::generate(&cluster, &endpoint, &ca)
        .map(Some)
        .map_err(|e| KubeconfigError(e).into())
}

/// Creates kubeconfig Secret `name` from the Cluster's CA; false when it
/// cannot be made yet. One made meanwhile by someone else stands.
async fn generate(
    scope: &Scope<Cluster>,
    ctx: &Context,
    secrets: &Api<Secret>,
    name: &str,
) -> Result<bool, Error> {
    let Some(yaml) = from_ca(scope, secrets).await? else {
        return Ok(false);
    };
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(scope.namespace()),
            labels: Some(BTreeMap::from([(
                labels::CLUSTER_NAME.to_owned(),
                scope.object.name_any(),
            )])),
            owner_references: Some(vec![scope.controller_reference()]),
            ..kube::api::ObjectMeta::default()
        },
        type_: Some(CLUSTER_SECRET_TYPE.to_owned()),
        data: Some(generated::secret_data(yaml)),
        ..Secret::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            ctx.metrics.write(CONTROLLER, "kubeconfig");
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

/// Makes the kubeconfig anew from the Cluster's CA when its client
/// certificate expires within [`RENEW_BEFORE`] (upstream rotates any
/// kubeconfig it can; one without a client certificate, or without a CA to
/// sign a new one, is left as it is). The Secret is read only when it
/// changed.
async fn rotate(scope: &Scope<Cluster>, ctx: &Context, key: &ClusterKey) -> Result<(), Error> {
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
    let Some(yaml) = from_ca(scope, &secrets).await? else {
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
    ctx.metrics.write(CONTROLLER, "kubeconfig");
    ctx.publish(
        &scope.reference(),
        Reason::KubeconfigRotated,
        format!("kubeconfig Secret {name:?} made anew: its client certificate expires at {expiry}"),
    )
    .await;
    Ok(())
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
