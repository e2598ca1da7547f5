//! `make ec2-bench`: what the aws-ec2 provider costs, against moto on
//! loopback with signatures checked (the host signs every request): its
//! component size and compile time, and for each kind of reconcile the
//! EC2 requests it makes and how long it takes, as the operator calls it
//! (a fresh instance per call, the last state handed back).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use capwasm::testing::{ec2, requests};
use capwasm::wasm::clusters::ClusterRequest;
use capwasm::wasm::machine_pools::{DeleteRequest, ReconcileRequest};
use capwasm::wasm::types::{Credential, DeleteOutcome};
use capwasm::wasm::{
    CallError, Limits, Metrics, ProviderSource, ProviderSpec, Runtime, RuntimeSettings,
};
use serde_json::json;
use testenv::guest_path;
use testenv::moto::Moto;

const PROVIDER: &str = "aws";
/// Cold compiles; the median is printed.
const COMPILES: usize = 3;
/// Reconciles of a pool at rest; p50 and p99 are printed.
const AT_REST: usize = 40;
/// Calls a pool gets to settle.
const ATTEMPTS: usize = 20;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let moto = Moto::start()
        .await
        .context("starting moto (tests/moto/install.sh installs it)")?;
    let bench = Bench::load(&moto).await?;
    let config = json!({
        "region": "us-east-1",
        "endpoint": format!("http://{}", moto.authority),
        "ami": "ami-12c6146b",
        "zones": ["us-east-1a", "us-east-1b"],
        "apiServerCidrs": ["203.0.113.0/24"],
    })
    .to_string();
    let credentials = ec2::credentials(&moto.access_key_id, &moto.secret_access_key);

    println!("\n{:<44} {:>9} {:>10}", "reconcile", "requests", "took");
    let cluster = ClusterRequest {
        credentials: credentials.clone(),
        ..requests::cluster_request(&config)
    };
    for what in ["cluster, network made", "cluster, at rest"] {
        let (made, took) = bench
            .measure(async || {
                let state = bench.runtime.reconcile_cluster(PROVIDER, &cluster).await?;
                Ok(state.ready)
            })
            .await?;
        print(what, made, took);
    }
    let instances = bench.pool(&config, &credentials).await?;
    bench
        .delete(
            DeleteRequest {
                credentials,
                instances,
                ..requests::delete_pool(&config)
            },
            "pool deleted",
        )
        .await
}

/// The provider in service, and its requests counted.
struct Bench {
    runtime: Runtime,
    metrics: Metrics,
}

impl Bench {
    /// Loads the provider reaching `moto`, printing its size and compile time.
    async fn load(moto: &Moto) -> anyhow::Result<Self> {
        let path = guest_path("aws_ec2.wasm");
        let bytes = std::fs::read(&path)
            .with_context(|| format!("reading {} (run `make guests`)", path.display()))?;
        let spec = ProviderSpec {
            name: PROVIDER.into(),
            source: ProviderSource::Bytes(bytes.clone()),
            sha256: None,
            limits: Limits {
                deadline: Duration::from_secs(20),
                ..Limits::default()
            },
            capabilities: ec2::signed_capabilities(&moto.authority),
        };
        let metrics = Metrics::default();
        let runtime = Runtime::new(RuntimeSettings::default(), Some(metrics.clone()))?;
        let mut compiles = Vec::with_capacity(COMPILES);
        for _ in 0..COMPILES {
            compiles.push(runtime.load(spec.clone()).await?.compile_time);
        }
        compiles.sort();
        runtime
            .registry()
            .install(Arc::new(runtime.load(spec).await?));
        println!("aws-ec2 against moto 5.2.5 on loopback, every request signed by the host\n");
        println!("component: {} KiB", bytes.len() / 1024);
        println!(
            "compile (median of {COMPILES}): {:.0} ms",
            compiles[COMPILES / 2].as_secs_f64() * 1e3
        );
        Ok(Self { runtime, metrics })
    }

    /// Runs `work` (true: it got where it was going); its requests and time.
    async fn measure(
        &self,
        work: impl AsyncFnOnce() -> Result<bool, CallError>,
    ) -> anyhow::Result<(u64, Duration)> {
        let before = self.metrics.http_requests(PROVIDER);
        let started = Instant::now();
        if !work().await? {
            bail!("did not get there within {ATTEMPTS} calls");
        }
        Ok((
            self.metrics.http_requests(PROVIDER) - before,
            started.elapsed(),
        ))
    }

    /// A pool to 3 instances, then reconciled at rest; its instances.
    async fn pool(
        &self,
        config: &str,
        credentials: &[Credential],
    ) -> anyhow::Result<Vec<capwasm::wasm::types::Instance>> {
        let mut pool = ReconcileRequest {
            credentials: credentials.to_vec(),
            ..requests::reconcile_pool(config, 3)
        };
        let mut calls = 0;
        let (made, took) = self
            .measure(async || {
                for _ in 0..ATTEMPTS {
                    calls += 1;
                    let state = self.runtime.reconcile_pool(PROVIDER, &pool).await?;
                    pool.instances.clone_from(&state.instances);
                    if state.ready && state.requeue_after_seconds.is_none() {
                        return Ok(true);
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(false)
            })
            .await?;
        print(&format!("pool 0 → 3 instances ({calls} calls)"), made, took);

        let mut times = Vec::with_capacity(AT_REST);
        let before = self.metrics.http_requests(PROVIDER);
        for _ in 0..AT_REST {
            let started = Instant::now();
            let state = self.runtime.reconcile_pool(PROVIDER, &pool).await?;
            times.push(started.elapsed());
            if !state.ready {
                bail!("the pool left its 3 running instances: {state:?}");
            }
        }
        times.sort();
        let per_call = (self.metrics.http_requests(PROVIDER) - before) / AT_REST as u64;
        println!(
            "{:<44} {per_call:>9} {:>7.1} ms p50, {:.1} ms p99",
            "pool, 3 instances running (at rest)",
            times[AT_REST / 2].as_secs_f64() * 1e3,
            times[AT_REST * 99 / 100].as_secs_f64() * 1e3
        );
        Ok(pool.instances)
    }

    /// Deletes the pool of `request`, printing its requests and time as `what`.
    async fn delete(&self, request: DeleteRequest, what: &str) -> anyhow::Result<()> {
        let mut calls = 0;
        let (made, took) = self
            .measure(async || {
                for _ in 0..ATTEMPTS {
                    calls += 1;
                    let outcome = self.runtime.delete_pool(PROVIDER, &request).await?;
                    if matches!(outcome, DeleteOutcome::Done) {
                        return Ok(true);
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(false)
            })
            .await?;
        print(&format!("{what} ({calls} calls)"), made, took);
        Ok(())
    }
}

fn print(what: &str, requests_made: u64, took: Duration) {
    println!(
        "{what:<44} {requests_made:>9} {:>7.1} ms",
        took.as_secs_f64() * 1e3
    );
}
