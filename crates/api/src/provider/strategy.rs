//! How a WasmMachinePool replaces instances that are not up to date.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a pool replaces instances that are not up to date.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolStrategy {
    /// `RollingUpdate`, the only one.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<StrategyType>,
    /// Its bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdate>,
}

/// A rollout strategy.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum StrategyType {
    /// New instances first (up to `maxSurge` more than the replicas), then
    /// old ones drained and removed (down to `maxUnavailable` fewer ready).
    #[default]
    RollingUpdate,
}

/// The bounds of a rolling update, as a Deployment's: a count, or a
/// percentage of the replicas (surge rounded up, unavailable down).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdate {
    /// How many instances beyond the replicas may exist during the rollout
    /// (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// How many fewer than the replicas may be ready during the rollout
    /// (default 0). Not 0 together with a `maxSurge` of 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Which old instances go first: `Oldest` (the default), `Newest` or
    /// `Random`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_policy: Option<DeletePolicy>,
}

/// Which old instances a rollout removes first.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum DeletePolicy {
    /// The longest running.
    #[default]
    Oldest,
    /// The most recently made.
    Newest,
    /// Any.
    Random,
}

impl RollingUpdate {
    /// `(maxSurge, maxUnavailable)` for `replicas`: the defaults (1, 0), a
    /// percentage resolved as a Deployment resolves it, and never both 0
    /// (surge 1 then). An unparsable percentage counts as unset.
    pub fn bounds(this: Option<&Self>, replicas: u32) -> (u32, u32) {
        let resolve = |value: Option<&IntOrString>, default: u32, round_up: bool| match value {
            None => default,
            Some(IntOrString::Int(n)) => u32::try_from(*n).unwrap_or(0),
            Some(IntOrString::String(s)) => s
                .strip_suffix('%')
                .and_then(|p| p.parse::<u64>().ok())
                .map_or(default, |percent| {
                    let scaled = u64::from(replicas) * percent;
                    let whole = if round_up {
                        scaled.div_ceil(100)
                    } else {
                        scaled / 100
                    };
                    u32::try_from(whole).unwrap_or(u32::MAX)
                }),
        };
        let surge = resolve(this.and_then(|r| r.max_surge.as_ref()), 1, true);
        let unavailable = resolve(this.and_then(|r| r.max_unavailable.as_ref()), 0, false);
        if surge == 0 && unavailable == 0 {
            (1, 0)
        } else {
            (surge, unavailable)
        }
    }
}
