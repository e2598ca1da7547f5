//! The Cluster's phase, derived from what the reconcile observed (upstream
//! `reconcilePhase`, as one `match` so the precedence reads off the page).

/// Cluster phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Nothing referenced yet.
    Pending,
    /// Infrastructure or control plane referenced, not provisioned.
    Provisioning,
    /// Infrastructure provisioned and the endpoint known.
    Provisioned,
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
            Self::Deleting => "Deleting",
        }
    }
}

/// What the phase depends on: independent facts, hence the flags.
#[allow(clippy::struct_excessive_bools)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Observed {
    /// `deletionTimestamp` is set.
    pub deleting: bool,
    /// `infrastructureRef` or `controlPlaneRef` is set.
    pub has_refs: bool,
    /// `status.initialization.infrastructureProvisioned`.
    pub infrastructure_provisioned: bool,
    /// `spec.controlPlaneEndpoint` has host and port.
    pub endpoint_valid: bool,
}

/// The phase for `observed`. Control-plane readiness is not required for
/// `Provisioned`, as upstream.
pub fn phase(observed: Observed) -> Phase {
    match observed {
        Observed { deleting: true, .. } => Phase::Deleting,
        Observed {
            infrastructure_provisioned: true,
            endpoint_valid: true,
            ..
        } => Phase::Provisioned,
        Observed { has_refs: true, .. } => Phase::Provisioning,
        Observed { .. } => Phase::Pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_follows_upstream_precedence() {
        let none = Observed::default();
        let provisioned = Observed {
            infrastructure_provisioned: true,
            ..none
        };
        let referenced = Observed {
            has_refs: true,
            ..provisioned
        };
        let cases = [
            ("new cluster without refs", none, Phase::Pending),
            ("no refs and no endpoint", provisioned, Phase::Pending),
            (
                "infrastructure referenced",
                Observed {
                    has_refs: true,
                    ..none
                },
                Phase::Provisioning,
            ),
            (
                "provisioned without endpoint",
                referenced,
                Phase::Provisioning,
            ),
            (
                "provisioned with endpoint",
                Observed {
                    endpoint_valid: true,
                    ..referenced
                },
                Phase::Provisioned,
            ),
            (
                "no infra ref and a given endpoint",
                Observed {
                    endpoint_valid: true,
                    ..provisioned
                },
                Phase::Provisioned,
            ),
            (
                "deleting wins",
                Observed {
                    deleting: true,
                    endpoint_valid: true,
                    ..referenced
                },
                Phase::Deleting,
            ),
        ];
        for (name, input, expected) in cases {
            assert_eq!(phase(input), expected, "{name}");
        }
    }
}
