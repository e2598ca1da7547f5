//! What the host is told of a control plane: the cloud's answer mapped to
//! the WIT `control-plane-state`, with no I/O.

use capwasm_provider_sdk::control_plane::ControlPlaneState;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::ApiEndpoint;

use crate::api::SimControlPlane;

/// How soon to look again while replicas start or roll: the cloud moves a
/// roll on when it is asked, and the host cannot watch it.
pub const REQUEUE_SECONDS: u32 = 2;

/// The state of `plane`, asked to run `replicas` replicas.
pub fn control_plane_state(plane: SimControlPlane, replicas: u32) -> ControlPlaneState {
    let settled = plane.replicas == replicas
        && plane.ready_replicas == replicas
        && plane.available_replicas == replicas
        && plane.up_to_date_replicas == replicas;
    let message = if !plane.initialized {
        Some(format!(
            "control plane {} is starting: {} of {replicas} replicas ready",
            plane.name, plane.ready_replicas
        ))
    } else if plane.available_replicas == 0 {
        Some(format!(
            "no replica of control plane {} serves the API: {} of {} ready",
            plane.name, plane.ready_replicas, plane.replicas
        ))
    } else {
        None
    };
    ControlPlaneState {
        endpoint: plane.endpoint.map(|e| ApiEndpoint {
            host: e.host,
            port: e.port,
        }),
        initialized: plane.initialized,
        replicas: plane.replicas,
        ready_replicas: plane.ready_replicas,
        available_replicas: plane.available_replicas,
        up_to_date_replicas: plane.up_to_date_replicas,
        version: plane.oldest_version,
        // Hosted by the cloud: its replicas are no Nodes of the cluster.
        externally_managed: true,
        message,
        requeue_after_seconds: (!settled).then_some(REQUEUE_SECONDS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SimEndpoint;

    /// A control plane of 3 replicas, all running v1.36.3.
    fn settled() -> SimControlPlane {
        SimControlPlane {
            name: "ns/cp".to_owned(),
            version: "v1.36.3".to_owned(),
            replicas: 3,
            ready_replicas: 3,
            available_replicas: 3,
            up_to_date_replicas: 3,
            initialized: true,
            oldest_version: Some("v1.36.3".to_owned()),
            endpoint: Some(SimEndpoint {
                host: "127.0.0.1".to_owned(),
                port: 40123,
            }),
        }
    }

    #[test]
    fn state_is_settled_and_hosted_when_every_replica_is_ready_and_up_to_date() {
        let state = control_plane_state(settled(), 3);
        assert!(state.externally_managed);
        assert!(state.initialized);
        assert_eq!(state.requeue_after_seconds, None);
        assert_eq!(state.message, None);
        assert_eq!(state.version.as_deref(), Some("v1.36.3"));
        let endpoint = state.endpoint.expect("an endpoint");
        assert_eq!(
            (endpoint.host.as_str(), endpoint.port),
            ("127.0.0.1", 40123)
        );
        assert_eq!(
            (
                state.replicas,
                state.ready_replicas,
                state.available_replicas,
                state.up_to_date_replicas
            ),
            (3, 3, 3, 3)
        );
    }

    #[test]
    fn state_says_why_and_requeues_when_nothing_has_come_up() {
        let starting = SimControlPlane {
            ready_replicas: 0,
            available_replicas: 0,
            initialized: false,
            oldest_version: None,
            ..settled()
        };
        let state = control_plane_state(starting, 3);
        assert_eq!(state.requeue_after_seconds, Some(REQUEUE_SECONDS));
        assert!(state.message.is_some_and(|m| m.contains("starting")));
        assert_eq!(state.version, None);
    }

    #[test]
    fn state_requeues_without_a_message_while_a_roll_is_under_way() {
        let rolling = SimControlPlane {
            ready_replicas: 2,
            available_replicas: 2,
            up_to_date_replicas: 1,
            oldest_version: Some("v1.35.2".to_owned()),
            ..settled()
        };
        let state = control_plane_state(rolling, 3);
        assert_eq!(state.requeue_after_seconds, Some(REQUEUE_SECONDS));
        assert_eq!(state.message, None, "still available");
        assert_eq!(state.version.as_deref(), Some("v1.35.2"), "the oldest");
    }

    #[test]
    fn state_requeues_while_the_replica_count_differs_from_the_one_asked() {
        let state = control_plane_state(settled(), 5);
        assert_eq!(state.requeue_after_seconds, Some(REQUEUE_SECONDS));
    }

    #[test]
    fn state_says_why_when_an_initialized_control_plane_has_no_replica_serving() {
        let down = SimControlPlane {
            replicas: 1,
            ready_replicas: 0,
            available_replicas: 0,
            up_to_date_replicas: 1,
            ..settled()
        };
        let state = control_plane_state(down, 1);
        assert!(state.message.is_some_and(|m| m.contains("serves the API")));
        assert!(state.initialized, "it came up once");
    }
}
