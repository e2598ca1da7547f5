//! The throttle of one tenant's calls of a provider: deadlines in a row
//! start it, each new one while it goes on doubles it, an answer or a new
//! version ends it.

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::CallError;
use crate::bounds::{FIRST_THROTTLE, MAX_THROTTLE, THROTTLE_AFTER};

/// How a call ended, for the throttle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The guest answered (a value or its own typed error).
    Answered,
    /// It ran into its deadline.
    Deadline,
    /// Anything else (a trap, a limit): neither.
    Other,
}

/// How a call's result ends it, for the throttle.
pub(crate) fn ended<R>(result: &Result<R, CallError>) -> Ended {
    match result {
        Ok(_) | Err(CallError::Provider { .. } | CallError::CredentialsRejected { .. }) => {
            Ended::Answered
        }
        Err(CallError::DeadlineExceeded { .. }) => Ended::Deadline,
        Err(_) => Ended::Other,
    }
}

/// A tenant's throttle, for the version of the provider it counts for.
#[derive(Default)]
pub(super) struct Throttle {
    pub(super) digest: String,
    pub(super) deadlines: u32,
    pub(super) until: Option<Instant>,
    /// `until` by the wall clock, fixed when the throttle began.
    pub(super) ends: Option<SystemTime>,
    pub(super) period: Duration,
}

impl Throttle {
    /// How long it still holds as of `now`, if it does, and when it ends
    /// by the wall clock.
    pub(super) fn remaining(&self, now: Instant) -> Option<(Duration, SystemTime)> {
        let until = self.until.filter(|until| *until > now)?;
        let remaining = until - now;
        let ends = self.ends.unwrap_or_else(|| SystemTime::now() + remaining);
        Some((remaining, ends))
    }

    /// Nothing to remember: no deadline counted, no period to double.
    pub(super) fn idle(&self) -> bool {
        self.deadlines == 0 && self.period.is_zero() && self.until.is_none()
    }

    /// A new version starts afresh.
    pub(super) fn follow(&mut self, digest: &str) {
        if self.digest != digest {
            *self = Self {
                digest: digest.to_owned(),
                ..Self::default()
            };
        }
    }

    pub(super) fn record(&mut self, digest: &str, ended: Ended, now: Instant) -> bool {
        self.follow(digest);
        match ended {
            Ended::Answered => {
                self.deadlines = 0;
                self.period = Duration::ZERO;
                self.until = None;
                self.ends = None;
                false
            }
            Ended::Other => false,
            Ended::Deadline => {
                self.deadlines = self.deadlines.saturating_add(1);
                let throttled = self.until.is_some_and(|until| until > now);
                if self.deadlines < THROTTLE_AFTER || throttled {
                    return false;
                }
                self.period = if self.period.is_zero() {
                    FIRST_THROTTLE
                } else {
                    (self.period * 2).min(MAX_THROTTLE)
                };
                self.until = Some(now + self.period);
                self.ends = Some(SystemTime::now() + self.period);
                true
            }
        }
    }
}
