//! capwasm installed as its users install it, into a [`crate::node::Node`]:
//! `deploy/` (or one of its variants) rendered by kustomize with the image
//! named by digest, applied, its Pods awaited; when something does not
//! come, what a user would look at (each Pod's state and logs); and a
//! container's memory, read from the node's cgroups.

use std::fmt::Debug;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, LogParams, PatchParams};
use kube::runtime::wait::await_condition;
use kube::{Client, Resource, ResourceExt as _};
use serde::de::DeserializeOwned;

use crate::image::{OperatorImage, REPOSITORY};
use crate::{Error, Result};

/// The namespace deploy/ installs into.
pub const NAMESPACE: &str = "capwasm-system";
/// The label selector of the operator's Pods.
pub const SELECTOR: &str = "app.kubernetes.io/name=capwasm";
/// The operator's container.
pub const CONTAINER: &str = "manager";
const MANAGER: &str = "capwasm-tests";
/// Log lines of each Pod shown when something is not as awaited.
const LOG_TAIL: i64 = 40;

/// `deploy/<variant>` (`""`: the standalone install) as kustomize renders
/// it, with the operator image named by digest, as a release names it.
///
/// # Errors
///
/// If kustomize fails or the install names no image of [`REPOSITORY`].
pub fn rendered(variant: &str, image: &OperatorImage) -> Result<Vec<DynamicObject>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(variant);
    let mut objects = crate::kustomize::objects(&dir)?;
    let mut named = 0;
    for object in &mut objects {
        let Some(containers) = object
            .data
            .pointer_mut("/spec/template/spec/containers")
            .and_then(|c| c.as_array_mut())
        else {
            continue;
        };
        for container in containers {
            let Some(image_field) = container.get_mut("image") else {
                continue;
            };
            if image_field
                .as_str()
                .is_some_and(|i| i.starts_with(&format!("{REPOSITORY}:")))
            {
                *image_field = serde_json::Value::String(image.reference());
                named += 1;
            }
        }
    }
    if named == 0 {
        return Err(Error::Manifest(format!(
            "deploy/{variant} names no {REPOSITORY} image"
        )));
    }
    Ok(objects)
}

/// Applies `objects` server-side, as `kubectl apply --server-side` does.
///
/// # Errors
///
/// The first object refused, named.
pub async fn apply_all(client: &Client, objects: &[DynamicObject]) -> Result<()> {
    let params = PatchParams::apply(MANAGER).force();
    for object in objects {
        crate::kustomize::apply(client, object, &params)
            .await
            .map_err(|source| Error::Apply {
                object: format!(
                    "{} {}",
                    object.types.as_ref().map_or("", |t| t.kind.as_str()),
                    object.name_any()
                ),
                source: Box::new(source),
            })?;
    }
    Ok(())
}

/// What a user would look at when the install does not do what it should:
/// each Pod's phase, conditions, container states (restarts, the last
/// termination and why) and logs, those of the container's previous run
/// too when it restarted.
pub async fn describe_pods(client: &Client) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let mut text = String::new();
    let list = match pods.list(&ListParams::default()).await {
        Ok(list) => list,
        Err(error) => return format!("the Pods of {NAMESPACE} could not be listed: {error}"),
    };
    for pod in list {
        let name = pod.name_any();
        let status = serde_json::to_string_pretty(&pod.status).unwrap_or_default();
        let _ = writeln!(text, "--- Pod {name}\n{status}");
        let restarted = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|s| s.iter().any(|c| c.restart_count > 0));
        let runs: &[bool] = if restarted { &[true, false] } else { &[false] };
        for &previous in runs {
            let logs = pods
                .logs(
                    &name,
                    &LogParams {
                        tail_lines: Some(LOG_TAIL),
                        previous,
                        ..LogParams::default()
                    },
                )
                .await
                .unwrap_or_else(|e| format!("(no logs: {e})"));
            let which = if previous { "previous run" } else { "logs" };
            let _ = writeln!(text, "{which} of {name}:\n{logs}");
        }
    }
    text
}

/// Waits until `done` holds for object `name` of `api` (`None`: it does not
/// exist), at most `timeout`, and returns it.
///
/// # Errors
///
/// After `timeout`: what was awaited, the object as it is, and the Pods
/// ([`describe_pods`]).
pub async fn wait_until<K>(
    client: &Client,
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(Option<&K>) -> bool,
) -> Result<Option<K>>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let watched = tokio::time::timeout_at(
            deadline,
            await_condition(api.clone(), name, |o: Option<&K>| done(o)),
        )
        .await;
        match watched {
            Ok(Ok(object)) => return Ok(object),
            // A watch the API server ended (410 Gone under load): again.
            Ok(Err(error)) => {
                eprintln!("watching {name} until {what}: {error}; watching again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(_) => {
                let now = api.get_opt(name).await;
                return Err(Error::Pods(format!(
                    "{name}: not {what} within {timeout:?}; it is now {now:#?}\n{}",
                    describe_pods(client).await
                )));
            }
        }
    }
}

/// Waits until `count` of the operator's Pods are Ready, none of them
/// going away; returns them.
///
/// # Errors
///
/// After `timeout`, with [`describe_pods`].
pub async fn wait_ready_pods(client: &Client, count: usize, timeout: Duration) -> Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let started = tokio::time::Instant::now();
    loop {
        let list = pods.list(&ListParams::default().labels(SELECTOR)).await?;
        let ready: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && is_ready(p))
            .collect();
        if ready.len() == count {
            return Ok(ready);
        }
        if started.elapsed() > timeout {
            return Err(Error::Pods(format!(
                "{count} Ready Pods of {SELECTOR} not there within {timeout:?} ({} are)\n{}",
                ready.len(),
                describe_pods(client).await
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether `pod`'s Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

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
