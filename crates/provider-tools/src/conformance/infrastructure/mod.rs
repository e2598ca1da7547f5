//! The infrastructure world against the simulated cloud, each scenario on a
//! cloud of its own on loopback: scaling, idempotency across lost records,
//! deletion, credentials, and how an unusable or unreachable cloud is
//! reported. A provider passes if it provisions in the simulated cloud
//! exactly as sim-infrastructure does, with its config schema
//! (`endpoint`, `region`, `failureDomains`, `nodeLabels`, `controlPlanePort`).

mod cluster;
mod lifecycle;
mod refusals;
mod shapes;

use std::collections::BTreeSet;
use std::time::Duration;

pub use cluster::*;
pub use lifecycle::*;
pub use refusals::*;
pub use shapes::*;

use super::{Failure, Provider, Scenario, Subject, requests};
use crate::simcloud::{InstanceRecord, RunningSimCloud, Settings, SimCloud};
use crate::wasm::Capabilities;
use crate::wasm::machine_pools::{PoolState, ReconcileRequest};

/// The region every scenario's config names.
pub const REGION: &str = "local-1";
/// `<namespace>/<name>` of the pool in [`requests::reconcile_pool`].
pub const POOL: &str = "default/pool-a";
/// How long the cloud may take to reach what a scenario waits for.
const WAIT: Duration = Duration::from_secs(30);

/// Calls the macro `$then` with the name of every scenario, in the order
/// they run: what [`SCENARIOS`] is made of, and what a test suite makes one
/// test per scenario of.
#[macro_export]
macro_rules! infrastructure_scenarios {
    ($then:ident) => {
        $then!(
            scale_up_creates_sim_instances_and_pool_is_ready_once_they_run,
            reconcile_creates_nothing_when_repeated_with_the_recorded_instances,
            reconcile_creates_no_duplicate_when_a_crash_lost_the_recorded_instances,
            scale_down_terminates_the_highest_ordinals,
            remove_terminates_exactly_the_instances_asked_for,
            node_shapes_are_the_cloud_s_instance_types_and_an_unknown_one_is_terminal,
            delete_is_done_once_the_cloud_has_no_instance_of_the_pool,
            cloud_requires_the_bearer_token_from_credentials_when_configured,
            reconcile_asks_to_retry_when_bootstrap_data_is_missing,
            instances_end_failed_and_pool_not_ready_when_bootstrap_data_cannot_join,
            reconcile_asks_to_retry_when_the_cloud_is_full,
            reconcile_asks_to_retry_when_the_cloud_is_down,
            reconcile_is_denied_when_the_endpoint_host_is_not_allowed,
            reconcile_cluster_reports_endpoint_and_failure_domains_from_config,
            provider_ids_are_derived_from_config_and_owned_by_scheme,
        );
    };
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        /// Every scenario, in the order they run.
        pub const SCENARIOS: &[Scenario] = &[$(Scenario {
            name: stringify!($name),
            run: |subject| Box::pin($name(subject)),
        }),*];
    };
}

crate::infrastructure_scenarios!(scenarios);

/// The simulated cloud with `settings`, on an ephemeral loopback port.
pub async fn cloud(settings: Settings) -> Result<RunningSimCloud, Failure> {
    SimCloud::new(settings)
        .start_on_loopback()
        .await
        .map_err(|e| Failure::Setup(format!("the simulated cloud: {e}")))
}

/// Instances boot and terminate at once: states follow calls deterministically.
pub fn instant() -> Settings {
    Settings {
        boot_delay: Duration::ZERO,
        termination_delay: Duration::ZERO,
        ..Settings::default()
    }
}

/// Instances boot at once and stay listed as terminating for the whole
/// scenario: what a call terminated can be seen.
pub fn lingering() -> Settings {
    Settings {
        termination_delay: Duration::from_secs(600),
        ..instant()
    }
}

/// The provider's config for the cloud at `endpoint`.
pub fn config(endpoint: &str) -> String {
    serde_json::json!({"endpoint": endpoint, "region": REGION}).to_string()
}

/// The request token of the pool's instance `ordinal`: its UID and ordinal.
pub fn token(ordinal: u32) -> String {
    format!("{}-{ordinal}", requests::object("pool-a").uid)
}

/// Allowed to reach 127.0.0.1 only.
pub(super) fn loopback() -> Capabilities {
    Capabilities {
        allowed_hosts: vec!["127.0.0.1".into()],
        ..Capabilities::default()
    }
}

/// A simulated cloud with `settings`, the component allowed to reach it,
/// and the request to reconcile [`POOL`] in it to `replicas`.
pub(super) async fn pool_on_cloud(
    subject: &Subject,
    settings: Settings,
    replicas: u32,
) -> Result<(RunningSimCloud, Provider<'_>, ReconcileRequest), Failure> {
    let running = cloud(settings).await?;
    let provider = subject.load(loopback()).await?;
    let request = requests::reconcile_pool(&config(&running.endpoint()), replicas);
    Ok((running, provider, request))
}

/// Waits until `done` holds for the instances of [`POOL`].
pub(super) async fn wait_for_pool(
    cloud: &SimCloud,
    what: &str,
    mut done: impl FnMut(&[&InstanceRecord]) -> bool,
) -> Result<(), Failure> {
    let waited = tokio::time::timeout(
        WAIT,
        cloud.wait_for(|all| {
            let pool: Vec<_> = all.iter().filter(|r| r.instance.pool == POOL).collect();
            done(&pool)
        }),
    )
    .await;
    match waited {
        Ok(_) => Ok(()),
        Err(_) => Err(Failure::Expected(format!(
            "the cloud did not reach {what} within {WAIT:?}"
        ))),
    }
}

pub(super) fn ids(state: &PoolState) -> BTreeSet<String> {
    state.instances.iter().map(|i| i.id.clone()).collect()
}

pub(super) fn cloud_ids(cloud: &SimCloud) -> BTreeSet<String> {
    cloud
        .instances_of(POOL)
        .into_iter()
        .map(|r| r.instance.id)
        .collect()
}
