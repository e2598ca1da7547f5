//! What the cloud holds: instances, the request tokens that made them and
//! how many creations each token caused, and the transitions between
//! states. Synchronous and free of I/O; timers and HTTP are in `cloud.rs`
//! and `server.rs`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use base64::Engine as _;

use super::api::{Address, AddressType, BootstrapFormat, CreateInstance, Instance, InstanceState};
use super::bootstrap::{self, JoinFailure};

/// Everything the cloud knows about one instance: what the API shows and
/// what it was created with.
#[derive(Clone, PartialEq, Eq)]
pub struct InstanceRecord {
    /// The region it runs in.
    pub region: String,
    /// The token of the request that created it.
    pub request_token: String,
    /// What the API reports.
    pub instance: Instance,
    /// How its bootstrap data is interpreted.
    pub bootstrap_format: BootstrapFormat,
    /// Its bootstrap data, decoded (shared: records are cloned for every look).
    pub bootstrap_data: Arc<[u8]>,
    /// Why it fails to join, when its bootstrap data is unusable; it ends
    /// `failed` instead of `running` once booted.
    pub join_failure: Option<JoinFailure>,
    /// Labels its Node registers with.
    pub node_labels: BTreeMap<String, String>,
    /// The instance type asked for.
    pub instance_type: Option<String>,
    /// The Kubernetes version its kubelet reports.
    pub kubernetes_version: Option<String>,
}

// Bootstrap data holds join tokens and keys: an assertion message must not print it.
impl fmt::Debug for InstanceRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InstanceRecord")
            .field("region", &self.region)
            .field("request_token", &self.request_token)
            .field("instance", &self.instance)
            .field("bootstrap_format", &self.bootstrap_format)
            .field(
                "bootstrap_data",
                &format_args!("<{} bytes>", self.bootstrap_data.len()),
            )
            .field("join_failure", &self.join_failure)
            .field("node_labels", &self.node_labels)
            .field("instance_type", &self.instance_type)
            .field("kubernetes_version", &self.kubernetes_version)
            .finish()
    }
}

/// Why the API refuses a request outright (nothing is created).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    /// A parameter is missing, too long or malformed.
    #[error("{field} {problem}")]
    InvalidParameter {
        field: &'static str,
        problem: &'static str,
    },
    /// The bootstrap data is not base64: the API cannot even store it.
    #[error("bootstrapData is not valid base64")]
    BootstrapEncoding(#[source] base64::DecodeError),
    /// The bootstrap data is larger than a machine's user data may be.
    #[error("bootstrapData decodes to {size} bytes, over the limit of {max}")]
    BootstrapTooLarge { size: usize, max: usize },
    /// The token already created an instance, for another pool.
    #[error("request token {token:?} already created instance {id} in another pool")]
    TokenReused { token: String, id: String },
    /// The cloud holds as many instances as it may.
    #[error("the region is at the cloud's limit of {max} instances")]
    InstanceLimit { max: usize },
}

/// What a create did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Created {
    /// A new instance, pending.
    New(Instance),
    /// The instance an earlier request with the same token created.
    Existing(Instance),
}

/// What a terminate did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Terminated {
    /// The instance is now terminating; it must be removed later.
    Started(Instance),
    /// It was already terminating.
    Already(Instance),
}

/// Bounds on what the inventory accepts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    pub(crate) max_instances: usize,
    pub(crate) max_bootstrap_bytes: usize,
}

/// The cloud's state.
#[derive(Debug)]
pub(crate) struct Inventory {
    bounds: Bounds,
    /// Mixed into ids, so that two clouds in one process never hand out the same providerID.
    salt: u32,
    last_seq: u64,
    /// By id; ids sort in creation order.
    instances: BTreeMap<String, InstanceRecord>,
    /// (region, request token) → id of the listed instance it created.
    tokens: HashMap<(String, String), String>,
    /// (region, request token) → instances it created over the cloud's life.
    creations: HashMap<(String, String), u32>,
    total_creations: u64,
}

/// Creation counts of tokens whose instances are gone are forgotten beyond
/// this many per allowed instance, so the map stays bounded under churn.
const CREATIONS_KEPT_PER_INSTANCE: usize = 16;

const MAX_NAME: usize = 63;
const MAX_TOKEN: usize = 128;
// A namespace (63) and an object name (253) joined by '/'.
const MAX_POOL: usize = 317;
const MAX_LABELS: usize = 64;
const MAX_LABEL_KEY: usize = 317;
const MAX_LABEL_VALUE: usize = 63;

impl Inventory {
    pub(crate) fn new(bounds: Bounds, salt: u32) -> Self {
        Self {
            bounds,
            salt: salt & 0x00ff_ffff,
            last_seq: 0,
            instances: BTreeMap::new(),
            tokens: HashMap::new(),
            creations: HashMap::new(),
            total_creations: 0,
        }
    }

    /// Creates an instance, pending, or returns the one `request.request_token`
    /// created earlier in `region` if it is still listed.
    pub(crate) fn create(
        &mut self,
        region: &str,
        request: CreateInstance,
    ) -> Result<Created, Refusal> {
        check_region(region)?;
        check_create(&request)?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(&request.bootstrap_data)
            .map_err(Refusal::BootstrapEncoding)?;
        if data.len() > self.bounds.max_bootstrap_bytes {
            return Err(Refusal::BootstrapTooLarge {
                size: data.len(),
                max: self.bounds.max_bootstrap_bytes,
            });
        }
        let key = (region.to_owned(), request.request_token);
        if let Some(existing) = self.tokens.get(&key).and_then(|id| self.instances.get(id)) {
            if existing.instance.pool != request.pool {
                return Err(Refusal::TokenReused {
                    token: key.1,
                    id: existing.instance.id.clone(),
                });
            }
            return Ok(Created::Existing(existing.instance.clone()));
        }
        if self.instances.len() >= self.bounds.max_instances {
            return Err(Refusal::InstanceLimit {
                max: self.bounds.max_instances,
            });
        }

        self.last_seq += 1;
        let id = instance_id(self.salt, self.last_seq);
        let instance = Instance {
            provider_id: format!("sim://{region}/{id}"),
            id: id.clone(),
            pool: request.pool,
            state: InstanceState::Pending,
            failure_domain: request.failure_domain,
            addresses: vec![Address {
                kind: AddressType::InternalIp,
                address: internal_ip(self.last_seq),
            }],
        };
        let record = InstanceRecord {
            region: key.0.clone(),
            request_token: key.1.clone(),
            instance: instance.clone(),
            bootstrap_format: request.bootstrap_format,
            join_failure: bootstrap::check(request.bootstrap_format, &data).err(),
            bootstrap_data: data.into(),
            node_labels: request.node_labels,
            instance_type: request.instance_type,
            kubernetes_version: request.kubernetes_version,
        };
        self.instances.insert(id.clone(), record);
        *self.creations.entry(key.clone()).or_default() += 1;
        self.tokens.insert(key, id);
        self.total_creations += 1;
        self.forget_old_creations();
        Ok(Created::New(instance))
    }

    fn forget_old_creations(&mut self) {
        let keep = self
            .bounds
            .max_instances
            .saturating_mul(CREATIONS_KEPT_PER_INSTANCE);
        if self.creations.len() > keep {
            let tokens = &self.tokens;
            self.creations.retain(|key, _| tokens.contains_key(key));
        }
    }

    /// Ends the boot of a pending instance: running, or failed if its
    /// bootstrap data cannot make it join. Whether anything changed.
    pub(crate) fn boot(&mut self, id: &str) -> bool {
        match self.instances.get_mut(id) {
            Some(record) if record.instance.state == InstanceState::Pending => {
                record.instance.state = if record.join_failure.is_some() {
                    InstanceState::Failed
                } else {
                    InstanceState::Running
                };
                true
            }
            _ => false,
        }
    }

    /// Starts terminating instance `id` of `region`; `None` if there is none.
    pub(crate) fn terminate(&mut self, region: &str, id: &str) -> Option<Terminated> {
        let record = self
            .instances
            .get_mut(id)
            .filter(|record| record.region == region)?;
        if record.instance.state == InstanceState::Terminating {
            return Some(Terminated::Already(record.instance.clone()));
        }
        record.instance.state = InstanceState::Terminating;
        Some(Terminated::Started(record.instance.clone()))
    }

    /// Removes a terminating instance, freeing its request token. Whether
    /// anything changed.
    pub(crate) fn remove(&mut self, id: &str) -> bool {
        let terminating = self
            .instances
            .get(id)
            .is_some_and(|record| record.instance.state == InstanceState::Terminating);
        if !terminating {
            return false;
        }
        if let Some(record) = self.instances.remove(id) {
            self.tokens.remove(&(record.region, record.request_token));
        }
        true
    }

    /// The instances of `region`, of `pool` if given, oldest first.
    pub(crate) fn list(&self, region: &str, pool: Option<&str>) -> Result<Vec<Instance>, Refusal> {
        check_region(region)?;
        Ok(self
            .instances
            .values()
            .filter(|r| r.region == region && pool.is_none_or(|pool| r.instance.pool == pool))
            .map(|r| r.instance.clone())
            .collect())
    }

    pub(crate) fn records(&self) -> impl Iterator<Item = &InstanceRecord> {
        self.instances.values()
    }

    pub(crate) fn record(&self, id: &str) -> Option<&InstanceRecord> {
        self.instances.get(id)
    }

    pub(crate) fn creations(&self, region: &str, request_token: &str) -> u32 {
        self.creations
            .get(&(region.to_owned(), request_token.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    pub(crate) fn total_creations(&self) -> u64 {
        self.total_creations
    }
}

/// `i-` and twelve hex digits: the salt, then the sequence number.
fn instance_id(salt: u32, seq: u64) -> String {
    format!("i-{salt:06x}{:06x}", seq & 0x00ff_ffff)
}

/// A distinct address in 10.0.0.0/8 for each sequence number (from 1),
/// never ending in .0 or .255.
fn internal_ip(seq: u64) -> String {
    let n = seq.saturating_sub(1);
    let host = n % 254 + 1;
    let rest = n / 254;
    format!("10.{}.{}.{host}", (rest >> 8) & 0xff, rest & 0xff)
}

fn check_region(region: &str) -> Result<(), Refusal> {
    if is_name(region) {
        Ok(())
    } else {
        Err(Refusal::InvalidParameter {
            field: "region",
            problem: "must be 1-63 lowercase alphanumerics and '-'",
        })
    }
}

fn check_create(request: &CreateInstance) -> Result<(), Refusal> {
    let invalid = |field, problem| Err(Refusal::InvalidParameter { field, problem });
    let token = &request.request_token;
    if token.is_empty() || token.len() > MAX_TOKEN || token.chars().any(char::is_control) {
        return invalid(
            "requestToken",
            "must be 1-128 characters without control characters",
        );
    }
    let pool_ok = request.pool.len() <= MAX_POOL
        && request
            .pool
            .split_once('/')
            .is_some_and(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'));
    if !pool_ok {
        return invalid("pool", "must be <namespace>/<name>, at most 317 characters");
    }
    if request
        .failure_domain
        .as_deref()
        .is_some_and(|d| !is_name(d))
    {
        return invalid(
            "failureDomain",
            "must be 1-63 lowercase alphanumerics and '-'",
        );
    }
    if request
        .instance_type
        .as_deref()
        .is_some_and(|t| t.is_empty() || t.len() > MAX_NAME)
    {
        return invalid("instanceType", "must be 1-63 characters");
    }
    if request
        .kubernetes_version
        .as_deref()
        .is_some_and(|v| !is_version(v))
    {
        return invalid(
            "kubernetesVersion",
            "must be major.minor.patch, after an optional v, at most 63 characters",
        );
    }
    if request.node_labels.len() > MAX_LABELS {
        return invalid("nodeLabels", "may hold at most 64 labels");
    }
    if request
        .node_labels
        .iter()
        .any(|(k, v)| k.is_empty() || k.len() > MAX_LABEL_KEY || v.len() > MAX_LABEL_VALUE)
    {
        return invalid(
            "nodeLabels",
            "keys must be 1-317 characters and values at most 63",
        );
    }
    Ok(())
}

/// A Kubernetes version short enough to show on a Node.
fn is_version(version: &str) -> bool {
    version.len() <= MAX_NAME
        && semver::Version::parse(version.strip_prefix('v').unwrap_or(version)).is_ok()
}

/// A DNS label: it goes into providerIDs and paths as is.
fn is_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= MAX_NAME
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| edge(b) || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGION: &str = "local-1";

    fn inventory(max_instances: usize) -> Inventory {
        Inventory::new(
            Bounds {
                max_instances,
                max_bootstrap_bytes: 64,
            },
            0xabc,
        )
    }

    fn request(token: &str, data: &[u8]) -> CreateInstance {
        CreateInstance {
            request_token: token.into(),
            pool: "ns/pool".into(),
            bootstrap_data: base64::engine::general_purpose::STANDARD.encode(data),
            bootstrap_format: BootstrapFormat::CloudConfig,
            failure_domain: Some("zone-a".into()),
            node_labels: BTreeMap::new(),
            instance_type: None,
            kubernetes_version: None,
        }
    }

    fn create(inventory: &mut Inventory, token: &str) -> Instance {
        match inventory.create(REGION, request(token, b"#cloud-config\n")) {
            Ok(Created::New(instance)) => instance,
            other => panic!("expected a new instance, got {other:?}"),
        }
    }

    #[test]
    fn create_makes_a_pending_instance_with_provider_id_and_address() {
        let mut inventory = inventory(10);
        let instance = create(&mut inventory, "t-0");
        assert_eq!(instance.id, "i-000abc000001");
        assert_eq!(instance.provider_id, "sim://local-1/i-000abc000001");
        assert_eq!(instance.state, InstanceState::Pending);
        assert_eq!(instance.failure_domain.as_deref(), Some("zone-a"));
        assert_eq!(instance.addresses[0].address, "10.0.0.1");
        assert_eq!(inventory.creations(REGION, "t-0"), 1);
    }

    #[test]
    fn create_returns_the_existing_instance_when_its_token_is_still_listed() {
        let mut inventory = inventory(10);
        let first = create(&mut inventory, "t-0");
        inventory.terminate(REGION, &first.id);
        let again = inventory.create(REGION, request("t-0", b"#cloud-config\n"));
        let Ok(Created::Existing(again)) = again else {
            panic!("expected the existing instance, got {again:?}");
        };
        assert_eq!(again.id, first.id);
        assert_eq!(again.state, InstanceState::Terminating);
        assert_eq!(inventory.creations(REGION, "t-0"), 1);
        assert_eq!(inventory.total_creations(), 1);
    }

    #[test]
    fn create_makes_a_new_instance_when_the_token_holder_is_gone() {
        let mut inventory = inventory(10);
        let first = create(&mut inventory, "t-0");
        inventory.terminate(REGION, &first.id);
        assert!(inventory.remove(&first.id));
        let second = create(&mut inventory, "t-0");
        assert_ne!(second.id, first.id);
        assert_eq!(inventory.creations(REGION, "t-0"), 2);
    }

    #[test]
    fn create_is_scoped_to_the_region_of_the_token() {
        let mut inventory = inventory(10);
        let here = create(&mut inventory, "t-0");
        let there = inventory.create("other-1", request("t-0", b"#cloud-config\n"));
        assert!(
            matches!(there, Ok(Created::New(ref i)) if i.id != here.id),
            "{there:?}"
        );
    }

    #[test]
    fn create_is_refused_when_the_token_belongs_to_another_pool() {
        let mut inventory = inventory(10);
        create(&mut inventory, "t-0");
        let mut other = request("t-0", b"#cloud-config\n");
        other.pool = "ns/other".into();
        assert!(matches!(
            inventory.create(REGION, other),
            Err(Refusal::TokenReused { .. })
        ));
    }

    #[test]
    fn create_is_refused_when_the_instance_limit_is_reached() {
        let mut inventory = inventory(2);
        let first = create(&mut inventory, "t-0");
        create(&mut inventory, "t-1");
        assert!(matches!(
            inventory.create(REGION, request("t-2", b"#cloud-config\n")),
            Err(Refusal::InstanceLimit { max: 2 })
        ));
        // Terminating instances still count; gone ones do not.
        inventory.terminate(REGION, &first.id);
        assert!(
            inventory
                .create(REGION, request("t-2", b"#cloud-config\n"))
                .is_err()
        );
        inventory.remove(&first.id);
        create(&mut inventory, "t-2");
    }

    #[test]
    fn create_is_refused_when_bootstrap_data_is_not_base64_or_too_large() {
        let mut inventory = inventory(10);
        let mut garbled = request("t-0", b"");
        garbled.bootstrap_data = "not base64!".into();
        assert!(matches!(
            inventory.create(REGION, garbled),
            Err(Refusal::BootstrapEncoding(_))
        ));
        assert!(matches!(
            inventory.create(REGION, request("t-0", &[b'#'; 65])),
            Err(Refusal::BootstrapTooLarge { size: 65, max: 64 })
        ));
        assert_eq!(inventory.total_creations(), 0);
    }

    #[test]
    fn create_is_refused_when_a_parameter_is_malformed() {
        type Change = fn(&mut CreateInstance);
        let cases: [(&str, Change); 8] = [
            ("requestToken", |r| r.request_token.clear()),
            ("pool", |r| r.pool = "no-namespace".into()),
            ("pool", |r| r.pool = "a/b/c".into()),
            ("failureDomain", |r| {
                r.failure_domain = Some("Zone A".into());
            }),
            ("instanceType", |r| r.instance_type = Some(String::new())),
            ("kubernetesVersion", |r| {
                r.kubernetes_version = Some("v1.31.2 && reboot".into());
            }),
            ("kubernetesVersion", |r| {
                r.kubernetes_version = Some("v1.31".into());
            }),
            ("nodeLabels", |r| {
                r.node_labels.insert(String::new(), "v".into());
            }),
        ];
        for (field, change) in cases {
            let mut request = request("t-0", b"#cloud-config\n");
            change(&mut request);
            let result = inventory(10).create(REGION, request);
            assert!(
                matches!(result, Err(Refusal::InvalidParameter { field: f, .. }) if f == field),
                "{field}: {result:?}"
            );
        }
        assert!(matches!(
            inventory(10).create("Local/1", request("t-0", b"#cloud-config\n")),
            Err(Refusal::InvalidParameter {
                field: "region",
                ..
            })
        ));
    }

    #[test]
    fn a_version_is_three_numbers_after_an_optional_v_and_what_may_follow() {
        for good in ["v1.31.2", "1.31.2", "v1.31.2-rc.0", "v1.30.0+k3s1"] {
            assert!(is_version(good), "{good}");
        }
        for bad in [
            "",
            "v",
            "vv1.31.2",
            "v1.31",
            "v1.31.x",
            "v1..2",
            "v1.31.2 ",
            "v1.31.2/x",
        ] {
            assert!(!is_version(bad), "{bad:?}");
        }
    }

    #[test]
    fn boot_ends_running_or_failed_by_the_bootstrap_data() {
        let mut inventory = inventory(10);
        let good = create(&mut inventory, "t-0");
        let Ok(Created::New(bad)) = inventory.create(REGION, request("t-1", b"echo hi\n")) else {
            panic!("unusable data still creates an instance");
        };
        assert!(inventory.boot(&good.id));
        assert!(inventory.boot(&bad.id));
        assert!(!inventory.boot(&good.id), "booting twice changes nothing");
        let state = |id: &str| inventory.record(id).map(|r| r.instance.state);
        assert_eq!(state(&good.id), Some(InstanceState::Running));
        assert_eq!(state(&bad.id), Some(InstanceState::Failed));
        assert_eq!(
            inventory.record(&bad.id).and_then(|r| r.join_failure),
            Some(JoinFailure::NotCloudConfig)
        );
    }

    #[test]
    fn boot_leaves_an_instance_terminated_while_pending_terminating() {
        let mut inventory = inventory(10);
        let instance = create(&mut inventory, "t-0");
        assert!(matches!(
            inventory.terminate(REGION, &instance.id),
            Some(Terminated::Started(_))
        ));
        assert!(!inventory.boot(&instance.id));
        assert!(matches!(
            inventory.terminate(REGION, &instance.id),
            Some(Terminated::Already(_))
        ));
    }

    #[test]
    fn terminate_finds_nothing_when_the_id_or_region_is_unknown() {
        let mut inventory = inventory(10);
        let instance = create(&mut inventory, "t-0");
        assert_eq!(inventory.terminate(REGION, "i-missing"), None);
        assert_eq!(inventory.terminate("other-1", &instance.id), None);
    }

    #[test]
    fn remove_keeps_an_instance_that_is_not_terminating() {
        let mut inventory = inventory(10);
        let instance = create(&mut inventory, "t-0");
        assert!(!inventory.remove(&instance.id));
        assert!(inventory.record(&instance.id).is_some());
    }

    #[test]
    fn list_filters_by_region_and_pool_oldest_first() {
        let mut inventory = inventory(10);
        let a = create(&mut inventory, "t-0");
        let mut other = request("t-1", b"#cloud-config\n");
        other.pool = "ns/other".into();
        inventory.create(REGION, other).expect("created");
        let b = create(&mut inventory, "t-2");
        inventory
            .create("other-1", request("t-3", b"#cloud-config\n"))
            .expect("created");
        let ids = |list: Vec<Instance>| list.into_iter().map(|i| i.id).collect::<Vec<_>>();
        assert_eq!(
            ids(inventory.list(REGION, Some("ns/pool")).expect("valid")),
            [a.id, b.id]
        );
        assert_eq!(inventory.list(REGION, None).expect("valid").len(), 3);
    }

    #[test]
    fn internal_ip_never_repeats_or_ends_in_0_or_255() {
        let addresses: std::collections::HashSet<String> = (1..=70_000).map(internal_ip).collect();
        assert_eq!(addresses.len(), 70_000);
        assert!(
            addresses
                .iter()
                .all(|a| !a.ends_with(".0") && !a.ends_with(".255"))
        );
        assert_eq!(internal_ip(255), "10.0.1.1");
    }

    #[test]
    fn creation_counts_of_gone_tokens_are_forgotten_beyond_the_bound() {
        let mut inventory = inventory(1);
        for n in 0..=CREATIONS_KEPT_PER_INSTANCE {
            let instance = create(&mut inventory, &format!("t-{n}"));
            inventory.terminate(REGION, &instance.id);
            inventory.remove(&instance.id);
        }
        assert!(inventory.creations.len() <= CREATIONS_KEPT_PER_INSTANCE);
        assert_eq!(
            inventory.total_creations(),
            CREATIONS_KEPT_PER_INSTANCE as u64 + 1
        );
    }
}
