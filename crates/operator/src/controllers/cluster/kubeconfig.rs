//! A Cluster without a control-plane provider: its control plane counts as
//! initialized once its `<cluster>-kubeconfig` Secret exists, as an
//! externally managed one. Without the Secret, one is generated from the
//! Cluster's CA (`<cluster>-ca`) as upstream does
//! ([`crate::controllers::kubeconfig`]), and made anew before its client
//! certificate expires.

use std::time::Duration;

use kube::ResourceExt as _;

use super::CONTROLLER;
use super::infrastructure::initialization;
use crate::api::conditions::Desired;
use crate::api::{Cluster, ConditionType, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::kubeconfig::Kubeconfig;
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::reconciler::Scope;
use crate::workload::ClusterKey;

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
    let kubeconfig = Kubeconfig {
        key: &key,
        endpoint: scope
            .object
            .endpoint()
            .cloned()
            .or_else(|| scope.found.endpoint.clone()),
        owner: scope.controller_reference(),
        reference: scope.reference(),
        controller: CONTROLLER,
    };
    if !kubeconfig.ensure(ctx).await? {
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
