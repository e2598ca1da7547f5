//! How a new version of a provider takes over from the one in service.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a new version takes over: at once, or as a canary serving a share
/// of objects first (chosen by a hash of each object's UID), promoted after
/// enough calls that did not break, rolled back when too many broke.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// `Immediate` (the default) or `Canary`.
    #[serde(default)]
    pub strategy: RolloutStrategy,
    /// Share of objects a canary serves, percent. Default 25.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 99))]
    pub canary_percent: Option<u32>,
    /// Calls of the canary that did not break (trap, run out of time or
    /// memory, or return what the contract refuses), after which it serves
    /// every object. Default 20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000))]
    pub promote_after_calls: Option<u32>,
    /// Share of the canary's calls that may break, percent; past it the
    /// canary is rolled back. Default 20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub max_failure_percent: Option<u32>,
}

/// How a new version takes over.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum RolloutStrategy {
    /// It serves every object at once.
    #[default]
    Immediate,
    /// It serves a share of objects first.
    Canary,
}
