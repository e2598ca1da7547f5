//! The WasmBootstrapConfig controller: bootstrap data from a
//! bootstrap-provider component, stored in a Secret the config owns.

mod data;
mod reconcile;
mod tokens;

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt as _;
use kube::runtime::Controller;

use super::context::Context;
use super::reconciler::{error_policy, reconcile};
use super::watches;
use crate::api::WasmBootstrapConfig;
use crate::api::provider::BOOTSTRAP_GROUP;

pub use data::GENERATION_ANNOTATION;
pub use tokens::{
    CONFIG_UID_LABEL, TOKEN_EXPIRATION_ANNOTATION, TOKEN_ID_ANNOTATION, TOKEN_REPLICAS_ANNOTATION,
    fit_for,
};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "bootstrap";

/// Runs the controller until `shutdown` completes.
pub fn run(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let caches = &ctx.caches;
    let store = caches.configs.store().clone();
    Controller::for_shared_stream(caches.configs.subscribe(), store.clone())
        .with_config(ctx.settings.controller(ctx.settings.debounce))
        // Its data Secret, by owner reference.
        .owns_shared_stream(caches.secrets.subscribe())
        .watches_shared_stream(caches.pools.subscribe(), |pool| {
            watches::referenced(
                pool.spec.template.spec.bootstrap.config_ref.as_ref()?,
                (BOOTSTRAP_GROUP, "WasmBootstrapConfig"),
                pool.metadata.namespace.as_deref(),
            )
        })
        .watches_shared_stream(
            caches.clusters.subscribe(),
            watches::by_cluster(store.clone(), caches.configs_by_cluster.clone()),
        )
        .watches_shared_stream(
            caches.modules.subscribe(),
            watches::by_provider(store.clone()),
        )
        .reconcile_on(watches::installed(ctx.runtime.registry().installs(), store))
        .graceful_shutdown_on(shutdown)
        .run(
            reconcile::<WasmBootstrapConfig>,
            error_policy::<WasmBootstrapConfig>,
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
}
