//! What a phase can end in besides an error, and how outcomes become a
//! kube-runtime `Action` — in one place.

use std::time::Duration;

use kube::runtime::controller::Action;

use crate::api::Reason;

use super::error::Retry;

/// How long an object that waits for nothing in particular is left alone
/// (the watches bring it back sooner; this catches a missed event).
pub const RESYNC: Duration = Duration::from_secs(60 * 60);

/// An expected state an object waits in: not an error, but a condition
/// saying what it waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wait {
    /// Why, as a condition reason.
    pub reason: Reason,
    /// What it waits for, for people.
    pub message: String,
    /// When to look again if no watch event comes first.
    pub retry: Retry,
}

impl Wait {
    /// Waiting for a change a watch reports.
    pub fn on_change(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            retry: Retry::OnChange,
        }
    }

    /// Waiting for something no watch reports: look again after `after`.
    pub fn after(reason: Reason, message: impl Into<String>, after: Duration) -> Self {
        Self {
            reason,
            message: message.into(),
            retry: Retry::After(after),
        }
    }
}

/// How one phase ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done; later phases may go on.
    Continue,
    /// Waiting; later phases that depend on this one wait too.
    Wait(Wait),
    /// Done for now, but look again after this long.
    RequeueAfter(Duration),
}

/// The action for a reconcile that ended without error in `outcomes`: the
/// soonest requeue any of them asked for, else the periodic resync.
pub fn action(outcomes: &[Outcome]) -> Action {
    let soonest = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Continue => None,
            Outcome::Wait(w) => match w.retry {
                Retry::After(d) => Some(d),
                Retry::OnChange | Retry::Backoff => None,
            },
            Outcome::RequeueAfter(d) => Some(*d),
        })
        .min();
    Action::requeue(soonest.unwrap_or(RESYNC))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_takes_the_soonest_requeue_and_otherwise_resyncs() {
        let outcomes = [
            Outcome::Continue,
            Outcome::RequeueAfter(Duration::from_secs(30)),
            Outcome::Wait(Wait::after(Reason::NotReady, "", Duration::from_secs(5))),
            Outcome::Wait(Wait::on_change(Reason::NotReady, "")),
        ];
        assert_eq!(action(&outcomes), Action::requeue(Duration::from_secs(5)));
        assert_eq!(action(&[Outcome::Continue]), Action::requeue(RESYNC));
    }
}
