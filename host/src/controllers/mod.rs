//! The controllers: Cluster API's Cluster and MachinePool flows, the Wasm
//! provider kinds, and ProviderModule. Every provider-specific step is a
//! call into a component; everything else is here.

mod backoff;
pub mod bootstrap;
pub mod cluster;
mod config;
pub mod context;
mod dynamic_watch;
pub mod error;
pub mod external;
pub mod infrastructure;
pub mod machinepool;
pub mod metrics;
pub mod outcome;
mod paused;
pub mod provider;
pub mod providermodule;
mod watches;
mod write;

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt as _;

pub use config::{ConfigError, ConfigSchemas};
pub use context::{Context, Settings, Triggers};
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
/// them has finished its reconciles in flight.
pub async fn run(
    ctx: Arc<Context>,
    triggers: Triggers,
    nodes: impl futures::Stream<Item = crate::workload::NodeEvent> + Send + 'static,
    which: Controllers,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let shutdown = shutdown.shared();
    let providers = futures::future::join4(
        providermodule::run(ctx.clone(), shutdown.clone()),
        bootstrap::run(ctx.clone(), shutdown.clone()),
        infrastructure::run_machine_pools(ctx.clone(), shutdown.clone()),
        infrastructure::run_clusters(ctx.clone(), shutdown.clone()),
    );
    match which {
        Controllers::Providers => {
            providers.await;
        }
        Controllers::All => {
            let Triggers { clusters, pools } = triggers;
            futures::future::join3(
                providers,
                cluster::run(ctx.clone(), clusters, shutdown.clone()),
                machinepool::run(ctx, pools, nodes, shutdown),
            )
            .await;
        }
    }
}
