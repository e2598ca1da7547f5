//! One etcd member on loopback, shared by every API server of a [`TestEnv`](crate::TestEnv).

use std::sync::{Arc, Mutex, PoisonError};

use tempfile::TempDir;

use crate::process::Process;
use crate::{Binaries, Error, Result, ports};

pub(crate) struct Etcd {
    process: Mutex<Process>,
    client_url: String,
    /// The run directory of the whole environment; it goes when etcd, the
    /// last thing that uses it, has stopped.
    run_dir: Arc<TempDir>,
}

impl Etcd {
    pub fn start(binaries: &Binaries, run_dir: Arc<TempDir>) -> Result<Self> {
        let client_url = format!("http://127.0.0.1:{}", ports::free_port()?);
        let peer_url = format!("http://127.0.0.1:{}", ports::free_port()?);
        let data_dir = run_dir.path().join("etcd");
        std::fs::create_dir_all(&data_dir).map_err(|source| Error::Io {
            path: data_dir.clone(),
            source,
        })?;
        let args = [
            format!("--data-dir={}", data_dir.display()),
            format!("--listen-client-urls={client_url}"),
            format!("--advertise-client-urls={client_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
            // Test data need not survive a power cut; fsync dominates write latency.
            "--unsafe-no-fsync=true".to_owned(),
            "--log-level=warn".to_owned(),
        ];
        let log = run_dir.path().join("etcd.log");
        let process = Process::spawn("etcd", &binaries.etcd, &args, log)?;
        Ok(Self {
            process: Mutex::new(process),
            client_url,
            run_dir,
        })
    }

    pub fn client_url(&self) -> &str {
        &self.client_url
    }

    pub fn run_dir(&self) -> &std::path::Path {
        self.run_dir.path()
    }

    pub fn pid(&self) -> u32 {
        self.lock().pid()
    }

    /// An error with etcd's log tail if it has exited.
    pub fn check_running(&self) -> Result<()> {
        let mut process = self.lock();
        match process.exited() {
            Some(status) => Err(process.not_ready(format!("exited with {status}"))),
            None => Ok(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Process> {
        self.process.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.lock().stop();
    }
}
