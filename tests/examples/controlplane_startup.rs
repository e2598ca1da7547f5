//! Prints how long the harness takes from nothing to a ready management and
//! workload API server (one etcd, two kube-apiservers), median of 5 runs.
//!
//!     cargo run --release -p capwasm-tests --example controlplane-startup

use std::time::Instant;

use testenv::{Options, TestEnv};

const RUNS: usize = 5;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut seconds = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        let env = TestEnv::start(Options {
            crds: Vec::new(),
            ..Options::default()
        })
        .await?;
        seconds.push(started.elapsed().as_secs_f64());
        drop(env);
    }
    let runs: Vec<String> = seconds.iter().map(|s| format!("{s:.2}")).collect();
    seconds.sort_by(f64::total_cmp);
    println!(
        "controlplane-startup: management+workload median={:.2}s runs=[{}]",
        seconds[RUNS / 2],
        runs.join(", ")
    );
    Ok(())
}
