//! `capwasm run` as a child process, the way a Deployment runs it: against
//! the management API server through a kubeconfig file, with its health and
//! metrics endpoints on a free loopback port, its log drained so that it
//! never blocks on a full pipe.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncBufReadExt as _;
use tokio::process::{Child, Command};

use crate::ApiServer;
use crate::ports::free_port;
use crate::probe;

/// How many log lines are kept for [`OperatorProcess::log_lines`].
pub const KEPT_LINES: usize = 20_000;

/// How long the process gets to become the leader.
const START: Duration = Duration::from_secs(60);

/// The `capwasm` binary `cargo test --workspace` built next to the test
/// binaries.
///
/// # Panics
///
/// If it is missing, saying how to build it.
pub fn binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the target directory");
    let binary = dir.join("capwasm");
    assert!(
        binary.exists(),
        "{} is missing: run `cargo build -p capwasm` or `make test`",
        binary.display()
    );
    binary
}

/// A free loopback address (`127.0.0.1:<port>`).
///
/// # Panics
///
/// If no port can be bound.
pub fn free_address() -> String {
    format!("127.0.0.1:{}", free_port().expect("a free port"))
}

/// What the log says once the process leads.
const LEADS: &str = "became the leader";

/// How [`OperatorProcess::launch`] starts the process.
#[derive(Clone, Copy, Debug)]
pub struct Launch<'a> {
    /// Authenticated as this ServiceAccount (namespace, name), not the admin.
    pub service_account: Option<(&'a str, &'a str)>,
    /// Its `RUST_LOG`.
    pub log: &'a str,
    /// Whether to wait until it leads.
    pub wait_to_lead: bool,
}

impl Default for Launch<'_> {
    fn default() -> Self {
        Self {
            service_account: None,
            log: "info",
            wait_to_lead: true,
        }
    }
}

/// Keeps `line` in `log`, up to [`KEPT_LINES`].
fn keep(line: &str, log: &Mutex<Vec<String>>) {
    let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
    if log.len() < KEPT_LINES {
        log.push(line.to_owned());
    }
}

/// A running `capwasm run`; killed if dropped before [`OperatorProcess::terminate`].
pub struct OperatorProcess {
    child: Child,
    /// Where `/healthz`, `/readyz` and `/metrics` are served.
    pub address: String,
    log: Arc<Mutex<Vec<String>>>,
    /// Its `--cache-dir`.
    pub cache_dir: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl OperatorProcess {
    /// Starts `capwasm run` against `management` with its leader Lease in
    /// `namespace`, named `instance`, with `args` added, and waits until it
    /// leads.
    ///
    /// # Panics
    ///
    /// If it cannot start or does not become the leader within a minute.
    pub async fn start(
        management: &ApiServer,
        namespace: &str,
        instance: &str,
        args: &[&str],
    ) -> Self {
        Self::launch(management, namespace, instance, args, Launch::default()).await
    }

    /// The same, authenticated as ServiceAccount `service_account`
    /// (namespace, name) when given, as a pod running as it is: the admin
    /// credentials impersonate it, so the API server authorizes every
    /// request by that ServiceAccount's roles.
    ///
    /// # Panics
    ///
    /// As [`OperatorProcess::start`].
    pub async fn start_as(
        management: &ApiServer,
        service_account: Option<(&str, &str)>,
        namespace: &str,
        instance: &str,
        args: &[&str],
    ) -> Self {
        let launch = Launch {
            service_account,
            ..Launch::default()
        };
        Self::launch(management, namespace, instance, args, launch).await
    }

    /// Starts `capwasm run` as [`OperatorProcess::start`] does, as `launch` says.
    ///
    /// # Panics
    ///
    /// If it cannot start, or (when `launch` waits for it) does not become
    /// the leader within a minute.
    pub async fn launch(
        management: &ApiServer,
        namespace: &str,
        instance: &str,
        args: &[&str],
        launch: Launch<'_>,
    ) -> Self {
        let dir = tempfile::tempdir().expect("a directory");
        let kubeconfig = dir.path().join("kubeconfig");
        let mut config = management.kubeconfig().clone();
        if let Some((sa_namespace, name)) = launch.service_account {
            for user in &mut config.auth_infos {
                let auth = user.auth_info.get_or_insert_default();
                auth.impersonate = Some(format!("system:serviceaccount:{sa_namespace}:{name}"));
                auth.impersonate_groups = Some(vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{sa_namespace}"),
                    "system:authenticated".into(),
                ]);
            }
        }
        std::fs::write(
            &kubeconfig,
            serde_yaml_ng::to_string(&config).expect("a kubeconfig"),
        )
        .expect("the kubeconfig written");
        let address = free_address();
        // A cache of its own, unless the caller keeps one across restarts.
        let given = args
            .iter()
            .find_map(|a| a.strip_prefix("--cache-dir="))
            .map(std::path::PathBuf::from);
        let given_cache = given.is_some();
        let cache_dir = given.unwrap_or_else(|| dir.path().join("cache"));
        // A webhook port of its own, unless the caller chose one: replicas
        // started side by side would otherwise all want the default.
        let webhook = (!args.iter().any(|a| a.starts_with("--webhook-bind-address")))
            .then(|| format!("--webhook-bind-address={}", free_address()));
        let mut child = Command::new(binary())
            .args(["run", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--metrics-bind-address", &address])
            .args(["--leader-election-namespace", namespace])
            .args(["--instance", instance])
            .args((!given_cache).then(|| format!("--cache-dir={}", cache_dir.display())))
            .args(webhook)
            .args(args)
            .env("RUST_LOG", launch.log)
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("capwasm run started");
        let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("its stderr")).lines();
        let log = Arc::new(Mutex::new(Vec::new()));
        if launch.wait_to_lead {
            let leads = tokio::time::timeout(START, async {
                while let Ok(Some(line)) = lines.next_line().await {
                    keep(&line, &log);
                    if line.contains(LEADS) {
                        return true;
                    }
                }
                false
            })
            .await;
            assert_eq!(
                leads,
                Ok(true),
                "capwasm run did not become the leader; its log: {:?}",
                log.lock().unwrap_or_else(PoisonError::into_inner)
            );
        }
        // Drained, so the process never blocks on a full pipe.
        let drained = Arc::clone(&log);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                keep(&line, &drained);
            }
        });
        Self {
            child,
            address,
            log,
            cache_dir,
            _dir: dir,
        }
    }

    /// Whether it has said it leads.
    pub fn leads(&self) -> bool {
        !self.log_lines(|line| line.contains(LEADS)).is_empty()
    }

    /// The log lines so far that say a request was forbidden.
    pub fn refusals(&self) -> Vec<String> {
        self.log_lines(|line| line.to_lowercase().contains("forbidden"))
    }

    /// The log lines so far (the first [`KEPT_LINES`]) that `pick` picks.
    pub fn log_lines(&self, pick: impl Fn(&str) -> bool) -> Vec<String> {
        self.log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|line| pick(line))
            .cloned()
            .collect()
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.process_id()).expect("a pid"))
    }

    /// `GET path`, as (status code, body).
    ///
    /// # Panics
    ///
    /// If the endpoint does not accept the connection.
    pub async fn get(&self, path: &str) -> (u16, String) {
        probe::get(&self.address, path)
            .await
            .expect("the metrics endpoint accepts")
    }

    /// Waits (at most 60 s) until `/readyz` answers 200, and returns what
    /// it answered before that (empty when it was ready at once).
    ///
    /// # Panics
    ///
    /// If it is not ready within 60 s.
    pub async fn ready(&self) -> Vec<(u16, String)> {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut before = Vec::new();
        loop {
            let answer = self.get("/readyz").await;
            if answer.0 == 200 {
                return before;
            }
            assert!(
                std::time::Instant::now() < until,
                "not ready within 60 s: {answer:?}"
            );
            before.push(answer);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// The process's id.
    ///
    /// # Panics
    ///
    /// If it has been reaped.
    pub fn process_id(&self) -> u32 {
        self.child.id().expect("the process is running")
    }

    /// The most memory the process has held resident so far (VmHWM), in
    /// bytes: since it started, or since [`OperatorProcess::reset_peak_rss`].
    ///
    /// # Panics
    ///
    /// If `/proc` does not say.
    pub fn peak_rss_bytes(&self) -> u64 {
        self.status_bytes("VmHWM:")
    }

    /// The memory the process holds resident now (VmRSS), in bytes.
    ///
    /// # Panics
    ///
    /// If `/proc` does not say.
    pub fn rss_bytes(&self) -> u64 {
        self.status_bytes("VmRSS:")
    }

    /// Starts [`OperatorProcess::peak_rss_bytes`] again from what the
    /// process holds now (Linux's `clear_refs` 5).
    ///
    /// # Panics
    ///
    /// If `/proc` refuses.
    pub fn reset_peak_rss(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5")
            .expect("the process's peak RSS reset");
    }

    fn status_bytes(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the process's status");
        let kib = status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{field} in /proc/<pid>/status"));
        kib * 1024
    }

    /// Kills the process with SIGKILL, as a node failure or the OOM killer
    /// would: nothing shuts down, the leader Lease is not released.
    ///
    /// # Panics
    ///
    /// If it cannot be killed.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("capwasm run killed");
    }

    /// Sends SIGTERM and waits (at most `limit`) for the process to exit:
    /// its exit status and how long it took.
    ///
    /// # Panics
    ///
    /// If the process is not gone within `limit`.
    pub async fn terminate(&mut self, limit: Duration) -> (ExitStatus, Duration) {
        let sent = Instant::now();
        signal::kill(self.pid(), Signal::SIGTERM).expect("SIGTERM sent");
        let status = tokio::time::timeout(limit, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("capwasm run still running {limit:?} after SIGTERM"))
            .expect("the exit status");
        (status, sent.elapsed())
    }
}

/// The value of the one series `series` (its name and labels as exposed,
/// `name{label="value"}`) in a `/metrics` text, or 0 while it has none.
pub fn sample(metrics: &str, series: &str) -> u64 {
    let prefix = format!("{series} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}
