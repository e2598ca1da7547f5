//! Condition types and reasons: a closed set, so every condition and Event
//! capwasm writes uses upstream's CamelCase names and no string literal for
//! them appears anywhere else.

mod reason;
mod v1beta1;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub use reason::Reason;
pub use v1beta1::mirror_v1beta1;

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
    /// A PlatformCluster's template exists, may be used, and its change
    /// (if any) was allowed by the template's provider.
    TemplateAccepted,
    /// A PlatformCluster's objects are applied as its provider rendered them.
    Composed,
    /// A Machine's Node is Ready.
    NodeReady,
    /// A Machine's Node is Ready and under no pressure.
    NodeHealthy,
    /// A pool replaces instances made before its version, bootstrap or
    /// infrastructure config changed.
    RollingOut,
    /// A Machine's instance was made from the pool's current version,
    /// bootstrap and infrastructure config.
    UpToDate,
    /// A pool reports what its nodes offer (`status.capacity`), so the
    /// cluster-autoscaler can scale it up from zero.
    CapacityKnown,
}

impl ConditionType {
    /// Every type capwasm writes.
    pub const ALL: &[Self] = &[
        Self::Ready,
        Self::Available,
        Self::Paused,
        Self::BootstrapConfigReady,
        Self::InfrastructureReady,
        Self::ReplicasReady,
        Self::ControlPlaneInitialized,
        Self::Deleting,
        Self::WorkersAvailable,
        Self::ScalingUp,
        Self::ScalingDown,
        Self::CredentialsReady,
        Self::SourceAvailable,
        Self::Throttled,
        Self::TemplateAccepted,
        Self::Composed,
        Self::NodeReady,
        Self::NodeHealthy,
        Self::RollingOut,
        Self::UpToDate,
        Self::CapacityKnown,
    ];

    /// The type named `name`, if capwasm writes it.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|t| t.as_str() == name)
    }

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
            Self::TemplateAccepted => "TemplateAccepted",
            Self::Composed => "Composed",
            Self::NodeReady => "NodeReady",
            Self::NodeHealthy => "NodeHealthy",
            Self::RollingOut => "RollingOut",
            Self::UpToDate => "UpToDate",
            Self::CapacityKnown => "CapacityKnown",
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
    let message = capwasm_runtime::report::truncate(message, MAX_MESSAGE_BYTES);
    put(
        conditions,
        Condition {
            type_: type_.as_str().to_owned(),
            status: status.as_str().to_owned(),
            reason: reason.as_str().to_owned(),
            message,
            observed_generation: generation,
            last_transition_time: now.clone(),
        },
    );
}

/// Sets `condition` in `conditions`, keeping the `lastTransitionTime` of
/// one of its type whose status it does not change.
pub fn put(conditions: &mut Vec<Condition>, condition: Condition) {
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
