//! A container's memory as the node's kernel counts it: the cgroup (v1, as
//! the node's kubelet makes it with the cgroupfs driver) read directly, once
//! or every quarter second for peaks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;

use crate::{Error, Result};

/// The memory cgroup (v1, as the node's kubelet makes it with the cgroupfs
/// driver) of a running container.
#[derive(Clone, Debug)]
pub struct ContainerMemory {
    /// `<pod>/<container>`, for messages.
    name: String,
    dir: PathBuf,
}

/// One reading of a container's memory cgroup, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryReading {
    /// `memory.usage_in_bytes`: everything charged, page cache included.
    pub usage: u64,
    /// `memory.max_usage_in_bytes`: the most ever charged.
    pub max_usage: u64,
    /// `memory.limit_in_bytes`: what the kernel enforces.
    pub limit: u64,
    /// `memory.failcnt`: how often a charge met the limit (and the kernel
    /// reclaimed, or killed, for it).
    pub failcnt: u64,
    /// `total_rss` of `memory.stat`: anonymous memory, which only an OOM
    /// kill can take back.
    pub rss: u64,
    /// Usage less inactive file pages: the working set the kubelet reports
    /// and evicts on.
    pub working_set: u64,
    /// `oom_kill` of `memory.oom_control` (kernels since 4.13).
    pub oom_kills: Option<u64>,
}

impl ContainerMemory {
    /// The cgroup of container `container` of `pod` as the node has it.
    ///
    /// # Errors
    ///
    /// If the container is not running or its cgroup is not where the
    /// kubelet puts it.
    pub fn of(pod: &Pod, container: &str) -> Result<Self> {
        let name = format!("{}/{container}", pod.name_any());
        let fail = |message: String| Error::Cgroup {
            container: name.clone(),
            message,
        };
        let uid = pod.uid().ok_or_else(|| fail("the Pod has no uid".into()))?;
        let status = pod
            .status
            .as_ref()
            .ok_or_else(|| fail("the Pod has no status".into()))?;
        let id = status
            .container_statuses
            .iter()
            .flatten()
            .find(|c| c.name == container)
            .and_then(|c| c.container_id.as_deref())
            .and_then(|id| id.split_once("://"))
            .map(|(_, id)| id.to_owned())
            .ok_or_else(|| fail("the container has no id: not started".into()))?;
        let qos = match status.qos_class.as_deref() {
            Some("Guaranteed") => "",
            Some("Burstable") => "burstable",
            Some("BestEffort") => "besteffort",
            other => return Err(fail(format!("unknown QoS class {other:?}"))),
        };
        let dir = Path::new("/sys/fs/cgroup/memory/kubepods")
            .join(qos)
            .join(format!("pod{uid}"))
            .join(id);
        if !dir.join("memory.usage_in_bytes").is_file() {
            return Err(fail(format!(
                "no cgroup v1 memory controller at {}",
                dir.display()
            )));
        }
        Ok(Self { name, dir })
    }

    /// What the cgroup says now.
    ///
    /// # Errors
    ///
    /// If it cannot be read (the container is gone).
    pub fn read(&self) -> Result<MemoryReading> {
        let number = |file: &str| -> Result<u64> {
            let text = self.file(file)?;
            text.trim()
                .parse()
                .map_err(|e| self.fail(format!("{file}: {e}")))
        };
        let stat = self.file("memory.stat")?;
        let field = |text: &str, key: &str| {
            text.lines()
                .filter_map(|l| l.split_once(' '))
                .find(|(k, _)| *k == key)
                .and_then(|(_, v)| v.trim().parse::<u64>().ok())
        };
        let usage = number("memory.usage_in_bytes")?;
        let inactive_file = field(&stat, "total_inactive_file").unwrap_or(0);
        Ok(MemoryReading {
            usage,
            max_usage: number("memory.max_usage_in_bytes")?,
            limit: number("memory.limit_in_bytes")?,
            failcnt: number("memory.failcnt")?,
            rss: field(&stat, "total_rss")
                .ok_or_else(|| self.fail("memory.stat has no total_rss".into()))?,
            working_set: usage.saturating_sub(inactive_file),
            oom_kills: field(&self.file("memory.oom_control")?, "oom_kill"),
        })
    }

    fn file(&self, file: &str) -> Result<String> {
        let path = self.dir.join(file);
        std::fs::read_to_string(&path).map_err(|e| self.fail(format!("{}: {e}", path.display())))
    }

    fn fail(&self, message: String) -> Error {
        Error::Cgroup {
            container: self.name.clone(),
            message,
        }
    }
}

/// Reads a container's memory every 250 ms until stopped, keeping the
/// peaks.
pub struct MemoryWatch {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<Peaks>>,
}

/// The most a [`MemoryWatch`] saw, and the last reading.
#[derive(Clone, Copy, Debug, Default)]
pub struct Peaks {
    /// The highest working set read.
    pub working_set: u64,
    /// The highest anonymous memory read.
    pub rss: u64,
    /// The last reading (its `max_usage` is the kernel's own peak).
    pub last: MemoryReading,
    /// How many readings were taken.
    pub readings: u64,
}

impl MemoryWatch {
    /// Starts reading `memory`.
    pub fn start(memory: ContainerMemory) -> Self {
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut peaks = Peaks::default();
            loop {
                // A failed read ends the watch: the container it watched is
                // gone, which is what the test needs to hear.
                let reading = memory.read()?;
                peaks.working_set = peaks.working_set.max(reading.working_set);
                peaks.rss = peaks.rss.max(reading.rss);
                peaks.last = reading;
                peaks.readings += 1;
                tokio::select! {
                    _ = &mut stopped => return Ok(peaks),
                    () = tokio::time::sleep(Duration::from_millis(250)) => {}
                }
            }
        });
        Self { stop, task }
    }

    /// Stops reading: the peaks.
    ///
    /// # Errors
    ///
    /// If a read failed (the container went away).
    pub async fn stop(self) -> Result<Peaks> {
        // The task may have ended already, on a failed read.
        let _ = self.stop.send(());
        self.task
            .await
            .map_err(|e| Error::Pods(format!("the memory watch ended: {e}")))?
    }
}
