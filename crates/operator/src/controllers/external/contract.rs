//! The contract fields of a referenced object, read by contract version,
//! and how our conditions mirror its readiness.

use kube::api::DynamicObject;
use serde_json::Value;

use super::Contract;
use crate::api::conditions::Desired;
use crate::api::{ConditionStatus, ConditionType, ContractVersionedObjectReference, Reason};

/// A readiness flag by contract: `status.initialization.<v1beta2>` or
/// `status.<v1beta1>`; missing is false.
pub fn contract_flag(
    object: &DynamicObject,
    contract: Contract,
    v1beta2: &str,
    v1beta1: &str,
) -> bool {
    let value = match contract {
        Contract::V1Beta2 => status_field(object, &["initialization", v1beta2]),
        Contract::V1Beta1 => status_field(object, &[v1beta1]),
    };
    value.and_then(Value::as_bool).unwrap_or(false)
}

/// `status.<path>` of a referenced object.
pub fn status_field<'a>(object: &'a DynamicObject, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(object.data.get("status")?, |value, key| value.get(key))
}

/// `spec.<path>` of a referenced object.
pub fn spec_field<'a>(object: &'a DynamicObject, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(object.data.get("spec")?, |value, key| value.get(key))
}

/// How one of our conditions mirrors a referenced object's readiness.
#[derive(Clone, Copy, Debug)]
pub struct Mirror {
    /// Our condition.
    pub type_: ConditionType,
    /// Its reason when the object is ready.
    pub ready: Reason,
    /// Its reason while it is not.
    pub waiting: Reason,
}

impl Mirror {
    /// The condition for an object that is ready or not (`holds`): with the
    /// object's own `Ready` message when it has one worth repeating, else
    /// saying which it is. A capwasm provider object's progress (a reason
    /// that needs nobody) is not repeated: it changes as the object works,
    /// and our copy would be rewritten each time; its problems are, and so
    /// is everything another provider's objects say.
    pub fn of(
        &self,
        object: &DynamicObject,
        holds: bool,
        reference: &ContractVersionedObjectReference,
    ) -> Desired {
        let worth_repeating =
            |reason: &str| holds || Reason::parse(reason).is_none_or(Reason::is_warning);
        let message = ready_condition(object)
            .filter(|(reason, message)| !message.is_empty() && worth_repeating(reason))
            .map_or_else(
                || {
                    if holds {
                        format!("{reference} is ready")
                    } else {
                        format!("waiting for {reference}")
                    }
                },
                |(_, message)| message,
            );
        Desired {
            type_: self.type_,
            status: ConditionStatus::from_bool(holds),
            reason: if holds { self.ready } else { self.waiting },
            message,
        }
    }
}

/// The reason and message of the object's `Ready` condition.
fn ready_condition(object: &DynamicObject) -> Option<(String, String)> {
    condition(object, "Ready").map(|(_, reason, message)| (reason, message))
}

/// The status, reason and message of the object's condition `type_`
/// (v1beta1 and v1beta2 conditions share the fields).
pub fn condition(object: &DynamicObject, type_: &str) -> Option<(String, String, String)> {
    let conditions = status_field(object, &["conditions"])?.as_array()?;
    let found = conditions
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))?;
    let text = |key| {
        found
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Some((text("status"), text("reason"), text("message")))
}

/// The failure the object reports (`status.failureReason` / `failureMessage`), if any.
pub fn failure(object: &DynamicObject) -> Option<(String, String)> {
    let text = |key| {
        status_field(object, &[key])
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    match (text("failureReason"), text("failureMessage")) {
        (None, None) => None,
        (reason, message) => Some((reason.unwrap_or_default(), message.unwrap_or_default())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ApiResource;
    use serde_json::json;

    fn object(status: Value) -> DynamicObject {
        let resource = ApiResource::erase::<crate::api::WasmMachinePool>(&());
        let mut object = DynamicObject::new("p", &resource);
        let mut data = serde_json::Map::new();
        data.insert("status".into(), status);
        object.data = Value::Object(data);
        object
    }

    const INFRA: Mirror = Mirror {
        type_: ConditionType::InfrastructureReady,
        ready: Reason::Ready,
        waiting: Reason::WaitingForInfrastructure,
    };

    fn reference() -> ContractVersionedObjectReference {
        ContractVersionedObjectReference::new(
            "infrastructure.cluster.x-k8s.io",
            "WasmMachinePool",
            "p",
        )
    }

    #[test]
    fn a_mirrored_condition_takes_the_objects_ready_message_and_our_reasons() {
        let waiting = object(json!({ "conditions": [
            { "type": "Ready", "status": "False", "reason": "Booting", "message": "2 of 3 running" }
        ]}));
        let mirrored = INFRA.of(&waiting, false, &reference());
        assert_eq!(mirrored.status, ConditionStatus::False);
        assert_eq!(
            mirrored.reason,
            Reason::WaitingForInfrastructure,
            "our reason, not the object's"
        );
        assert_eq!(mirrored.message, "2 of 3 running");
    }

    #[test]
    fn a_capwasm_objects_progress_is_not_repeated_its_problems_are() {
        let condition = |reason: &str, message: &str| {
            object(json!({ "conditions": [
                { "type": "Ready", "status": "False", "reason": reason, "message": message }
            ]}))
        };
        let progress = condition("WaitingForInstances", "waiting for 3 instances to run");
        assert_eq!(
            INFRA.of(&progress, false, &reference()).message,
            format!("waiting for {}", reference())
        );
        let problem = condition("InvalidConfig", "invalid config at $.ami");
        assert_eq!(
            INFRA.of(&problem, false, &reference()).message,
            "invalid config at $.ami"
        );
        let ready = object(json!({ "conditions": [
            { "type": "Ready", "status": "True", "reason": "Ready", "message": "3 instances running" }
        ]}));
        assert_eq!(
            INFRA.of(&ready, true, &reference()).message,
            "3 instances running"
        );
    }

    #[test]
    fn a_mirrored_condition_without_a_ready_message_says_which_object_it_waits_for() {
        let bare = object(json!({}));
        assert_eq!(
            INFRA.of(&bare, false, &reference()).message,
            format!("waiting for {}", reference())
        );
        let ready = INFRA.of(&bare, true, &reference());
        assert_eq!(
            (ready.status, ready.reason),
            (ConditionStatus::True, Reason::Ready)
        );
    }

    #[test]
    fn readiness_is_read_where_the_contract_puts_it() {
        let v1beta2 = object(json!({ "initialization": { "provisioned": true }, "ready": false }));
        assert!(contract_flag(
            &v1beta2,
            Contract::V1Beta2,
            "provisioned",
            "ready"
        ));
        assert!(!contract_flag(
            &v1beta2,
            Contract::V1Beta1,
            "provisioned",
            "ready"
        ));
        let missing = object(json!({}));
        assert!(!contract_flag(
            &missing,
            Contract::V1Beta2,
            "provisioned",
            "ready"
        ));
    }

    #[test]
    fn a_failure_is_reported_when_either_field_is_set() {
        assert_eq!(failure(&object(json!({}))), None);
        assert_eq!(
            failure(&object(json!({ "failureMessage": "quota" }))),
            Some((String::new(), "quota".to_owned()))
        );
    }
}
