//! The environment a test gets: etcd, the management API server, optionally
//! a workload API server, and the CRDs installed.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::OnceCell;

use crate::etcd::Etcd;
use crate::{ApiServer, Binaries, Error, Result, crds, rundir};

/// Starts are retried with fresh ports this many times when a port taken
/// between our probe and the child's bind was the cause.
const START_ATTEMPTS: u32 = 3;

/// What to start.
#[derive(Clone, Debug)]
pub struct Options {
    /// Also start a workload API server next to the management one.
    pub workload: bool,
    /// CRD files or directories installed into the management server.
    pub crds: Vec<PathBuf>,
    /// Flags added to every kube-apiserver's command line (feature gates, say).
    pub apiserver_args: Vec<String>,
    /// The directory under which each environment gets its own directory;
    /// leftovers of dead test processes there are swept at start.
    pub run_root: PathBuf,
}

impl Default for Options {
    /// Management and workload servers, with the CRDs from `crds/`.
    fn default() -> Self {
        Self {
            workload: true,
            crds: vec![PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../crds"
            ))],
            apiserver_args: Vec::new(),
            run_root: rundir::default_root(),
        }
    }
}

/// A running control plane. Dropping it stops every process it started and
/// removes its directory.
pub struct TestEnv {
    // Field order is drop order: API servers stop before etcd.
    management: ApiServer,
    workload: Option<ApiServer>,
    etcd: Arc<Etcd>,
    binaries: Binaries,
    apiserver_args: Vec<String>,
    next_workload: AtomicU32,
}

static SHARED: OnceCell<Result<TestEnv, String>> = OnceCell::const_new();

impl TestEnv {
    /// The environment shared by every test in this test binary, started
    /// with [`Options::default`] by the first test that asks. Tests isolate
    /// themselves with [`ApiServer::create_namespace`]. It is never dropped;
    /// its processes exit with the test binary (they watch its stdin pipe)
    /// and its directory is swept by the next run.
    pub async fn shared() -> Result<&'static TestEnv> {
        let env = SHARED
            .get_or_init(|| async {
                Self::start(Options::default())
                    .await
                    .map_err(|e| capwasm::report::error_chain(&e))
            })
            .await;
        env.as_ref()
            .map_err(|message| Error::SharedStart(message.clone()))
    }

    /// Starts a private environment.
    pub async fn start(options: Options) -> Result<Self> {
        let binaries = Binaries::locate()?;
        let mut attempt = 1;
        loop {
            match Self::start_once(&binaries, &options).await {
                Err(Error::NotReady { ref tail, .. })
                    if attempt < START_ATTEMPTS && tail.contains("address already in use") =>
                {
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn start_once(binaries: &Binaries, options: &Options) -> Result<Self> {
        let etcd = Arc::new(Etcd::start(
            binaries,
            Arc::new(rundir::create(&options.run_root)?),
        )?);
        let (management, workload) = tokio::try_join!(
            ApiServer::start(
                binaries,
                &options.apiserver_args,
                etcd.clone(),
                "management"
            ),
            async {
                if options.workload {
                    ApiServer::start(
                        binaries,
                        &options.apiserver_args,
                        etcd.clone(),
                        "workload-0",
                    )
                    .await
                    .map(Some)
                } else {
                    Ok(None)
                }
            }
        )?;
        crds::install_crds(&management.client()?, &options.crds).await?;
        Ok(Self {
            management,
            workload,
            etcd,
            binaries: binaries.clone(),
            apiserver_args: options.apiserver_args.clone(),
            next_workload: AtomicU32::new(1),
        })
    }

    /// The management cluster: where the Cluster API objects live.
    pub fn management(&self) -> &ApiServer {
        &self.management
    }

    /// The management API server, to restart it.
    pub fn management_mut(&mut self) -> &mut ApiServer {
        &mut self.management
    }

    /// The workload cluster started with the environment, if one was asked for.
    pub fn workload(&self) -> Option<&ApiServer> {
        self.workload.as_ref()
    }

    /// Starts one more independent API server (its own etcd prefix,
    /// certificates and port), for a test that needs a workload cluster of
    /// its own. It is stopped when the returned value is dropped.
    pub async fn start_workload(&self) -> Result<ApiServer> {
        let n = self.next_workload.fetch_add(1, Ordering::Relaxed);
        ApiServer::start(
            &self.binaries,
            &self.apiserver_args,
            self.etcd.clone(),
            &format!("workload-{n}"),
        )
        .await
    }

    /// The process ids of etcd and every API server this environment started.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = vec![self.etcd.pid(), self.management.pid()];
        pids.extend(self.workload.as_ref().map(ApiServer::pid));
        pids
    }

    /// The directory holding every file of this environment.
    pub fn run_dir(&self) -> PathBuf {
        self.etcd.run_dir().to_path_buf()
    }
}
