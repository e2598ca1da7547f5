//! The controllers: Cluster API's Cluster and MachinePool flows, the Wasm
//! provider kinds, ProviderModule, and PlatformCluster. Every provider-specific step is a
//! call into a component; everything else is here. Each controller is a
//! kind reconciled by one frame ([`reconciler`]) from shared caches
//! ([`cache`]).

mod adopt;
mod backoff;
pub mod bootstrap;
pub mod cache;
pub mod cluster;
mod config;
pub mod context;
pub mod control_plane;
pub mod credentials;
pub mod error;
pub mod external;
mod finalizer;
pub mod infrastructure;
mod kubeconfig;
pub mod machine;
pub mod machinepool;
pub mod metrics;
pub mod outcome;
mod own_writes;
mod paused;
pub mod platform;
pub mod provider;
pub mod providermodule;
pub mod reconciler;
pub mod requests;
mod secrets;
pub mod shard;
mod watches;
mod write;

pub use write::Scoped;

use std::future::Future;
use std::sync::Arc;

use futures::{FutureExt as _, StreamExt as _};

pub use cache::Caches;
pub use config::{ConfigError, ConfigSchemas};
pub use context::{Context, Parts, Settings, Triggers};
pub use error::Error;
pub use metrics::Metrics;

/// Which controllers a process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Controllers {
    /// Cluster and MachinePool too (standalone mode).
    All,
    /// Only ProviderModule and the Wasm provider kinds, beside upstream Cluster API core.
    Providers,
}

/// Runs the chosen controllers until `shutdown` completes and every one of
/// them has finished its reconciles in flight. The caches are filled first:
/// no reconcile takes "not in the cache" for "does not exist" before the
/// first list of every kind is in; then `filled` holds.
pub async fn run(
    ctx: Arc<Context>,
    triggers: Triggers,
    nodes: impl futures::Stream<Item = crate::workload::NodeEvent> + Send + 'static,
    which: Controllers,
    filled: crate::readiness::Check,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let core = which == Controllers::All;
    let shutdown = shutdown.shared();
    let Triggers {
        clusters,
        pools,
        platforms,
    } = triggers;
    let mut names = vec![
        providermodule::CONTROLLER,
        bootstrap::CONTROLLER,
        infrastructure::CONTROLLER,
        infrastructure::CONTROLLER_CLUSTER,
        control_plane::CONTROLLER,
        platform::CONTROLLER,
    ];
    if core {
        names.extend([
            cluster::CONTROLLER,
            machinepool::CONTROLLER,
            machine::CONTROLLER,
        ]);
    }
    for name in names {
        ctx.metrics
            .controller_started(name, ctx.settings.concurrency);
    }
    // Subscriptions are taken before the caches run, so that each sees every object once.
    let providers = futures::future::join(
        futures::future::join5(
            providermodule::run(ctx.clone(), shutdown.clone()),
            bootstrap::run(ctx.clone(), shutdown.clone()),
            infrastructure::run_machine_pools(ctx.clone(), shutdown.clone()),
            infrastructure::run_clusters(ctx.clone(), shutdown.clone()),
            platform::run(ctx.clone(), platforms, shutdown.clone()),
        ),
        control_plane::run(ctx.clone(), shutdown.clone()),
    );
    let controllers = match which {
        Controllers::Providers => providers.map(drop).boxed(),
        Controllers::All => {
            // Each Node change goes to the pools and to the Machines.
            let (to_pools, of_pools) = futures::channel::mpsc::unbounded();
            let (to_machines, of_machines) = futures::channel::mpsc::unbounded();
            let fan_out = nodes.take_until(shutdown.clone()).for_each(move |event| {
                let _ = to_machines.unbounded_send(event.clone());
                let _ = to_pools.unbounded_send(event);
                futures::future::ready(())
            });
            futures::future::join5(
                providers,
                cluster::run(ctx.clone(), clusters, shutdown.clone()),
                machinepool::run(ctx.clone(), pools, of_pools, shutdown.clone()),
                machine::run(ctx.clone(), of_machines, shutdown.clone()),
                fan_out,
            )
            .map(drop)
            .boxed()
        }
    };
    let caches = ctx.caches.run(&ctx.metrics, core);
    let started = async {
        tokio::select! {
            () = ctx.caches.ready(core) => {}
            () = shutdown.clone() => return,
        }
        tracing::debug!("caches filled; reconciling");
        filled.ready();
        controllers.await;
    };
    tokio::select! {
        () = caches => {}
        () = started => {}
    }
}
