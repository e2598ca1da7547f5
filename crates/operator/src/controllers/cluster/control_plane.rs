//! The Cluster's control-plane phase: with a control-plane provider, adopt
//! its object and follow its initialization and endpoint; without one, the
//! control plane is there once its kubeconfig Secret is (generated from the
//! Cluster's CA if need be, see [`super::kubeconfig`]).

use super::infrastructure::{endpoint_of, initialization};
use super::kubeconfig;
use crate::api::conditions::Desired;
use crate::api::{Cluster, ConditionType, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::external::{self, Mirror, ReferenceError};
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;

pub async fn run(scope: &mut Scope<Cluster>, ctx: &Context) -> Result<Outcome, Error> {
    let initialized = scope
        .status
        .initialization
        .as_ref()
        .and_then(|i| i.control_plane_initialized)
        == Some(true);
    let Some(reference) = scope.object.spec.control_plane_ref.clone() else {
        return kubeconfig::run(scope, ctx, initialized).await;
    };
    let (resolved, object) = match scope.adopt(ctx, &reference).await {
        Ok(found) => found,
        Err(Error::Reference {
            source: ReferenceError::NotFound { .. },
            ..
        }) => {
            let message = format!("{reference} does not exist");
            return Ok(scope.waits(Desired::fails(
                ConditionType::ControlPlaneInitialized,
                Reason::ReferenceNotFound,
                message,
            )));
        }
        Err(error) => return Err(error),
    };
    let ready = external::contract_flag(
        &object,
        resolved.contract,
        "controlPlaneInitialized",
        "initialized",
    );
    scope.set(
        Mirror {
            type_: ConditionType::ControlPlaneInitialized,
            ready: Reason::Ready,
            waiting: Reason::WaitingForControlPlane,
        }
        .of(&object, ready || initialized, &reference),
    );
    // As upstream: the control plane's endpoint counts once it is initialized.
    if (ready || initialized)
        && scope.object.endpoint().is_none()
        && scope.found.endpoint.is_none()
        && let Some(endpoint) = endpoint_of(&object)
    {
        scope.found.endpoint = Some(endpoint);
    }
    if ready {
        initialization(scope).control_plane_initialized = Some(true);
    }
    Ok(Outcome::Continue)
}
