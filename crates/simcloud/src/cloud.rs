//! The cloud itself: settings, the inventory and the control planes behind
//! locks, the timers that move instances and replicas through their states,
//! and what tests may inspect.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::api::{ControlPlane, CreateInstance, Instance, InstanceState, PutControlPlane};
use super::control_planes::{ControlPlaneRefusal, ControlPlanes, HeldPort, Rolled};
use super::faults::{Faults, Injected, Injector};
use super::inventory::{Bounds, Created, InstanceRecord, Inventory, Refusal, Terminated};

/// How the simulated cloud behaves.
#[derive(Clone)]
pub struct Settings {
    /// How long an instance stays `pending` before it is `running` (or
    /// `failed`), and a control plane's replica starting before it runs.
    /// Zero: created already booted.
    pub boot_delay: Duration,
    /// How long an instance stays `terminating` before it is gone and its
    /// request token is free again. Zero: gone as soon as it is deleted.
    pub termination_delay: Duration,
    /// Instances (terminating ones included) the cloud holds at most; a
    /// create beyond it is answered 429.
    pub max_instances: usize,
    /// Control planes the cloud holds at most (each holds a loopback
    /// port); a create beyond it is answered 429.
    pub max_control_planes: usize,
    /// Largest request body accepted; a larger one is answered 413.
    pub max_body_bytes: usize,
    /// Largest decoded bootstrap data accepted; larger is answered 400.
    pub max_bootstrap_bytes: usize,
    /// If set, every request must carry `Authorization: Bearer <token>`.
    pub bearer_token: Option<String>,
    /// If set, every running instance is registered as a Ready Node in this
    /// (workload) cluster, and its Node deleted once it stops running.
    pub nodes: Option<kube::Client>,
}

impl Default for Settings {
    /// Short delays, 1000 instances, 64 control planes, 1 MiB bodies,
    /// 256 KiB bootstrap data, no authentication and no Nodes.
    fn default() -> Self {
        Self {
            boot_delay: Duration::from_millis(200),
            termination_delay: Duration::from_millis(200),
            max_instances: 1000,
            max_control_planes: 64,
            max_body_bytes: 1 << 20,
            max_bootstrap_bytes: 256 << 10,
            bearer_token: None,
            nodes: None,
        }
    }
}

// The token is a credential, and kube::Client is not Debug.
impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("boot_delay", &self.boot_delay)
            .field("termination_delay", &self.termination_delay)
            .field("max_instances", &self.max_instances)
            .field("max_control_planes", &self.max_control_planes)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_bootstrap_bytes", &self.max_bootstrap_bytes)
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field("nodes", &self.nodes.as_ref().map(|_| "<client>"))
            .finish()
    }
}

/// A simulated cloud. Cheap to clone; clones share everything. Serve its
/// API with [`SimCloud::serve`], [`SimCloud::start`] or
/// [`SimCloud::start_on_loopback`].
#[derive(Clone, Debug)]
pub struct SimCloud {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    settings: Settings,
    inventory: Mutex<Inventory>,
    control_planes: Mutex<ControlPlanes>,
    /// Bumped after every change, for [`SimCloud::wait_for`] and the Node registrar.
    changes: watch::Sender<u64>,
    /// The faults asked for.
    injector: Injector,
}

impl SimCloud {
    /// An empty cloud.
    pub fn new(settings: Settings) -> Self {
        let bounds = Bounds {
            max_instances: settings.max_instances,
            max_bootstrap_bytes: settings.max_bootstrap_bytes,
        };
        let inventory = Inventory::new(bounds, random_salt());
        let control_planes =
            ControlPlanes::new(settings.max_control_planes, settings.boot_delay.is_zero());
        Self {
            shared: Arc::new(Shared {
                settings,
                inventory: Mutex::new(inventory),
                control_planes: Mutex::new(control_planes),
                changes: watch::Sender::new(0),
                injector: Injector::default(),
            }),
        }
    }

    /// Its settings.
    pub fn settings(&self) -> &Settings {
        &self.shared.settings
    }

    /// Injects `faults` into the requests from now on ([`Faults::default`]: none).
    pub fn set_faults(&self, faults: Faults) {
        self.shared.injector.set(faults);
    }

    /// How many requests each fault hit so far.
    pub fn injected(&self) -> Injected {
        self.shared.injector.injected()
    }

    pub(super) fn injector(&self) -> &Injector {
        &self.shared.injector
    }

    /// Every listed instance (terminating ones included), oldest first.
    pub fn instances(&self) -> Vec<InstanceRecord> {
        self.shared.inventory().records().cloned().collect()
    }

    /// The listed instances of `pool` (`<namespace>/<name>`), in every region, oldest first.
    pub fn instances_of(&self, pool: &str) -> Vec<InstanceRecord> {
        self.shared
            .inventory()
            .records()
            .filter(|r| r.instance.pool == pool)
            .cloned()
            .collect()
    }

    /// Instance `id`, while it is listed.
    pub fn instance(&self, id: &str) -> Option<InstanceRecord> {
        self.shared.inventory().record(id).cloned()
    }

    /// How many instances `request_token` created in `region` (a repeated
    /// request answered with an existing instance does not count).
    pub fn creations(&self, region: &str, request_token: &str) -> u32 {
        self.shared.inventory().creations(region, request_token)
    }

    /// How many instances were ever created.
    pub fn total_creations(&self) -> u64 {
        self.shared.inventory().total_creations()
    }

    /// Waits until `done` holds for the listed instances and returns them.
    /// Never times out by itself: wrap it in `tokio::time::timeout`.
    pub async fn wait_for(
        &self,
        mut done: impl FnMut(&[InstanceRecord]) -> bool,
    ) -> Vec<InstanceRecord> {
        // Subscribing before the first look means no change can slip between the two.
        let mut changes = self.shared.changes.subscribe();
        loop {
            let instances = self.instances();
            if done(&instances) || changes.changed().await.is_err() {
                return instances;
            }
        }
    }

    /// Notified after every change.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// The running instances, mapped by `f` while the inventory is locked.
    pub(crate) fn running<T>(&self, f: impl Fn(&InstanceRecord) -> T) -> Vec<T> {
        self.shared
            .inventory()
            .records()
            .filter(|r| r.instance.state == InstanceState::Running)
            .map(f)
            .collect()
    }

    /// `POST .../instances`: creates (and schedules the boot of) an
    /// instance, or returns the one the request token already created.
    pub(crate) fn create(&self, region: &str, request: CreateInstance) -> Result<Created, Refusal> {
        let pool = request.pool.clone();
        let boot_delay = self.settings().boot_delay;
        let (instance, failure) = {
            let mut inventory = self.shared.inventory();
            let instance = match inventory.create(region, request)? {
                Created::New(instance) => instance,
                existing @ Created::Existing(_) => return Ok(existing),
            };
            if boot_delay.is_zero() {
                inventory.boot(&instance.id);
            }
            let record = inventory.record(&instance.id);
            let failure = record.and_then(|r| r.join_failure);
            (record.map_or(instance, |r| r.instance.clone()), failure)
        };
        tracing::info!(region, pool, instance = instance.id, "created instance");
        if let Some(failure) = failure {
            // What a cloud console shows as a machine that never registered.
            tracing::warn!(region, pool, instance = instance.id, reason = %failure, "instance will boot but never join: unusable bootstrap data");
        }
        self.shared.changed();
        if !boot_delay.is_zero() {
            let id = instance.id.clone();
            self.after(boot_delay, move |shared| shared.inventory().boot(&id));
        }
        Ok(Created::New(instance))
    }

    /// `GET .../instances`.
    pub(crate) fn list(&self, region: &str, pool: Option<&str>) -> Result<Vec<Instance>, Refusal> {
        self.shared.inventory().list(region, pool)
    }

    /// `DELETE .../instances/{id}`: starts terminating it and schedules its
    /// removal; `None` if there is no such instance.
    pub(crate) fn terminate(&self, region: &str, id: &str) -> Option<Instance> {
        let terminated = self.shared.inventory().terminate(region, id)?;
        let instance = match terminated {
            Terminated::Already(instance) => return Some(instance),
            Terminated::Started(instance) => instance,
        };
        tracing::info!(
            region,
            pool = instance.pool,
            instance = id,
            "terminating instance"
        );
        let delay = self.settings().termination_delay;
        if delay.is_zero() {
            self.shared.inventory().remove(id);
        } else {
            let id = id.to_owned();
            self.after(delay, move |shared| shared.inventory().remove(&id));
        }
        self.shared.changed();
        Some(instance)
    }

    /// The control plane `name`, as it is (no step of its roll).
    pub fn control_plane(&self, name: &str) -> Option<ControlPlane> {
        self.shared.control_planes().state(name)
    }

    /// Every control plane, by name.
    pub fn control_planes(&self) -> Vec<ControlPlane> {
        self.shared.control_planes().states()
    }

    /// `PUT /v1/control-planes/{name}`: a step of its roll, then creates it
    /// or brings it to what `request` asks; its state after.
    pub(crate) fn put_control_plane(
        &self,
        name: &str,
        request: PutControlPlane,
    ) -> Result<ControlPlane, ControlPlaneRefusal> {
        let (version, replicas) = (request.version.clone(), request.replicas);
        let (rolled, put) = {
            let mut planes = self.shared.control_planes();
            let rolled = planes.step(name);
            (rolled, planes.put(name, request, HeldPort::loopback))
        };
        // A refused PUT leaves the step it came with standing.
        self.rolled(name, rolled);
        let put = put?;
        if put.changed {
            let message = if put.created {
                "created control plane"
            } else {
                "updated control plane"
            };
            tracing::info!(control_plane = name, version, replicas, "{message}");
            self.shared.changed();
        }
        self.boot_later(name, put.to_boot);
        Ok(put.state)
    }

    /// `GET /v1/control-planes/{name}`: a step of its roll, then its state.
    pub(crate) fn get_control_plane(&self, name: &str) -> Option<ControlPlane> {
        let (rolled, state) = {
            let mut planes = self.shared.control_planes();
            let rolled = planes.step(name);
            (rolled, planes.state(name))
        };
        self.rolled(name, rolled);
        state
    }

    /// `DELETE /v1/control-planes/{name}`: removes it at once, freeing its
    /// port; its last state, or `None` if there is none.
    pub(crate) fn delete_control_plane(&self, name: &str) -> Option<ControlPlane> {
        let removed = self.shared.control_planes().remove(name)?;
        tracing::info!(control_plane = name, "deleted control plane");
        self.shared.changed();
        Some(removed)
    }

    /// Follows up on a step of a roll, if it replaced a replica.
    fn rolled(&self, name: &str, rolled: Option<Rolled>) {
        let Some(rolled) = rolled else {
            return;
        };
        tracing::info!(
            control_plane = name,
            from = rolled.from,
            "replacing a replica not at the asked version"
        );
        self.boot_later(name, rolled.to_boot);
        self.shared.changed();
    }

    /// Boots replicas `seqs` of control plane `name` after the boot delay.
    fn boot_later(&self, name: &str, seqs: impl IntoIterator<Item = u64>) {
        for seq in seqs {
            let name = name.to_owned();
            self.after(self.settings().boot_delay, move |shared| {
                shared.control_planes().boot(&name, seq)
            });
        }
    }

    /// Applies `step` after `delay`, unless the cloud is gone by then.
    fn after(&self, delay: Duration, step: impl FnOnce(&Shared) -> bool + Send + 'static) {
        let shared: Weak<Shared> = Arc::downgrade(&self.shared);
        let apply = move || {
            if let Some(shared) = shared.upgrade()
                && step(&shared)
            {
                shared.changed();
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(delay).await;
                    apply();
                });
            }
            // Only reachable when called outside any runtime; better early than never.
            Err(_) => apply(),
        }
    }
}

impl Shared {
    /// The inventory. A poisoned lock is taken over: nothing panics while
    /// holding it, and a cloud that stopped answering would hide such a bug
    /// behind test timeouts.
    fn inventory(&self) -> MutexGuard<'_, Inventory> {
        self.inventory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The control planes; a poisoned lock is taken over, as the inventory's.
    fn control_planes(&self) -> MutexGuard<'_, ControlPlanes> {
        self.control_planes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// 24 bits that differ between clouds and between runs.
fn random_salt() -> u32 {
    use std::hash::{BuildHasher as _, RandomState};
    RandomState::new().hash_one(std::process::id()) as u32 & 0x00ff_ffff
}
