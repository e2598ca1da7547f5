//! The MachinePool's phase (upstream `reconcilePhase`) as one `match` over
//! what the reconcile observed, so the precedence reads off the page.

/// MachinePool phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Nothing provisioned yet.
    Pending,
    /// Bootstrap data exists; the infrastructure is being provisioned.
    Provisioning,
    /// Nodes exist; the infrastructure is not (or no longer) ready.
    Provisioned,
    /// Every desired replica has a Ready Node.
    Running,
    /// Fewer Ready Nodes than desired.
    ScalingUp,
    /// More Ready Nodes than desired.
    ScalingDown,
    /// Scaling either way while an external autoscaler owns the replica count.
    Scaling,
    /// Being deleted.
    Deleting,
}

impl Phase {
    /// The API string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Provisioning => "Provisioning",
            Self::Provisioned => "Provisioned",
            Self::Running => "Running",
            Self::ScalingUp => "ScalingUp",
            Self::ScalingDown => "ScalingDown",
            Self::Scaling => "Scaling",
            Self::Deleting => "Deleting",
        }
    }

    /// The phase named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Pending,
            Self::Provisioning,
            Self::Provisioned,
            Self::Running,
            Self::ScalingUp,
            Self::ScalingDown,
            Self::Scaling,
            Self::Deleting,
        ]
        .into_iter()
        .find(|p| p.as_str() == name)
    }
}

/// What the phase depends on: independent facts, hence the flags.
#[allow(clippy::struct_excessive_bools)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Observed {
    /// `deletionTimestamp` is set.
    pub deleting: bool,
    /// `status.initialization.bootstrapDataSecretCreated`.
    pub bootstrap_ready: bool,
    /// `status.initialization.infrastructureProvisioned`.
    pub infrastructure_ready: bool,
    /// `status.nodeRefs` is not empty.
    pub has_node_refs: bool,
    /// `spec.replicas`.
    pub desired: Option<i32>,
    /// Replicas whose Node is Ready.
    pub ready: i32,
    /// The `replicas-managed-by` annotation is present with a value other than `"false"`.
    pub externally_scaled: bool,
    /// The phase before this reconcile.
    pub previous: Option<Phase>,
}

/// The phase for `observed`. Running and scaling compare `spec.replicas`
/// with Ready Nodes, not with the infrastructure's replica count (upstream).
pub fn phase(o: Observed) -> Phase {
    let scaling = |direction| {
        if o.externally_scaled {
            Phase::Scaling
        } else {
            direction
        }
    };
    match (o.infrastructure_ready, o.desired) {
        _ if o.deleting => Phase::Deleting,
        (true, Some(desired)) if desired == o.ready => Phase::Running,
        (true, Some(desired)) if desired > o.ready => scaling(Phase::ScalingUp),
        (true, Some(_)) => scaling(Phase::ScalingDown),
        _ if o.has_node_refs => Phase::Provisioned,
        _ if o.bootstrap_ready && !o.infrastructure_ready => Phase::Provisioning,
        _ => o.previous.unwrap_or(Phase::Pending),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Observed {
        Observed {
            desired: Some(3),
            ..Observed::default()
        }
    }

    #[test]
    fn phase_follows_upstream_precedence() {
        let cases = [
            ("new machinepool", base(), Phase::Pending),
            (
                "bootstrap ready, infrastructure not",
                Observed {
                    bootstrap_ready: true,
                    ..base()
                },
                Phase::Provisioning,
            ),
            (
                "node refs while infrastructure not ready",
                Observed {
                    bootstrap_ready: true,
                    has_node_refs: true,
                    ..base()
                },
                Phase::Provisioned,
            ),
            (
                "all replicas ready",
                Observed {
                    infrastructure_ready: true,
                    ready: 3,
                    ..base()
                },
                Phase::Running,
            ),
            (
                "fewer ready than desired",
                Observed {
                    infrastructure_ready: true,
                    ready: 1,
                    ..base()
                },
                Phase::ScalingUp,
            ),
            (
                "more ready than desired",
                Observed {
                    infrastructure_ready: true,
                    desired: Some(1),
                    ready: 3,
                    ..base()
                },
                Phase::ScalingDown,
            ),
            (
                "scaling up under an autoscaler",
                Observed {
                    infrastructure_ready: true,
                    ready: 1,
                    externally_scaled: true,
                    ..base()
                },
                Phase::Scaling,
            ),
            (
                "scaling down under an autoscaler",
                Observed {
                    infrastructure_ready: true,
                    desired: Some(0),
                    ready: 1,
                    externally_scaled: true,
                    ..base()
                },
                Phase::Scaling,
            ),
            (
                "scaled to zero",
                Observed {
                    infrastructure_ready: true,
                    desired: Some(0),
                    ..base()
                },
                Phase::Running,
            ),
            (
                "infrastructure regressed: the old phase stays",
                Observed {
                    bootstrap_ready: false,
                    previous: Some(Phase::Running),
                    ..base()
                },
                Phase::Running,
            ),
            (
                "deleting wins over everything",
                Observed {
                    deleting: true,
                    infrastructure_ready: true,
                    ready: 3,
                    ..base()
                },
                Phase::Deleting,
            ),
        ];
        for (name, observed, expected) in cases {
            assert_eq!(phase(observed), expected, "{name}");
        }
    }

    #[test]
    fn phase_names_round_trip() {
        for name in ["Pending", "Running", "ScalingDown", "Deleting"] {
            assert_eq!(Phase::parse(name).map(Phase::as_str), Some(name));
        }
        assert_eq!(Phase::parse("Failed"), None);
    }
}
