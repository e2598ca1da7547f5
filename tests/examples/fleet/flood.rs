//! Backpressure: every pool scaled at once, up by one and back. Sampled
//! meanwhile from the operators' metrics: the provider calls queued and the
//! instances alive against their slots; from the API server: requests its
//! priority and fairness turned away.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use kube::ResourceExt as _;
use kube::api::ListParams;
use testenv::flows::{self, Apis};
use testenv::install::Install;

use super::{metrics, percentile, running_times, writes};

/// Scale requests sent at once, as a script or GitOps sync would.
const SCALING: usize = 32;
const SAMPLE: Duration = Duration::from_millis(100);

/// What one flood did.
pub(crate) struct Flood {
    pub(crate) replicas: i32,
    pub(crate) running_p50: f64,
    pub(crate) running_last: f64,
    /// Writes per pool, by resource.
    pub(crate) writes_per_pool: BTreeMap<String, f64>,
    /// The most provider calls queued at once, all providers together.
    pub(crate) peak_waiting: i64,
    /// The most instances alive at once, and the slots they may fill.
    pub(crate) peak_instances: i64,
    pub(crate) slots: i64,
    /// Requests the API server's priority and fairness rejected (429).
    pub(crate) rejected: f64,
}

impl std::fmt::Display for Flood {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "every pool to {} at once: Running p50 {:.1}s, last {:.1}s; {:.1} writes per pool {:?}; \
             peak provider calls queued {}, peak instances alive {} of {} slots; requests rejected by the API server {}",
            self.replicas,
            self.running_p50,
            self.running_last,
            self.writes_per_pool.values().sum::<f64>(),
            self.writes_per_pool,
            self.peak_waiting,
            self.peak_instances,
            self.slots,
            self.rejected,
        )
    }
}

/// Scales every pool to `replicas` at once and waits until each is Running
/// with that many Nodes.
pub(crate) async fn flood(install: &Install, apis: &Apis, replicas: i32) -> anyhow::Result<Flood> {
    let names: Vec<String> = apis
        .pools
        .list_metadata(&ListParams::default())
        .await?
        .into_iter()
        .map(|p| p.name_any())
        .collect();
    let pools = f64::from(u32::try_from(names.len())?);
    let rejected_before = flows::rejected_by_the_api_server(&install.client).await?;
    let writes_before = writes(&install.client).await?;
    let started = Instant::now();
    let scaled = futures::stream::iter(&names)
        .map(|name| async move {
            flows::scale(&apis.pools, name, replicas)
                .await
                .with_context(|| format!("scaling {name}"))
        })
        .buffer_unordered(SCALING)
        .try_collect::<()>();
    let done = async {
        let (scaled, times) =
            futures::join!(scaled, running_times(apis, names.len(), replicas, started));
        scaled?;
        times
    };
    let peaks = Cell::new(Peaks::default());
    let times = tokio::select! {
        times = done => times?,
        failed = sample(install, &peaks) => return Err(failed),
    };
    let peaks = peaks.get();
    let writes_per_pool = writes(&install.client)
        .await?
        .into_iter()
        .map(|(resource, n)| {
            let before = writes_before.get(&resource).copied().unwrap_or(0.0);
            // Rounded: a map of one decimal prints shortly.
            (resource, ((n - before) / pools * 10.0).round() / 10.0)
        })
        .filter(|(_, n)| *n > 0.0)
        .collect();
    Ok(Flood {
        replicas,
        running_p50: percentile(&times, 50),
        running_last: times.last().copied().unwrap_or(f64::NAN),
        writes_per_pool,
        peak_waiting: peaks.waiting,
        peak_instances: peaks.instances,
        slots: peaks.slots,
        rejected: flows::rejected_by_the_api_server(&install.client).await? - rejected_before,
    })
}

#[derive(Clone, Copy, Default)]
struct Peaks {
    waiting: i64,
    instances: i64,
    slots: i64,
}

/// Keeps `peaks` up to date from every operator's metrics until dropped;
/// returns only if the metrics cannot be read.
async fn sample(install: &Install, peaks: &Cell<Peaks>) -> anyhow::Error {
    loop {
        let texts = match metrics(install).await {
            Ok(texts) => texts,
            Err(e) => return e,
        };
        let mut now = Peaks::default();
        for text in &texts {
            now.waiting += sum(text, "capwasm_guest_calls_waiting{");
            now.instances += sum(text, "capwasm_guest_instances ");
            now.slots += sum(text, "capwasm_guest_instance_slots ");
        }
        let peak = peaks.get();
        peaks.set(Peaks {
            waiting: peak.waiting.max(now.waiting),
            instances: peak.instances.max(now.instances),
            slots: peak.slots.max(now.slots),
        });
        tokio::time::sleep(SAMPLE).await;
    }
}

/// The sum of the samples of the series starting with `prefix`.
fn sum(text: &str, prefix: &str) -> i64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
        .sum()
}
