//! What the Wasm provider controllers share: finding the Cluster API owner,
//! getting a provider ready to call (its module, world, config and
//! credentials), and turning the result of a step into the object's
//! conditions and failure fields.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::{Api, Resource, ResourceExt as _};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::conditions::{self, Desired};
use crate::api::provider::{HasProviderStatus, ProviderStatus, ServedBy};
use crate::api::providermodule::ProviderWorld;
use crate::api::{CLUSTER_API_GROUP, Cluster, ConditionType, MachinePool, ProviderModule, Reason};
use crate::wasm::types::{self, DeleteOutcome, ProviderError};
use crate::wasm::{CallError, LoadedProvider};

use super::context::Context;
use super::error::Error;
use super::outcome::Wait;
use super::write::{self, Scoped};

/// A provider ready to be called for one object.
pub struct Prepared {
    /// The version in service.
    pub provider: Arc<LoadedProvider>,
    /// `spec.config` as JSON text, valid against the provider's schema.
    pub config: String,
    /// The entries of the module's credentials Secret.
    pub credentials: Vec<types::Credential>,
}

impl Prepared {
    /// Which code answers.
    pub fn served_by(&self) -> ServedBy {
        ServedBy {
            digest: self.provider.digest.clone(),
            version: self.provider.info.version.clone(),
        }
    }
}

/// The owner of `object` of kind `kind` in the Cluster API group, if any.
pub fn capi_owner<K: Resource>(object: &K, kind: &str) -> Option<OwnerReference> {
    object
        .owner_references()
        .iter()
        .find(|r| r.kind == kind && r.api_version.split('/').next() == Some(CLUSTER_API_GROUP))
        .cloned()
}

/// The MachinePool owning `object` and its Cluster, or what is missing.
pub async fn pool_owner<K: Resource<DynamicType = ()>>(
    object: &K,
    ctx: &Context,
) -> Result<Result<(MachinePool, Cluster), Wait>, Error> {
    let namespace = object.namespace().unwrap_or_default();
    let Some(owner) = capi_owner(object, "MachinePool") else {
        return Ok(Err(Wait::on_change(
            Reason::WaitingForOwner,
            format!(
                "waiting for a MachinePool to reference this {}",
                K::kind(&())
            ),
        )));
    };
    let pools: Api<MachinePool> = Api::namespaced(ctx.client.clone(), &namespace);
    let Some(machine_pool) = pools
        .get_opt(&owner.name)
        .await
        .map_err(|source| Error::Get {
            kind: "MachinePool",
            name: owner.name.clone(),
            source,
        })?
    else {
        return Ok(Err(Wait::on_change(
            Reason::OwnerNotFound,
            format!("the owner MachinePool {:?} does not exist", owner.name),
        )));
    };
    let name = machine_pool.spec.cluster_name.clone();
    let cluster = Api::<Cluster>::namespaced(ctx.client.clone(), &namespace)
        .get_opt(&name)
        .await
        .map_err(|source| Error::Get {
            kind: "Cluster",
            name: name.clone(),
            source,
        })?
        .ok_or(Error::ClusterNotFound(name))?;
    Ok(Ok((machine_pool, cluster)))
}

/// Gets ProviderModule `name` ready to serve an object of `world` with
/// `config`: the module must exist, implement the world, have a version in
/// service, accept the config, and its credentials Secret must be readable.
/// What is missing is a [`Wait`] saying so.
pub async fn prepare(
    ctx: &Context,
    name: &str,
    world: ProviderWorld,
    config: Option<&Value>,
) -> Result<Result<Prepared, Wait>, Error> {
    let modules: Api<ProviderModule> = Api::all(ctx.client.clone());
    let Some(module) = modules.get_opt(name).await.map_err(|source| Error::Get {
        kind: "ProviderModule",
        name: name.to_owned(),
        source,
    })?
    else {
        return Ok(Err(Wait::on_change(
            Reason::ProviderNotFound,
            format!("ProviderModule {name:?} does not exist"),
        )));
    };
    if module.spec.world != world {
        return Ok(Err(Wait::on_change(
            Reason::ProviderWorldMismatch,
            format!(
                "ProviderModule {name:?} implements the {:?} world; this kind needs {world:?}",
                module.spec.world
            ),
        )));
    }
    let Some(provider) = ctx.runtime.registry().get(name) else {
        let why = module
            .status
            .as_ref()
            .and_then(|s| s.message.clone())
            .unwrap_or_else(|| "not loaded yet".into());
        return Ok(Err(Wait::on_change(
            Reason::ProviderNotReady,
            format!("ProviderModule {name:?} has no version in service: {why}"),
        )));
    };
    if let Err(invalid) = ctx.schemas.check(&provider, config) {
        return Ok(Err(Wait::on_change(
            Reason::InvalidConfig,
            invalid.to_string(),
        )));
    }
    let config = config.map_or_else(|| "{}".to_owned(), Value::to_string);
    let credentials = match module.spec.capabilities.and_then(|c| c.credentials_secret) {
        None => Vec::new(),
        Some(secret) => {
            if let Some(allowed) = &ctx.settings.credentials_namespace
                && *allowed != secret.namespace
            {
                return Ok(Err(Wait::on_change(
                    Reason::CredentialsNotAllowed,
                    format!(
                        "ProviderModule {name:?} names the credentials Secret {}/{}, but credentials are read only from namespace {allowed:?}",
                        secret.namespace, secret.name
                    ),
                )));
            }
            let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &secret.namespace);
            let found = api
                .get_opt(&secret.name)
                .await
                .map_err(|source| Error::Get {
                    kind: "Secret",
                    name: secret.name.clone(),
                    source,
                })?;
            let Some(found) = found else {
                // Secrets are not watched: look again later.
                return Ok(Err(Wait::after(
                    Reason::CredentialsNotFound,
                    format!(
                        "the credentials Secret {}/{} of ProviderModule {name:?} does not exist",
                        secret.namespace, secret.name
                    ),
                    std::time::Duration::from_secs(30),
                )));
            };
            found
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(key, value)| types::Credential {
                    key,
                    value: value.0,
                })
                .collect()
        }
    };
    Ok(Ok(Prepared {
        provider,
        config,
        credentials,
    }))
}

/// The call's view of an object.
pub fn object_ref<K: Resource>(object: &K) -> types::ObjectRef {
    types::ObjectRef {
        namespace: object.namespace().unwrap_or_default(),
        name: object.name_any(),
        uid: object.uid().unwrap_or_default(),
    }
}

/// The call's view of a Cluster.
pub fn cluster_info(cluster: &Cluster, kubernetes_version: Option<&str>) -> types::ClusterInfo {
    types::ClusterInfo {
        name: cluster.name_any(),
        namespace: cluster.namespace().unwrap_or_default(),
        control_plane_endpoint: cluster.endpoint().and_then(|e| {
            u16::try_from(e.port).ok().map(|port| types::ApiEndpoint {
                host: e.host.clone(),
                port,
            })
        }),
        kubernetes_version: kubernetes_version.map(str::to_owned),
    }
}

/// How a provider object's step ended.
pub enum Step {
    /// Done: the `Ready` condition holds with this reason and message.
    Done(Reason, String),
    /// The object or its Cluster is paused: nothing was done.
    Paused(String),
    /// Waiting for something.
    Wait(Wait),
}

/// Sets `status`'s `Ready`, `Paused` and failure fields for how the step ended.
pub fn report(status: &mut ProviderStatus, generation: Option<i64>, result: Result<&Step, &Error>) {
    let now = Time(Timestamp::now());
    let set = |status: &mut ProviderStatus, desired| {
        conditions::set(&mut status.conditions, desired, generation, &now);
    };
    let paused = matches!(result, Ok(Step::Paused(_)));
    set(
        status,
        if let Ok(Step::Paused(message)) = result {
            Desired::holds(ConditionType::Paused, Reason::Paused, message.clone())
        } else {
            Desired::fails(ConditionType::Paused, Reason::NotPaused, "")
        },
    );
    if paused {
        return;
    }
    match result {
        Ok(Step::Done(reason, message)) => {
            set(
                status,
                Desired::holds(ConditionType::Ready, *reason, message.clone()),
            );
            status.failure_reason = None;
            status.failure_message = None;
            status.observed_generation = generation;
        }
        Ok(Step::Wait(wait)) => {
            set(
                status,
                Desired::fails(ConditionType::Ready, wait.reason, wait.message.clone()),
            );
            status.observed_generation = generation;
        }
        Ok(Step::Paused(_)) => {}
        Err(error) => {
            set(
                status,
                Desired::fails(
                    ConditionType::Ready,
                    error.reason(),
                    crate::report::error_chain(error),
                ),
            );
            if let Error::Guest(CallError::Provider {
                error: ProviderError::Terminal(terminal),
                ..
            }) = error
            {
                status.failure_reason = Some(failure_reason(&terminal.reason));
                status.failure_message = Some(terminal.message.clone());
            }
        }
    }
}

/// Ends a provider object's reconcile: once deletion is complete, removes
/// `finalizer`; otherwise sets the conditions and failure fields for how the
/// step ended, writes the status if it changed (with an Event per changed
/// condition), and returns the action or the error.
#[allow(clippy::too_many_arguments)] // the parts of one object's reconcile, passed as they are
pub async fn conclude<K, S>(
    ctx: &Context,
    controller: &'static str,
    manager: &str,
    object: &K,
    finalizer: Option<&str>,
    before: &S,
    mut status: S,
    result: Result<(Step, Option<std::time::Duration>), Error>,
) -> Result<kube::runtime::controller::Action, Error>
where
    K: Resource<DynamicType = ()> + Scoped + Clone + DeserializeOwned + std::fmt::Debug,
    S: HasProviderStatus + Serialize + PartialEq,
{
    let uid = object.uid().unwrap_or_default();
    if let Some(finalizer) = finalizer
        && matches!(result, Ok((Step::Done(Reason::DeletionCompleted, _), _)))
    {
        write::remove_finalizer(ctx, controller, object, finalizer).await?;
        ctx.succeeded(&uid);
        return Ok(kube::runtime::controller::Action::await_change());
    }
    report(
        status.common(),
        object.meta().generation,
        result.as_ref().map(|(step, _)| step),
    );
    if status != *before {
        write::status(ctx, controller, manager, object, &status).await?;
        ctx.announce(
            &object.object_ref(&()),
            &before.common_ref().conditions,
            &status.common_ref().conditions,
        )
        .await;
    }
    let (step, requeue) = result?;
    ctx.succeeded(&uid);
    Ok(action(&step, requeue))
}

/// How a provider's delete call ended, as a step: done, or in progress
/// (look again when the provider says).
pub fn deletion(outcome: DeleteOutcome, what: &str) -> (Step, Option<std::time::Duration>) {
    match outcome {
        DeleteOutcome::Done => (Step::Done(Reason::DeletionCompleted, String::new()), None),
        DeleteOutcome::InProgress(seconds) => (
            Step::Wait(Wait::after(
                Reason::WaitingForProviderDeletion,
                format!("the provider is removing {what}"),
                std::time::Duration::from_secs(u64::from(seconds.max(1))),
            )),
            None,
        ),
    }
}

/// The action after a step that ended without error: the soonest of what
/// the step waits for and the provider's own requeue.
pub fn action(
    result: &Step,
    requeue: Option<std::time::Duration>,
) -> kube::runtime::controller::Action {
    use super::outcome::{Outcome, action};
    let step = match result {
        Step::Wait(wait) => Outcome::Wait(wait.clone()),
        Step::Paused(_) | Step::Done(..) => Outcome::Continue,
    };
    action(&[
        step,
        requeue.map_or(Outcome::Continue, Outcome::RequeueAfter),
    ])
}

/// A provider's terminal reason as a CamelCase token (it is guest input).
fn failure_reason(reason: &str) -> String {
    let token: String = reason
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(64)
        .collect();
    if token.is_empty() {
        "ProviderFailed".into()
    } else {
        token
    }
}
