//! Condition types and reasons: a closed set, so every condition and Event
//! capwasm writes uses upstream's CamelCase names and no string literal for
//! them appears anywhere else.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The condition types capwasm writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionType {
    /// Summary of a provider object or ProviderModule.
    Ready,
    /// Summary of a Cluster or MachinePool (v1beta2).
    Available,
    /// The object or its Cluster is paused.
    Paused,
    /// The MachinePool's bootstrap config has produced its data Secret.
    BootstrapConfigReady,
    /// The infrastructure object is provisioned.
    InfrastructureReady,
    /// Every replica of a MachinePool has a Ready Node.
    ReplicasReady,
    /// The Cluster's control plane answers (its kubeconfig Secret works).
    ControlPlaneInitialized,
    /// The object is being deleted; the reason says what it waits for.
    Deleting,
    /// Every MachinePool of the Cluster is Available.
    WorkersAvailable,
    /// A MachinePool of the Cluster has fewer replicas than it wants.
    ScalingUp,
    /// A MachinePool of the Cluster has more replicas than it wants.
    ScalingDown,
    /// A ProviderModule's credentials Secret holds every key its `requestAuth` reads.
    CredentialsReady,
    /// A ProviderModule's registry answered for its image (OCI sources only).
    SourceAvailable,
    /// A ProviderModule's calls are refused for a while: they kept running
    /// into their deadline.
    Throttled,
}

impl ConditionType {
    /// The upstream name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "Ready",
            Self::Available => "Available",
            Self::Paused => "Paused",
            Self::BootstrapConfigReady => "BootstrapConfigReady",
            Self::InfrastructureReady => "InfrastructureReady",
            Self::ReplicasReady => "ReplicasReady",
            Self::ControlPlaneInitialized => "ControlPlaneInitialized",
            Self::Deleting => "Deleting",
            Self::WorkersAvailable => "WorkersAvailable",
            Self::ScalingUp => "ScalingUp",
            Self::ScalingDown => "ScalingDown",
            Self::CredentialsReady => "CredentialsReady",
            Self::SourceAvailable => "SourceAvailable",
            Self::Throttled => "Throttled",
        }
    }
}

/// A condition's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// It does not.
    False,
    /// Not known yet.
    Unknown,
}

impl ConditionStatus {
    /// `True` for `true`, `False` for `false`.
    pub fn from_bool(holds: bool) -> Self {
        if holds { Self::True } else { Self::False }
    }

    /// The API string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

macro_rules! reasons {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// Reasons of conditions and Events, upstream's where upstream has one.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Reason {
            $($(#[doc = $doc])* $name,)*
        }

        impl Reason {
            /// The CamelCase name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$name => stringify!($name),)*
                }
            }

            /// The reason named `name`, if it is one of ours.
            pub fn parse(name: &str) -> Option<Self> {
                match name {
                    $(stringify!($name) => Some(Self::$name),)*
                    _ => None,
                }
            }
        }
    };
}

reasons! {
    /// The condition holds.
    Ready,
    /// The condition does not hold and nothing more specific is known.
    NotReady,
    /// Paused by `spec.paused` on the Cluster or the paused annotation.
    Paused,
    /// Not paused.
    NotPaused,
    /// Not being deleted.
    NotDeleting,
    /// Every MachinePool is Available.
    Available,
    /// A MachinePool is not Available.
    NotAvailable,
    /// The Cluster has no MachinePools.
    NoWorkers,
    /// A MachinePool is creating replicas.
    ScalingUp,
    /// No MachinePool is creating replicas.
    NotScalingUp,
    /// A MachinePool is removing replicas.
    ScalingDown,
    /// No MachinePool is removing replicas.
    NotScalingDown,
    /// A kubeconfig generated from the Cluster's CA was made anew before its certificate expired.
    KubeconfigRotated,
    /// The Cluster named by `spec.clusterName` does not exist.
    ClusterNotFound,
    /// A provider object has no Cluster API owner yet.
    WaitingForOwner,
    /// The owner an owner reference names does not exist.
    OwnerNotFound,
    /// A referenced object does not exist.
    ReferenceNotFound,
    /// A reference names a kind with no CRD, or a CRD without a contract label.
    ReferenceInvalid,
    /// A referenced object is controlled by another object.
    ReferenceOwnedByOther,
    /// The bootstrap config has not produced its data Secret yet.
    WaitingForDataSecret,
    /// The bootstrap data Secret exists.
    DataSecretAvailable,
    /// The user set `dataSecretName`; no bootstrap config is used.
    DataSecretProvided,
    /// The infrastructure object is not provisioned yet.
    WaitingForInfrastructure,
    /// The control plane is not initialized yet.
    WaitingForControlPlane,
    /// The infrastructure object reported a terminal failure.
    InfrastructureFailed,
    /// The infrastructure object went away after it had been provisioned.
    InfrastructureDeleted,
    /// Fewer Nodes are Ready than the pool has replicas.
    WaitingForReplicasReady,
    /// The `<cluster>-kubeconfig` Secret does not exist.
    KubeconfigSecretNotFound,
    /// The `<cluster>-kubeconfig` Secret does not hold a usable kubeconfig.
    KubeconfigInvalid,
    /// The workload cluster's API server does not answer.
    WorkloadClusterUnreachable,
    /// The Cluster has no control-plane endpoint yet.
    WaitingForControlPlaneEndpoint,
    /// The pool has no bootstrap data yet.
    WaitingForBootstrapData,
    /// The pool's instances are being created or are booting.
    WaitingForInstances,
    /// The ProviderModule named by `spec.provider` does not exist.
    ProviderNotFound,
    /// The ProviderModule exists but has no loaded version.
    ProviderNotReady,
    /// The ProviderModule implements another world than this kind needs.
    ProviderWorldMismatch,
    /// `spec.config` does not satisfy the provider's schema.
    InvalidConfig,
    /// Checking `spec.config` against the provider's schema took longer than its budget.
    ConfigCheckTimedOut,
    /// The ProviderModule's credentials Secret cannot be read.
    CredentialsNotFound,
    /// The ProviderModule names a credentials Secret outside the namespace the operator reads them from.
    CredentialsNotAllowed,
    /// A host turned down the credentials the host authenticated the provider's request with.
    CredentialsRejected,
    /// A `requestAuth` rule reads a key the credentials Secret lacks.
    CredentialsKeyMissing,
    /// The provider asked to be called again later.
    ProviderRetrying,
    /// The provider reported a terminal failure.
    ProviderFailed,
    /// The provider's code trapped.
    GuestTrapped,
    /// The provider's code ran past its deadline.
    GuestTimedOut,
    /// The provider's calls kept running into their deadline: they are refused for a while.
    ProviderThrottled,
    /// The provider's calls are not throttled.
    NotThrottled,
    /// The provider's code exceeded its memory limit.
    GuestMemoryLimit,
    /// The provider returned more than its output limit.
    GuestOutputTooLarge,
    /// The provider returned a result that breaks the contract (a malformed
    /// or repeated providerID, too many instances, ...); nothing of it was used.
    InvalidProviderResult,
    /// The provider could not be instantiated.
    GuestUnavailable,
    /// A ProviderModule's code is being fetched, verified and compiled.
    Loading,
    /// A ProviderModule's code is in service.
    Loaded,
    /// A ProviderModule's code could not be fetched.
    FetchFailed,
    /// A ProviderModule's code does not have its pinned digest.
    DigestMismatch,
    /// A ProviderModule's code is not a usable component.
    ModuleInvalid,
    /// A newer version replaced the one in service.
    Swapped,
    /// A ProviderModule's image reference, or the image it names, is not usable.
    ImageInvalid,
    /// A ProviderModule's registry does not answer.
    RegistryUnreachable,
    /// A ProviderModule's image has no cosign signature.
    SignatureNotFound,
    /// A ProviderModule's image is signed, but by none of its verification keys.
    SignatureUntrusted,
    /// A ProviderModule's image carries a valid signature of another digest.
    SignatureDigestMismatch,
    /// A ProviderModule's verification key is not usable.
    VerificationKeyInvalid,
    /// A new version serves a share of objects as a canary.
    CanaryStarted,
    /// A canary serves every object now.
    Promoted,
    /// A canary broke too often and was taken out of service.
    RolledBack,
    /// Deletion waits for the MachinePools of the Cluster.
    WaitingForWorkersDeletion,
    /// Deletion waits for the bootstrap config and infrastructure objects.
    WaitingForInfrastructureDeletion,
    /// Deletion waits for the provider to remove what it provisioned.
    WaitingForProviderDeletion,
    /// Deletion waits for the pool's Nodes to be removed.
    WaitingForNodeDeletion,
    /// Deletion is complete.
    DeletionCompleted,
    /// Node references were set.
    SuccessfulSetNodeRefs,
    /// Node references could not be set.
    FailedSetNodeRef,
    /// Nodes that left the pool were deleted from the workload cluster.
    NodesDeleted,
    /// Bootstrap data was generated into its Secret.
    DataSecretCreated,
    /// The phase changed.
    PhaseChanged,
    /// A write to the API server failed.
    ApiError,
}

impl Reason {
    /// Whether an Event of this reason is a Warning: something a person may
    /// have to act on, rather than progress.
    pub fn is_warning(self) -> bool {
        matches!(
            self,
            Self::ClusterNotFound
                | Self::OwnerNotFound
                | Self::ReferenceNotFound
                | Self::ReferenceInvalid
                | Self::ReferenceOwnedByOther
                | Self::InfrastructureFailed
                | Self::InfrastructureDeleted
                | Self::KubeconfigSecretNotFound
                | Self::KubeconfigInvalid
                | Self::WorkloadClusterUnreachable
                | Self::ProviderNotFound
                | Self::ProviderNotReady
                | Self::ProviderWorldMismatch
                | Self::InvalidConfig
                | Self::ConfigCheckTimedOut
                | Self::CredentialsNotFound
                | Self::CredentialsRejected
                | Self::CredentialsKeyMissing
                | Self::CredentialsNotAllowed
                | Self::ProviderFailed
                | Self::GuestTrapped
                | Self::GuestTimedOut
                | Self::ProviderThrottled
                | Self::GuestMemoryLimit
                | Self::GuestOutputTooLarge
                | Self::InvalidProviderResult
                | Self::GuestUnavailable
                | Self::FetchFailed
                | Self::DigestMismatch
                | Self::ModuleInvalid
                | Self::ImageInvalid
                | Self::RegistryUnreachable
                | Self::SignatureNotFound
                | Self::SignatureUntrusted
                | Self::SignatureDigestMismatch
                | Self::VerificationKeyInvalid
                | Self::RolledBack
                | Self::FailedSetNodeRef
                | Self::ApiError
        )
    }
}

/// What a controller wants a condition to say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    /// Which condition.
    pub type_: ConditionType,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// Why, in one CamelCase word.
    pub reason: Reason,
    /// For people: what is going on and what to do.
    pub message: String,
}

impl Desired {
    /// A condition that holds.
    pub fn holds(type_: ConditionType, reason: Reason, message: impl Into<String>) -> Self {
        Self {
            type_,
            status: ConditionStatus::True,
            reason,
            message: message.into(),
        }
    }

    /// A condition that does not hold.
    pub fn fails(type_: ConditionType, reason: Reason, message: impl Into<String>) -> Self {
        Self {
            type_,
            status: ConditionStatus::False,
            reason,
            message: message.into(),
        }
    }
}

/// The API caps a condition message at 32 KiB; keep well below, on a char boundary.
const MAX_MESSAGE_BYTES: usize = 4096;

/// Sets `desired` in `conditions`: `lastTransitionTime` is `now` only when the
/// status changes, and `observedGeneration` is the object's generation.
pub fn set(conditions: &mut Vec<Condition>, desired: Desired, generation: Option<i64>, now: &Time) {
    let Desired {
        type_,
        status,
        reason,
        message,
    } = desired;
    let message = crate::report::truncate(message, MAX_MESSAGE_BYTES);
    let condition = Condition {
        type_: type_.as_str().to_owned(),
        status: status.as_str().to_owned(),
        reason: reason.as_str().to_owned(),
        message,
        observed_generation: generation,
        last_transition_time: now.clone(),
    };
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) if existing.status == condition.status => {
            let since = existing.last_transition_time.clone();
            *existing = Condition {
                last_transition_time: since,
                ..condition
            };
        }
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

/// Moves the conditions computed for generation `from` to `to` (the
/// generation a write of the object's spec during their reconcile made).
pub fn advance(conditions: &mut [Condition], from: Option<i64>, to: i64) {
    for condition in conditions
        .iter_mut()
        .filter(|c| c.observed_generation == from)
    {
        condition.observed_generation = Some(to);
    }
}

/// Removes a condition.
pub fn remove(conditions: &mut Vec<Condition>, type_: ConditionType) {
    conditions.retain(|c| c.type_ != type_.as_str());
}

/// The condition of `type_`, if set.
pub fn get(conditions: &[Condition], type_: ConditionType) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == type_.as_str())
}

/// Whether the condition of `type_` is set and `True`.
pub fn is_true(conditions: &[Condition], type_: ConditionType) -> bool {
    get(conditions, type_).is_some_and(|c| c.status == ConditionStatus::True.as_str())
}

/// Writes the v1beta1 form of the v1beta2 conditions in `pairs` (v1beta1
/// type, v1beta2 type) into `v1beta1`, as upstream keeps both while v1beta1
/// is served: status, reason, message and transition time the same, a
/// severity on False (Warning for what a person may have to act on, Info
/// for waiting). Other v1beta1 conditions (a client's) are left as they are.
pub fn mirror_v1beta1(
    v1beta2: &[Condition],
    pairs: &[(&str, ConditionType)],
    v1beta1: &mut Vec<super::cluster::V1Beta1Condition>,
) {
    for (name, type_) in pairs {
        let Some(condition) = get(v1beta2, *type_) else {
            continue;
        };
        let severity = (condition.status == ConditionStatus::False.as_str()).then(|| {
            let warning = Reason::parse(&condition.reason).is_some_and(Reason::is_warning);
            if warning { "Warning" } else { "Info" }.to_owned()
        });
        let mirrored = super::cluster::V1Beta1Condition {
            type_: (*name).to_owned(),
            status: condition.status.clone(),
            severity,
            last_transition_time: condition.last_transition_time.clone(),
            reason: Some(condition.reason.clone()).filter(|r| !r.is_empty()),
            message: Some(condition.message.clone()).filter(|m| !m.is_empty()),
        };
        match v1beta1.iter_mut().find(|c| c.type_ == *name) {
            Some(existing) => *existing = mirrored,
            None => v1beta1.push(mirrored),
        }
    }
}

#[cfg(test)]
mod mirror_tests {
    use super::*;

    #[test]
    fn v1beta1_conditions_mirror_ours_and_keep_a_clients() {
        let now = Time(k8s_openapi::jiff::Timestamp::from_second(1_000).unwrap());
        let mut v1beta2 = Vec::new();
        set(
            &mut v1beta2,
            Desired::holds(ConditionType::Available, Reason::Ready, ""),
            None,
            &now,
        );
        set(
            &mut v1beta2,
            Desired::fails(
                ConditionType::InfrastructureReady,
                Reason::InvalidConfig,
                "$.region",
            ),
            None,
            &now,
        );
        set(
            &mut v1beta2,
            Desired::fails(
                ConditionType::ReplicasReady,
                Reason::WaitingForReplicasReady,
                "1 of 2",
            ),
            None,
            &now,
        );
        let client = super::super::cluster::V1Beta1Condition {
            type_: "example.com/Mine".into(),
            status: "True".into(),
            severity: None,
            last_transition_time: now.clone(),
            reason: None,
            message: None,
        };
        let mut v1beta1 = vec![client.clone()];
        let pairs = [
            ("Ready", ConditionType::Available),
            ("InfrastructureReady", ConditionType::InfrastructureReady),
            ("ReplicasReady", ConditionType::ReplicasReady),
            ("BootstrapReady", ConditionType::BootstrapConfigReady),
        ];
        mirror_v1beta1(&v1beta2, &pairs, &mut v1beta1);
        mirror_v1beta1(&v1beta2, &pairs, &mut v1beta1);
        let by_type = |t: &str| v1beta1.iter().find(|c| c.type_ == t).cloned().unwrap();
        assert_eq!(
            v1beta1.len(),
            4,
            "no duplicates, no BootstrapReady without its source"
        );
        assert_eq!(by_type("example.com/Mine"), client);
        let ready = by_type("Ready");
        assert_eq!((ready.status.as_str(), ready.severity), ("True", None));
        assert_eq!(ready.reason.as_deref(), Some("Ready"));
        assert!(ready.message.is_none());
        let infrastructure = by_type("InfrastructureReady");
        assert_eq!(infrastructure.severity.as_deref(), Some("Warning"));
        assert_eq!(infrastructure.message.as_deref(), Some("$.region"));
        assert_eq!(by_type("ReplicasReady").severity.as_deref(), Some("Info"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap())
    }

    #[test]
    fn set_keeps_transition_time_when_status_is_unchanged() {
        let mut conditions = Vec::new();
        let waiting = || Desired::fails(ConditionType::Ready, Reason::WaitingForOwner, "a");
        set(&mut conditions, waiting(), Some(1), &at(10));
        let mut later = waiting();
        later.reason = Reason::ProviderNotReady;
        later.message = "b".into();
        set(&mut conditions, later, Some(2), &at(20));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, at(10));
        assert_eq!(conditions[0].reason, "ProviderNotReady");
        assert_eq!(conditions[0].message, "b");
        assert_eq!(conditions[0].observed_generation, Some(2));
    }

    #[test]
    fn set_moves_transition_time_when_status_changes() {
        let mut conditions = Vec::new();
        set(
            &mut conditions,
            Desired::fails(ConditionType::Ready, Reason::NotReady, ""),
            None,
            &at(10),
        );
        set(
            &mut conditions,
            Desired::holds(ConditionType::Ready, Reason::Ready, ""),
            None,
            &at(20),
        );
        assert_eq!(conditions[0].last_transition_time, at(20));
        assert!(is_true(&conditions, ConditionType::Ready));
    }

    #[test]
    fn set_truncates_long_messages_on_a_char_boundary() {
        let mut conditions = Vec::new();
        let message = "é".repeat(MAX_MESSAGE_BYTES);
        set(
            &mut conditions,
            Desired::fails(ConditionType::Ready, Reason::NotReady, message),
            None,
            &at(1),
        );
        assert!(conditions[0].message.len() <= MAX_MESSAGE_BYTES);
        assert!(conditions[0].message.starts_with('é'));
    }

    #[test]
    fn reason_names_are_their_identifiers() {
        assert_eq!(
            Reason::WaitingForDataSecret.as_str(),
            "WaitingForDataSecret"
        );
        assert_eq!(
            ConditionType::BootstrapConfigReady.as_str(),
            "BootstrapConfigReady"
        );
    }
}
