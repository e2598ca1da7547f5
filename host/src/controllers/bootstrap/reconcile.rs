//! Generating a WasmBootstrapConfig's data: wait for a MachinePool owner and
//! the Cluster's endpoint, call the guest, store the data in a Secret the
//! config owns, and report it per the bootstrap contract.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource as _, ResourceExt as _};
use serde_json::json;

use super::CONTROLLER;
use crate::api::provider::{
    BOOTSTRAP_FIELD_MANAGER, BootstrapInitialization, WasmBootstrapConfigStatus,
};
use crate::api::providermodule::ProviderWorld;
use crate::api::{CLUSTER_SECRET_TYPE, Reason, WasmBootstrapConfig, labels};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Wait;
use crate::controllers::provider::{self, Step};

use crate::wasm::bootstrap::GenerateRequest;
use crate::wasm::types::{BootstrapData, BootstrapFormat};

/// On the data Secret: the config generation the data was generated from.
pub const GENERATION_ANNOTATION: &str = "bootstrap.capwasm.dev/config-generation";

pub async fn reconcile(
    config: Arc<WasmBootstrapConfig>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile(CONTROLLER);
    // The data Secret goes with the config (owner reference); nothing to clean up.
    if config.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let before = config.status.clone().unwrap_or_default();
    let mut status = before.clone();
    let result = generate(&config, &ctx, &mut status)
        .await
        .map(|step| (step, None));
    provider::conclude(
        &ctx,
        CONTROLLER,
        BOOTSTRAP_FIELD_MANAGER,
        &*config,
        None,
        &before,
        status,
        result,
    )
    .await
}

#[allow(clippy::needless_pass_by_value)] // kube-runtime's error_policy signature
pub fn error_policy(config: Arc<WasmBootstrapConfig>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.error_action(CONTROLLER, &config.uid().unwrap_or_default(), error)
}

async fn generate(
    config: &WasmBootstrapConfig,
    ctx: &Context,
    status: &mut WasmBootstrapConfigStatus,
) -> Result<Step, Error> {
    let namespace = config.namespace().unwrap_or_default();
    let (pool, cluster) = match provider::pool_owner(config, ctx).await? {
        Ok(found) => found,
        Err(wait) => return Ok(Step::Wait(wait)),
    };
    let cluster_name = &pool.spec.cluster_name;
    if let Some(why) = crate::controllers::paused::why(config, &cluster) {
        return Ok(Step::Paused(why));
    }
    if cluster.endpoint().is_none() {
        return Ok(Step::Wait(Wait::on_change(
            Reason::WaitingForControlPlaneEndpoint,
            format!("Cluster {cluster_name:?} has no control-plane endpoint yet"),
        )));
    }

    let secret_name = config.name_any();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let generation = config.metadata.generation.unwrap_or_default().to_string();
    let existing = secrets
        .get_opt(&secret_name)
        .await
        .map_err(|source| Error::Get {
            kind: "Secret",
            name: secret_name.clone(),
            source,
        })?;
    // Data is generated once per generation of the config: a new provider
    // version serves new configs, it does not rewrite what machines booted with.
    if existing.is_some_and(|s| s.annotations().get(GENERATION_ANNOTATION) == Some(&generation)) {
        status.ready = true;
        status.data_secret_name = Some(secret_name.clone());
        status.initialization = Some(BootstrapInitialization {
            data_secret_created: Some(true),
        });
        return Ok(Step::Done(
            Reason::DataSecretAvailable,
            format!("bootstrap data is in Secret {secret_name:?}"),
        ));
    }

    let prepared = match provider::prepare(
        ctx,
        &config.spec.provider,
        ProviderWorld::Bootstrap,
        config.spec.config.as_ref(),
    )
    .await?
    {
        Ok(prepared) => prepared,
        Err(wait) => return Ok(Step::Wait(wait)),
    };
    let request = GenerateRequest {
        config_object: provider::object_ref(config),
        cluster: provider::cluster_info(&cluster, pool.spec.template.spec.version.as_deref()),
        config: prepared.config.clone(),
        owner_name: pool.name_any(),
        idempotency_key: config.uid().unwrap_or_default(),
        credentials: prepared.credentials.clone(),
    };
    let module = config.spec.provider.clone();
    let data = ctx
        .runtime
        .blocking(move |runtime| runtime.generate(&module, &request))
        .await
        .map_err(Error::Guest)?;

    store_data(ctx, config, &secret_name, cluster_name, &generation, data).await?;
    ctx.publish(
        &config.object_ref(&()),
        Reason::DataSecretCreated,
        format!(
            "generated bootstrap data into Secret {secret_name:?} with {}",
            prepared.provider.digest
        ),
    )
    .await;

    status.ready = true;
    status.data_secret_name = Some(secret_name.clone());
    status.initialization = Some(BootstrapInitialization {
        data_secret_created: Some(true),
    });
    status.common.served_by = Some(prepared.served_by());
    Ok(Step::Done(
        Reason::DataSecretCreated,
        format!("bootstrap data is in Secret {secret_name:?}"),
    ))
}

/// Writes the data Secret: owned by the config, labelled with the cluster,
/// annotated with the config generation it was generated from.
async fn store_data(
    ctx: &Context,
    config: &WasmBootstrapConfig,
    secret_name: &str,
    cluster_name: &str,
    generation: &str,
    data: BootstrapData,
) -> Result<(), Error> {
    let namespace = config.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name,
            "namespace": namespace,
            "labels": { labels::CLUSTER_NAME: cluster_name },
            "annotations": { GENERATION_ANNOTATION: generation },
            "ownerReferences": [config.controller_owner_ref(&()).unwrap_or_default()],
        },
        "type": CLUSTER_SECRET_TYPE,
        "data": BTreeMap::from([
            ("value", ByteString(data.value)),
            ("format", ByteString(format_name(data.format).as_bytes().to_vec())),
        ]),
    });
    secrets
        .patch(
            secret_name,
            &PatchParams::apply(BOOTSTRAP_FIELD_MANAGER).force(),
            &Patch::Apply(&secret),
        )
        .await
        .map_err(|source| Error::Write {
            what: "bootstrap data Secret",
            name: secret_name.to_owned(),
            source,
        })?;
    ctx.metrics.write(CONTROLLER, "secret");
    Ok(())
}

/// The `format` key's value, as Cluster API names bootstrap formats.
fn format_name(format: BootstrapFormat) -> &'static str {
    match format {
        BootstrapFormat::CloudConfig => "cloud-config",
        BootstrapFormat::Ignition => "ignition",
        BootstrapFormat::ShellScript => "shell-script",
    }
}
