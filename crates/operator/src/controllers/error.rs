//! Errors of the controllers: each variant names the step that failed and
//! holds its typed cause; each maps to a condition reason, a bounded metric
//! label and a retry policy. A failure only one controller has is that
//! controller's own type ([`KindError`]): the frame knows it by what it
//! shows as, not by its variants.

use std::any::Any;
use std::fmt;
use std::time::Duration;

use crate::api::Reason;
use crate::wasm::CallError;
use crate::wasm::types::ProviderError;

use super::external::ReferenceError;

/// How to come back after a failed reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Exponential backoff per object.
    Backoff,
    /// After this long (a provider asked for it).
    After(Duration),
    /// Not before something changes (a watch event, or the periodic resync).
    OnChange,
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading an object failed.
    #[error("cannot read {kind} {name:?}")]
    Get {
        /// Its kind.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// Writing an object (or its status) failed.
    #[error("cannot write {what} of {name:?}")]
    Write {
        /// What was written: `status`, `metadata`, `Secret`, ...
        what: &'static str,
        /// The object's name.
        name: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The Cluster an object belongs to does not exist.
    #[error("Cluster {0:?} does not exist")]
    ClusterNotFound(String),
    /// A referenced object could not be resolved or updated.
    #[error("reference to {reference} cannot be used")]
    Reference {
        /// The reference.
        reference: String,
        /// Why.
        #[source]
        source: ReferenceError,
    },
    /// The infrastructure object went away after it had been provisioned.
    #[error("{0} was deleted after it had been provisioned")]
    InfrastructureDeleted(String),
    /// The workload cluster cannot be used.
    #[error("workload cluster {0} cannot be used")]
    Workload(String, #[source] crate::workload::Error),
    /// A call into a provider failed.
    #[error("provider call failed")]
    Guest(#[source] CallError),
    /// A failure of one controller's own.
    #[error(transparent)]
    Kind(KindFailure),
}

/// A failure only one controller has: what it shows as, for the frame.
pub trait KindError: std::error::Error + Any + Send + Sync {
    /// The condition and Event reason it shows as.
    fn reason(&self) -> Reason;
    /// A label from a closed set, for the failure counter.
    fn metric_label(&self) -> &'static str;
}

/// A [`KindError`], as [`Error::Kind`] holds it.
pub struct KindFailure(Box<dyn KindError>);

impl KindFailure {
    /// The failure as its own type, if it is a `T`.
    pub fn downcast_ref<T: KindError>(&self) -> Option<&T> {
        let any: &dyn Any = &*self.0;
        any.downcast_ref()
    }
}

impl fmt::Debug for KindFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for KindFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for KindFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl<E: KindError> From<E> for Error {
    fn from(error: E) -> Self {
        Self::Kind(KindFailure(Box::new(error)))
    }
}

impl Error {
    /// Whether a write failed because its object is gone: nothing is left
    /// to write to, so the write has nothing more to do either.
    pub fn is_gone(&self) -> bool {
        matches!(self, Self::Write { source: kube::Error::Api(status), .. } if status.code == 404)
    }

    /// Whether a provider call did not start because its provider was
    /// busy: load, not a fault of the object, so nothing is written for it.
    pub fn is_busy(&self) -> bool {
        matches!(self, Self::Guest(CallError::Busy { .. }))
    }

    /// The condition and Event reason this error shows as.
    pub fn reason(&self) -> Reason {
        match self {
            Self::Get { .. } | Self::Write { .. } => Reason::ApiError,
            Self::ClusterNotFound(_) => Reason::ClusterNotFound,
            Self::Reference { source, .. } => source.reason(),
            Self::InfrastructureDeleted(_) => Reason::InfrastructureDeleted,
            Self::Guest(e) => guest_reason(e),
            Self::Workload(_, e) => e.reason(),
            Self::Kind(KindFailure(e)) => e.reason(),
        }
    }

    /// A label from a closed set, for the failure counter.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Get { .. } => "get",
            Self::Write { .. } => "write",
            Self::ClusterNotFound(_) => "cluster_not_found",
            Self::Reference { .. } => "reference",
            Self::InfrastructureDeleted(_) => "infrastructure_deleted",
            Self::Guest(e) => e.outcome(),
            Self::Workload(_, e) => e.metric_label(),
            Self::Kind(KindFailure(e)) => e.metric_label(),
        }
    }

    /// How to come back.
    pub fn retry(&self) -> Retry {
        match self {
            Self::Guest(CallError::Provider { error, .. }) => match error {
                ProviderError::RetryAfter(r) => {
                    Retry::After(Duration::from_secs(u64::from(r.seconds.max(1))))
                }
                // Calling again gives the same answer until the object or its config changes.
                ProviderError::Terminal(_) | ProviderError::InvalidConfig(_) => Retry::OnChange,
            },
            Self::Guest(CallError::Throttled { remaining, .. }) => {
                Retry::After((*remaining).max(Duration::from_secs(1)))
            }
            // Soon, but not all at once: its provider's turns were all taken.
            Self::Guest(CallError::Busy { .. }) => {
                Retry::After(BUSY_RETRY.mul_f64(0.5 + fastrand::f64()))
            }
            // The ProviderModule watch brings the object back when a version is loaded.
            Self::Guest(CallError::NotLoaded(_) | CallError::WrongWorld { .. }) => Retry::OnChange,
            _ => Retry::Backoff,
        }
    }
}

/// Around when an object whose provider was busy is reconciled again.
const BUSY_RETRY: Duration = Duration::from_secs(1);

/// The reason a failed guest call shows as.
pub fn guest_reason(error: &CallError) -> Reason {
    match error {
        CallError::NotLoaded(_) | CallError::WrongWorld { .. } => Reason::ProviderNotReady,
        CallError::Trapped { .. } => Reason::GuestTrapped,
        CallError::DeadlineExceeded { .. } => Reason::GuestTimedOut,
        CallError::Throttled { .. } => Reason::ProviderThrottled,
        CallError::Busy { .. } => Reason::ProviderBusy,
        CallError::MemoryLimit { .. } => Reason::GuestMemoryLimit,
        CallError::OutputTooLarge { .. } => Reason::GuestOutputTooLarge,
        CallError::InvalidResult { .. } => Reason::InvalidProviderResult,
        CallError::Instantiate { .. } | CallError::Abandoned { .. } => Reason::GuestUnavailable,
        CallError::CredentialsRejected { .. } => Reason::CredentialsRejected,
        CallError::Provider { error, .. } => match error {
            ProviderError::RetryAfter(_) => Reason::ProviderRetrying,
            ProviderError::Terminal(_) => Reason::ProviderFailed,
            ProviderError::InvalidConfig(_) => Reason::InvalidConfig,
        },
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::Error;

    fn write_answered(code: u16) -> Error {
        Error::Write {
            what: "status",
            name: "p".into(),
            source: kube::Error::Api(Status::failure("no", "NotFound").with_code(code).boxed()),
        }
    }

    #[test]
    fn only_a_write_answered_404_finds_its_object_gone() {
        assert!(write_answered(404).is_gone());
        assert!(!write_answered(409).is_gone());
        assert!(!Error::ClusterNotFound("c".into()).is_gone());
    }
}
