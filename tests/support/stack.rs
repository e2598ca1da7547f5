//! The operator and the simulated cloud for controller tests: one of each
//! per test binary, on a runtime of their own (tests come and go with their
//! own runtimes), against the shared management and workload API servers;
//! or a stack of a test's own, acting with the credentials it is given.
//! The simulated cloud registers a Ready Node in the workload cluster for
//! each running instance, as a kubelet would after running the bootstrap data.

use std::sync::Arc;
use std::time::Duration;

use capwasm::controllers::{Context, Controllers, Settings};
use capwasm::operator::{Config, Operator};
use capwasm::simcloud::{self, SimCloud};
use capwasm::wasm::RuntimeSettings;
use kube::Client;
use tokio::sync::OnceCell;

use crate::flows::Objects;
use crate::{Error, Result, TestEnv};

/// What controller tests talk to besides the API servers.
pub struct Stack {
    /// The running operator's context: its runtime, metrics and clients.
    pub context: Arc<Context>,
    /// Every metric the operator exports on `/metrics`.
    pub registry: Arc<prometheus_client::registry::Registry>,
    /// The simulated cloud.
    pub cloud: SimCloud,
    /// Objects served by the built guests and this cloud.
    pub objects: Objects,
    /// Dropping it stops the operator and the cloud (the shared stack's never is).
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// The only namespace the test operators read provider credentials from.
pub const CREDENTIALS_NAMESPACE: &str = "capwasm-credentials";

static STACK: OnceCell<Result<Stack, String>> = OnceCell::const_new();

impl Stack {
    /// The stack shared by the tests of this binary, started by the first
    /// that asks: every controller, the simulated cloud with short boot and
    /// termination delays, and Nodes registered in the shared workload server.
    pub async fn shared() -> Result<&'static Stack> {
        let stack = STACK
            .get_or_init(|| async {
                let env = TestEnv::shared().await.map_err(|e| e.to_string())?;
                let workload = env
                    .workload()
                    .ok_or_else(|| "the shared environment has no workload server".to_owned())?;
                Self::start(env.management().config().clone(), workload.config().clone())
                    .await
                    .map_err(|e| e.to_string())
            })
            .await;
        stack
            .as_ref()
            .map_err(|message| Error::SharedStart(message.clone()))
    }

    /// A stack of its own on `env`'s API servers, as their admin: an
    /// operator whose figures count only what its test does.
    pub async fn of(env: &TestEnv) -> Result<Stack> {
        let workload = env
            .workload()
            .ok_or_else(|| Error::SharedStart("the environment has no workload server".into()))?;
        Self::start(env.management().config().clone(), workload.config().clone()).await
    }

    /// The same, with `adjust` applied to the operator's settings (a short
    /// bootstrap token TTL, say).
    pub async fn of_with(
        env: &TestEnv,
        adjust: impl FnOnce(&mut Settings) + Send + 'static,
    ) -> Result<Stack> {
        let workload = env
            .workload()
            .ok_or_else(|| Error::SharedStart("the environment has no workload server".into()))?;
        start(
            env.management().config().clone(),
            workload.config().clone(),
            Box::new(adjust),
        )
        .await
    }

    /// A stack of its own: the operator acting with `management` (whose
    /// credentials or impersonation decide what it may do), the cloud
    /// registering Nodes with `workload`. Both stop when it is dropped.
    pub async fn start(management: kube::Config, workload: kube::Config) -> Result<Stack> {
        // The operator's log, for a failing test: CAPWASM_TEST_LOG=capwasm=debug, say.
        if let Ok(filter) = std::env::var("CAPWASM_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
        start(management, workload, Box::new(|_| {})).await
    }
}

/// Changes to the test operators' settings.
type Adjust = Box<dyn FnOnce(&mut Settings) + Send>;

async fn start(management: kube::Config, workload: kube::Config, adjust: Adjust) -> Result<Stack> {
    let (started, ready) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("capwasm-operator".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = started.send(Err(e.to_string()));
                    return;
                }
            };
            runtime.block_on(async move {
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                match build(management, workload, stop, adjust).await {
                    Ok((operator, stack, cloud)) => {
                        let _ = started.send(Ok(stack));
                        // The cloud serves for as long as the operator runs.
                        let _cloud = cloud;
                        let filled = operator.readiness().check("caches");
                        operator
                            .run(filled, async move {
                                let _ = stopped.await;
                            })
                            .await;
                    }
                    Err(e) => {
                        let _ = started.send(Err(e));
                    }
                }
            });
        })
        .map_err(|e| Error::SharedStart(e.to_string()))?;
    ready
        .await
        .map_err(|_| Error::SharedStart("the operator thread ended".into()))?
        .map_err(Error::SharedStart)
}

async fn build(
    management: kube::Config,
    workload: kube::Config,
    stop: tokio::sync::oneshot::Sender<()>,
    adjust: Adjust,
) -> Result<(Operator, Stack, simcloud::RunningSimCloud), String> {
    let nodes = Client::try_from(workload).map_err(|e| e.to_string())?;
    let (cloud, objects) = Objects::start_cloud(nodes)
        .await
        .map_err(|e| e.to_string())?;
    let mut settings = Settings {
        backoff_first: Duration::from_millis(200),
        backoff_max: Duration::from_secs(5),
        credentials_namespace: Some(CREDENTIALS_NAMESPACE.into()),
        ..Settings::default()
    };
    adjust(&mut settings);
    let config = Config {
        controllers: Controllers::All,
        settings,
        runtime: RuntimeSettings::default(),
        ..Config::default()
    };
    let operator =
        Operator::new(management, config).map_err(|e| capwasm::report::error_chain(&e))?;
    let stack = Stack {
        context: operator.context().clone(),
        registry: operator.registry(),
        cloud: cloud.cloud().clone(),
        objects,
        _stop: stop,
    };
    Ok((operator, stack, cloud))
}
