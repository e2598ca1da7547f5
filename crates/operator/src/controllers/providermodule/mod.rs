//! The ProviderModule controller: loads each module's component (fetched,
//! verified against its digest, compiled or taken from the precompiled
//! cache, checked) and swaps it into service; a module that fails any step
//! never replaces the working version, and its status says why.

mod load;
mod oci;
mod reconcile;
mod rollout;
mod source;
mod status;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use kube::runtime::Controller;
use kube::runtime::reflector::ObjectRef;

use super::context::Context;
use super::reconciler::{error_policy, reconcile};
use crate::api::ProviderModule;
use crate::api::providermodule::Verification;

pub use reconcile::FINALIZER;
pub use source::DEFAULT_CONFIG_MAP_KEY;

/// How soon to look again for a component that could not be fetched (a
/// file may appear as a volume is mounted, a registry come back;
/// ConfigMaps are watched).
const FETCH_RETRY: Duration = Duration::from_secs(30);

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "providermodule";

/// Runs the controller until `shutdown` completes.
pub fn run(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> {
    let caches = &ctx.caches;
    let store = caches.modules.store().clone();
    let modules = store.clone();
    Controller::for_shared_stream(caches.modules.subscribe(), store)
        .with_config(ctx.settings.controller(ctx.settings.debounce))
        // ConfigMap sources and verification keys: a changed ConfigMap
        // reloads the modules reading it.
        .watches_shared_stream(caches.config_maps.subscribe(), move |config_map| {
            let namespace = config_map.metadata.namespace.clone().unwrap_or_default();
            let name = config_map.metadata.name.clone().unwrap_or_default();
            let named = |ns: &str, n: &str| ns == namespace && n == name;
            modules
                .state()
                .into_iter()
                .filter(|m| {
                    let source = m.spec.source.config_map.as_ref();
                    let keys = m.spec.verification.iter().flat_map(Verification::signers);
                    let root = m
                        .spec
                        .verification
                        .as_ref()
                        .and_then(|v| v.trusted_root.as_ref());
                    source.is_some_and(|c| named(&c.namespace, &c.name))
                        || root.is_some_and(|r| named(&r.namespace, &r.name))
                        || keys
                            .filter_map(|k| k.config_map.as_ref())
                            .any(|k| named(&k.namespace, &k.name))
                })
                .map(|m| ObjectRef::from_obj(&*m))
                .collect::<Vec<_>>()
        })
        // A canary promoted or rolled back by the runtime.
        .reconcile_on(super::watches::modules_named(
            ctx.runtime.registry().installs(),
        ))
        // A module throttled by the runtime.
        .reconcile_on(super::watches::modules_named(ctx.runtime.throttles()))
        .graceful_shutdown_on(shutdown)
        .run(
            reconcile::<ProviderModule>,
            error_policy::<ProviderModule>,
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
}
