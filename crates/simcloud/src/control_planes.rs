//! Hosted control planes: what the cloud holds for each (the version and
//! replica count asked for, the replicas it has, the loopback port its API
//! server gets) and how replicas start and roll. Synchronous; timers and
//! HTTP are in `cloud.rs` and `server.rs`.
//!
//! A replica is a record only for now: nothing listens on the port yet.
//! Replicas start like instances boot (after [`Settings::boot_delay`]).
//! A new version does not touch them at once: every GET or PUT is a step
//! of the roll, which replaces the oldest replica not at the asked version
//! by one that is, once no replica is starting. So replicas are replaced
//! one by one, each waiting for the one before to run.
//!
//! [`Settings::boot_delay`]: super::Settings::boot_delay

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use tokio::net::TcpSocket;

use super::api::{ControlPlane, ControlPlaneEndpoint, PutControlPlane};

/// The most replicas a control plane may have.
pub(crate) const MAX_REPLICAS: u32 = 9;
// A namespace (63) and an object name (253) joined by '/', as pools.
const MAX_NAME: usize = 317;
const MAX_KEY: usize = 128;
const MAX_VERSION: usize = 63;

/// Why the API refuses a control-plane request (nothing changes).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ControlPlaneRefusal {
    /// A parameter is missing, out of range or malformed.
    #[error("{field} {problem}")]
    InvalidParameter {
        field: &'static str,
        problem: &'static str,
    },
    /// The version asked for has a lower minor than a replica runs.
    #[error(
        "version {asked} is a downgrade: a replica runs {running}, and control planes are never downgraded to a lower minor"
    )]
    Downgrade { asked: String, running: String },
    /// The name is another object's: it was created with another key.
    #[error("control plane {name} was created with another idempotencyKey")]
    NameInUse { name: String },
    /// The cloud holds as many control planes as it may.
    #[error("the cloud is at its limit of {max} control planes")]
    Limit { max: usize },
    /// No loopback port could be held for the API server.
    #[error("no loopback port can be held for the control plane's API server")]
    NoPort(#[source] io::Error),
}

/// A loopback port held for a control plane's API server from its creation
/// on: bound but not listening, so nothing else can take it and connecting
/// to it is refused until an API server listens there.
pub(crate) struct HeldPort {
    port: u16,
    /// `None` only in unit tests, which make up ports.
    socket: Option<TcpSocket>,
}

impl HeldPort {
    /// A free port of 127.0.0.1, held.
    pub(crate) fn loopback() -> io::Result<Self> {
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
        let port = socket.local_addr()?.port();
        Ok(Self {
            port,
            socket: Some(socket),
        })
    }

    #[cfg(test)]
    pub(crate) fn made_up(port: u16) -> Self {
        Self { port, socket: None }
    }
}

impl fmt::Debug for HeldPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldPort")
            .field("port", &self.port)
            .field("held", &self.socket.is_some())
            .finish()
    }
}

/// A Kubernetes version, `v` and a semantic version; ordered as versions.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct KubeVersion(semver::Version);

impl KubeVersion {
    fn parse(version: &str) -> Option<Self> {
        if version.len() > MAX_VERSION {
            return None;
        }
        semver::Version::parse(version.strip_prefix('v')?)
            .ok()
            .map(Self)
    }

    fn minor(&self) -> (u64, u64) {
        (self.0.major, self.0.minor)
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// One replica of a control plane.
#[derive(Debug)]
struct Replica {
    /// Unique over the cloud's life, so that a timer never boots a replica
    /// that replaced the one it was set for.
    seq: u64,
    version: KubeVersion,
    running: bool,
}

/// Everything the cloud knows about one control plane.
#[derive(Debug)]
struct Record {
    idempotency_key: String,
    version: KubeVersion,
    replicas: u32,
    /// Oldest first.
    members: Vec<Replica>,
    initialized: bool,
    port: HeldPort,
}

impl Record {
    fn up_to_date(&self, replica: &Replica) -> bool {
        replica.version == self.version
    }

    fn state(&self, name: &str) -> ControlPlane {
        let count = |keep: &dyn Fn(&Replica) -> bool| {
            u32::try_from(self.members.iter().filter(|r| keep(r)).count()).unwrap_or(u32::MAX)
        };
        let running = count(&|r| r.running);
        ControlPlane {
            name: name.to_owned(),
            version: self.version.to_string(),
            replicas: count(&|_| true),
            ready_replicas: running,
            // Nothing serves yet but the record: a running replica serves.
            available_replicas: running,
            up_to_date_replicas: count(&|r| self.up_to_date(r)),
            initialized: self.initialized,
            oldest_version: self
                .members
                .iter()
                .map(|r| &r.version)
                .min()
                .filter(|_| self.initialized)
                .map(ToString::to_string),
            endpoint: Some(ControlPlaneEndpoint {
                host: Ipv4Addr::LOCALHOST.to_string(),
                port: self.port.port,
            }),
        }
    }

    /// Removes replicas until `self.replicas` are left: those not at the
    /// asked version first, then those not running, then the newest.
    fn scale_down(&mut self) {
        let target = usize::try_from(self.replicas).unwrap_or(usize::MAX);
        while self.members.len() > target {
            let victim = self
                .members
                .iter()
                .enumerate()
                .min_by_key(|(_, r)| (self.up_to_date(r), r.running, std::cmp::Reverse(r.seq)))
                .map(|(at, _)| at);
            match victim {
                Some(at) => drop(self.members.remove(at)),
                None => break,
            }
        }
    }
}

/// What a PUT did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Put {
    /// The control plane did not exist.
    pub(crate) created: bool,
    /// It was created, or its version or replica count changed.
    pub(crate) changed: bool,
    /// Replicas it started, to boot (none if they run at once).
    pub(crate) to_boot: Vec<u64>,
    /// The control plane after.
    pub(crate) state: ControlPlane,
}

/// A step of a roll: a replica replaced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Rolled {
    /// The version of the replica replaced.
    pub(crate) from: String,
    /// The new replica, to boot (none if it runs at once).
    pub(crate) to_boot: Option<u64>,
}

/// `n` new replicas at `version`, numbered after `last_seq`; starting, or
/// running if `at_once`.
fn replicas(last_seq: &mut u64, version: &KubeVersion, n: usize, at_once: bool) -> Vec<Replica> {
    (0..n)
        .map(|_| {
            *last_seq += 1;
            Replica {
                seq: *last_seq,
                version: version.clone(),
                running: at_once,
            }
        })
        .collect()
}

/// The ones of `replicas` still to boot.
fn to_boot(replicas: &[Replica]) -> Vec<u64> {
    replicas
        .iter()
        .filter(|r| !r.running)
        .map(|r| r.seq)
        .collect()
}

/// The cloud's control planes.
#[derive(Debug)]
pub(crate) struct ControlPlanes {
    max: usize,
    /// Replicas run as soon as they exist: there is no boot delay.
    at_once: bool,
    last_seq: u64,
    planes: BTreeMap<String, Record>,
}

impl ControlPlanes {
    /// No control planes, and room for `max`. Replicas run as soon as they
    /// exist if `at_once`, else once [`ControlPlanes::boot`] boots them.
    pub(crate) fn new(max: usize, at_once: bool) -> Self {
        Self {
            max,
            at_once,
            last_seq: 0,
            planes: BTreeMap::new(),
        }
    }

    /// Creates control plane `name`, holding a port from `hold`, or brings
    /// its version and replica count to what `request` asks.
    pub(crate) fn put(
        &mut self,
        name: &str,
        request: PutControlPlane,
        hold: impl FnOnce() -> io::Result<HeldPort>,
    ) -> Result<Put, ControlPlaneRefusal> {
        let version = check_put(name, &request)?;
        let wanted = usize::try_from(request.replicas).unwrap_or(usize::MAX);
        let Some(record) = self.planes.get_mut(name) else {
            if self.planes.len() >= self.max {
                return Err(ControlPlaneRefusal::Limit { max: self.max });
            }
            let port = hold().map_err(ControlPlaneRefusal::NoPort)?;
            let members = replicas(&mut self.last_seq, &version, wanted, self.at_once);
            let record = Record {
                idempotency_key: request.idempotency_key,
                version,
                replicas: request.replicas,
                initialized: self.at_once,
                port,
                members,
            };
            let put = Put {
                created: true,
                changed: true,
                to_boot: to_boot(&record.members),
                state: record.state(name),
            };
            self.planes.insert(name.to_owned(), record);
            return Ok(put);
        };

        if record.idempotency_key != request.idempotency_key {
            return Err(ControlPlaneRefusal::NameInUse {
                name: name.to_owned(),
            });
        }
        if let Some(newest) = record.members.iter().map(|r| &r.version).max()
            && version.minor() < newest.minor()
        {
            return Err(ControlPlaneRefusal::Downgrade {
                asked: version.to_string(),
                running: newest.to_string(),
            });
        }
        let changed = record.version != version || record.replicas != request.replicas;
        let missing = wanted.saturating_sub(record.members.len());
        let added = replicas(&mut self.last_seq, &version, missing, self.at_once);
        let started = to_boot(&added);
        record.version = version;
        record.replicas = request.replicas;
        record.members.extend(added);
        record.scale_down();
        Ok(Put {
            created: false,
            changed,
            to_boot: started,
            state: record.state(name),
        })
    }

    /// A step of the roll of control plane `name`: once no replica is
    /// starting, replaces the oldest replica not at the asked version by
    /// one that is. What it did, if anything.
    pub(crate) fn step(&mut self, name: &str) -> Option<Rolled> {
        let record = self.planes.get_mut(name)?;
        if record.members.iter().any(|r| !r.running) {
            return None;
        }
        let stale = record.members.iter().position(|r| !record.up_to_date(r))?;
        let replaced = record.members.remove(stale);
        let replica = replicas(&mut self.last_seq, &record.version, 1, self.at_once);
        let rolled = Rolled {
            from: replaced.version.to_string(),
            to_boot: to_boot(&replica).pop(),
        };
        record.members.extend(replica);
        Some(rolled)
    }

    /// Ends the start of replica `seq` of `name`: it runs, and the control
    /// plane is initialized. Whether anything changed.
    pub(crate) fn boot(&mut self, name: &str, seq: u64) -> bool {
        let Some(record) = self.planes.get_mut(name) else {
            return false;
        };
        match record.members.iter_mut().find(|r| r.seq == seq) {
            Some(replica) if !replica.running => {
                replica.running = true;
                record.initialized = true;
                true
            }
            _ => false,
        }
    }

    /// Removes control plane `name`, freeing its port; its last state.
    pub(crate) fn remove(&mut self, name: &str) -> Option<ControlPlane> {
        self.planes.remove(name).map(|record| record.state(name))
    }

    /// The state of control plane `name`.
    pub(crate) fn state(&self, name: &str) -> Option<ControlPlane> {
        self.planes.get(name).map(|record| record.state(name))
    }

    /// Every control plane's state, by name.
    pub(crate) fn states(&self) -> Vec<ControlPlane> {
        self.planes
            .iter()
            .map(|(name, record)| record.state(name))
            .collect()
    }
}

/// Checks a PUT and returns its version.
fn check_put(name: &str, request: &PutControlPlane) -> Result<KubeVersion, ControlPlaneRefusal> {
    let invalid = |field, problem| Err(ControlPlaneRefusal::InvalidParameter { field, problem });
    if !is_name(name) {
        return invalid(
            "name",
            "must be <name> or <namespace>/<name>: lowercase alphanumerics, '-' and '.', at most 317 characters",
        );
    }
    let key = &request.idempotency_key;
    if key.is_empty() || key.len() > MAX_KEY || key.chars().any(char::is_control) {
        return invalid(
            "idempotencyKey",
            "must be 1-128 characters without control characters",
        );
    }
    if !(1..=MAX_REPLICAS).contains(&request.replicas) {
        return invalid("replicas", "must be 1 to 9");
    }
    match KubeVersion::parse(&request.version) {
        Some(version) => Ok(version),
        None => invalid(
            "version",
            "must be vX.Y.Z (a Kubernetes version such as v1.36.3), at most 63 characters",
        ),
    }
}

/// One or two DNS-subdomain-like parts joined by '/': `ns/name` as the
/// guest names them, or a plain name.
fn is_name(name: &str) -> bool {
    let part = |part: &str| {
        let bytes = part.as_bytes();
        let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        bytes.first().is_some_and(edge)
            && bytes.last().is_some_and(edge)
            && bytes.iter().all(|b| edge(b) || matches!(b, b'-' | b'.'))
    };
    name.len() <= MAX_NAME
        && match name.split_once('/') {
            Some((namespace, rest)) => part(namespace) && part(rest),
            None => part(name),
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: &str = "ns/cp";

    fn request(version: &str, replicas: u32) -> PutControlPlane {
        PutControlPlane {
            version: version.into(),
            replicas,
            idempotency_key: "uid-1".into(),
        }
    }

    fn put(planes: &mut ControlPlanes, version: &str, replicas: u32) -> Put {
        planes
            .put(NAME, request(version, replicas), || {
                Ok(HeldPort::made_up(40_000))
            })
            .expect("accepted")
    }

    /// Boots every replica started.
    fn boot_all(planes: &mut ControlPlanes, started: &[u64]) {
        for seq in started {
            assert!(planes.boot(NAME, *seq));
        }
    }

    fn state(planes: &ControlPlanes) -> ControlPlane {
        planes.state(NAME).expect("exists")
    }

    /// (replicas, ready, up to date)
    fn counts(plane: &ControlPlane) -> (u32, u32, u32) {
        (
            plane.replicas,
            plane.ready_replicas,
            plane.up_to_date_replicas,
        )
    }

    #[test]
    fn put_creates_a_control_plane_whose_replicas_start_then_run() {
        let mut planes = ControlPlanes::new(10, false);
        let created = put(&mut planes, "v1.36.3", 3);
        assert!(created.created);
        assert_eq!(created.to_boot.len(), 3);
        let starting = state(&planes);
        assert_eq!(counts(&starting), (3, 0, 3));
        assert!(!starting.initialized);
        assert_eq!(starting.oldest_version, None);
        let endpoint = starting.endpoint.expect("an endpoint from creation on");
        assert_eq!(
            (endpoint.host.as_str(), endpoint.port),
            ("127.0.0.1", 40_000)
        );

        assert!(planes.boot(NAME, created.to_boot[0]));
        let one = state(&planes);
        assert!(one.initialized);
        assert_eq!(one.available_replicas, 1);
        assert_eq!(one.oldest_version.as_deref(), Some("v1.36.3"));
        boot_all(&mut planes, &created.to_boot[1..]);
        assert_eq!(counts(&state(&planes)), (3, 3, 3));
        assert!(
            !planes.boot(NAME, created.to_boot[0]),
            "booting twice changes nothing"
        );
    }

    #[test]
    fn put_again_keeps_the_port_and_changes_nothing_when_nothing_changed() {
        let mut planes = ControlPlanes::new(10, false);
        let created = put(&mut planes, "v1.36.3", 1);
        boot_all(&mut planes, &created.to_boot);
        let again = planes
            .put(NAME, request("v1.36.3", 1), || panic!("no second port"))
            .expect("accepted");
        assert!(!again.created);
        assert!(!again.changed);
        assert_eq!(again.to_boot, Vec::<u64>::new());
        assert_eq!(again.state, state(&planes));
        assert_eq!(counts(&again.state), (1, 1, 1));
    }

    #[test]
    fn a_new_version_rolls_one_replica_per_step_once_the_last_one_runs() {
        let mut planes = ControlPlanes::new(10, false);
        let created = put(&mut planes, "v1.35.2", 3);
        boot_all(&mut planes, &created.to_boot);
        assert_eq!(put(&mut planes, "v1.36.0", 3).to_boot, Vec::<u64>::new());
        assert_eq!(counts(&state(&planes)), (3, 3, 0), "none up to date yet");

        let roll = |planes: &mut ControlPlanes| {
            let rolled = planes.step(NAME).expect("rolls one");
            assert_eq!(rolled.from, "v1.35.2");
            rolled.to_boot.expect("a replica to boot")
        };
        let first = roll(&mut planes);
        assert_eq!(counts(&state(&planes)), (3, 2, 1));
        assert_eq!(planes.step(NAME), None, "waits for the replica starting");
        assert!(planes.boot(NAME, first));
        let second = roll(&mut planes);
        assert!(planes.boot(NAME, second));
        assert_eq!(state(&planes).oldest_version.as_deref(), Some("v1.35.2"));
        let third = roll(&mut planes);
        assert!(planes.boot(NAME, third));
        let rolled = state(&planes);
        assert_eq!(counts(&rolled), (3, 3, 3));
        assert_eq!(rolled.oldest_version.as_deref(), Some("v1.36.0"));
        assert_eq!(planes.step(NAME), None, "nothing left to roll");
    }

    #[test]
    fn replicas_run_at_once_and_roll_in_one_step_each_without_a_boot_delay() {
        let mut planes = ControlPlanes::new(10, true);
        let created = put(&mut planes, "v1.35.2", 2);
        assert_eq!(created.to_boot, Vec::<u64>::new());
        assert!(created.state.initialized);
        assert_eq!(counts(&created.state), (2, 2, 2));
        put(&mut planes, "v1.36.0", 2);
        for up_to_date in 1..=2 {
            let rolled = planes.step(NAME).expect("rolls one");
            assert_eq!(rolled.to_boot, None);
            assert_eq!(counts(&state(&planes)), (2, 2, up_to_date));
        }
        assert_eq!(planes.step(NAME), None);
    }

    #[test]
    fn scaling_adds_replicas_at_the_asked_version_and_removes_stale_ones_first() {
        let mut planes = ControlPlanes::new(10, false);
        let created = put(&mut planes, "v1.35.2", 1);
        boot_all(&mut planes, &created.to_boot);
        let up = put(&mut planes, "v1.36.0", 3);
        assert_eq!(up.to_boot.len(), 2);
        assert_eq!(counts(&state(&planes)), (3, 1, 2));
        boot_all(&mut planes, &up.to_boot);
        put(&mut planes, "v1.36.0", 2);
        let down = state(&planes);
        assert_eq!(counts(&down), (2, 2, 2), "the v1.35.2 replica went first");
        assert_eq!(down.oldest_version.as_deref(), Some("v1.36.0"));
    }

    #[test]
    fn put_is_refused_when_it_downgrades_the_minor_a_replica_runs() {
        let mut planes = ControlPlanes::new(10, false);
        put(&mut planes, "v1.36.3", 1);
        assert!(matches!(
            planes.put(NAME, request("v1.35.9", 1), || panic!("exists")),
            Err(ControlPlaneRefusal::Downgrade { ref asked, ref running })
                if asked == "v1.35.9" && running == "v1.36.3"
        ));
        // A lower patch of the same minor is not a downgrade of the minor.
        put(&mut planes, "v1.36.1", 1);
        assert_eq!(state(&planes).version, "v1.36.1");
    }

    #[test]
    fn put_is_refused_when_another_key_created_the_name() {
        let mut planes = ControlPlanes::new(10, false);
        put(&mut planes, "v1.36.3", 1);
        let mut other = request("v1.36.3", 1);
        other.idempotency_key = "uid-2".into();
        assert!(matches!(
            planes.put(NAME, other, || panic!("exists")),
            Err(ControlPlaneRefusal::NameInUse { .. })
        ));
    }

    #[test]
    fn put_is_refused_at_the_limit_and_when_no_port_can_be_held() {
        let mut planes = ControlPlanes::new(1, false);
        put(&mut planes, "v1.36.3", 1);
        assert!(matches!(
            planes.put("ns/other", request("v1.36.3", 1), || panic!(
                "over the limit"
            )),
            Err(ControlPlaneRefusal::Limit { max: 1 })
        ));
        let mut planes = ControlPlanes::new(1, false);
        let refused = planes.put(NAME, request("v1.36.3", 1), || {
            Err(io::Error::from(io::ErrorKind::AddrInUse))
        });
        assert!(matches!(refused, Err(ControlPlaneRefusal::NoPort(_))));
        assert!(planes.states().is_empty());
    }

    #[test]
    fn put_is_refused_when_a_parameter_is_malformed() {
        type Change = fn(&mut PutControlPlane);
        let cases: [(&str, Change); 7] = [
            ("version", |r| r.version = "1.36.3".into()),
            ("version", |r| r.version = "v1.36".into()),
            ("version", |r| r.version = "v1.36.3 && reboot".into()),
            ("replicas", |r| r.replicas = 0),
            ("replicas", |r| r.replicas = MAX_REPLICAS + 1),
            ("idempotencyKey", |r| r.idempotency_key.clear()),
            ("idempotencyKey", |r| r.idempotency_key = "a\nb".into()),
        ];
        for (field, change) in cases {
            let mut request = request("v1.36.3", 1);
            change(&mut request);
            let result =
                ControlPlanes::new(10, false).put(NAME, request, || panic!("refused first"));
            assert!(
                matches!(result, Err(ControlPlaneRefusal::InvalidParameter { field: f, .. }) if f == field),
                "{field}: {result:?}"
            );
        }
    }

    #[test]
    fn a_name_is_one_or_two_lowercase_parts() {
        for good in ["cp", "ns/cp", "team-a/cp.prod", "0/1"] {
            assert!(is_name(good), "{good}");
        }
        for bad in [
            "",
            "/",
            "ns/",
            "/cp",
            "a/b/c",
            "NS/cp",
            "ns/cp-",
            "ns cp",
            &"a".repeat(318),
        ] {
            assert!(!is_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn remove_forgets_the_control_plane_and_its_timers_find_nothing() {
        let mut planes = ControlPlanes::new(10, false);
        let created = put(&mut planes, "v1.36.3", 1);
        assert_eq!(planes.remove(NAME).map(|p| p.name), Some(NAME.to_owned()));
        assert_eq!(planes.state(NAME), None);
        assert!(!planes.boot(NAME, created.to_boot[0]));
        assert_eq!(planes.step(NAME), None);
        assert_eq!(planes.remove(NAME), None);
    }

    #[test]
    fn held_port_is_a_loopback_port_nothing_answers_on() {
        let held = HeldPort::loopback().expect("a free port");
        assert_ne!(held.port, 0);
        let refused = std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, held.port));
        assert!(refused.is_err(), "bound, not listening");
        assert!(
            std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, held.port)).is_err(),
            "nothing else can take it"
        );
    }
}
