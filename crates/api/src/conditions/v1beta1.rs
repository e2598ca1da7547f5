//! The v1beta1 form of conditions, kept beside the v1beta2 ones while
//! v1beta1 is served.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::{ConditionStatus, ConditionType, Reason, get};
use crate::cluster::V1Beta1Condition;

/// Writes the v1beta1 form of the v1beta2 conditions in `pairs` (v1beta1
/// type, v1beta2 type) into `v1beta1`, as upstream keeps both while v1beta1
/// is served: status, reason, message and transition time the same, a
/// severity on False (Warning for what a person may have to act on, Info
/// for waiting). Other v1beta1 conditions (a client's) are left as they are.
pub fn mirror_v1beta1(
    v1beta2: &[Condition],
    pairs: &[(&str, ConditionType)],
    v1beta1: &mut Vec<V1Beta1Condition>,
) {
    for (name, type_) in pairs {
        let Some(condition) = get(v1beta2, *type_) else {
            continue;
        };
        let severity = (condition.status == ConditionStatus::False.as_str()).then(|| {
            let warning = Reason::parse(&condition.reason).is_some_and(Reason::is_warning);
            if warning { "Warning" } else { "Info" }.to_owned()
        });
        let mirrored = V1Beta1Condition {
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
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::conditions::{Desired, set};

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
        let client = V1Beta1Condition {
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
