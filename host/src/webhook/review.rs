//! One ConversionReview: every object converted to the desired version, or,
//! if any cannot be, none — the API server then refuses the request and
//! writes nothing, with the message naming the object and field.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `apiextensions.k8s.io/v1` ConversionReview (k8s-openapi has no type for
/// it: it is not a served resource).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct ConversionReview {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    request: Option<ConversionRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response: Option<ConversionResponse>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct ConversionRequest {
    uid: String,
    #[serde(rename = "desiredAPIVersion")]
    desired_api_version: String,
    #[serde(default)]
    objects: Vec<Value>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct ConversionResponse {
    uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    converted_objects: Option<Vec<Value>>,
    result: Status,
}

/// Converts one object to an API version (`cluster.x-k8s.io/v1beta1`, say),
/// or says why it cannot, naming the field.
pub type Converter = std::sync::Arc<dyn Fn(Value, &str) -> Result<Value, String> + Send + Sync>;

/// The response to the ConversionReview `request`.
pub fn review(
    request: Value,
    convert: &(dyn Fn(Value, &str) -> Result<Value, String> + Sync),
) -> Value {
    let review: ConversionReview = match serde_json::from_value(request) {
        Ok(review) => review,
        Err(e) => return failed(String::new(), format!("not a ConversionReview: {e}")),
    };
    let Some(request) = review.request else {
        return failed(String::new(), "the ConversionReview has no request".into());
    };
    let mut converted = Vec::with_capacity(request.objects.len());
    for object in request.objects {
        let name = describe(&object);
        match convert(object, &request.desired_api_version) {
            Ok(object) => converted.push(object),
            Err(message) => {
                return failed(
                    request.uid,
                    format!(
                        "cannot convert {name} to {}: {message}",
                        request.desired_api_version
                    ),
                );
            }
        }
    }
    respond(ConversionResponse {
        uid: request.uid,
        converted_objects: Some(converted),
        result: Status {
            status: Some("Success".into()),
            ..Status::default()
        },
    })
}

/// `<kind> <namespace>/<name>` of an object, for messages.
fn describe(object: &Value) -> String {
    let field = |path: &str| object.pointer(path).and_then(Value::as_str).unwrap_or("");
    format!(
        "{} {}/{}",
        field("/kind"),
        field("/metadata/namespace"),
        field("/metadata/name")
    )
}

fn failed(uid: String, message: String) -> Value {
    respond(ConversionResponse {
        uid,
        converted_objects: None,
        result: Status {
            status: Some("Failure".into()),
            message: Some(message),
            ..Status::default()
        },
    })
}

fn respond(response: ConversionResponse) -> Value {
    serde_json::to_value(ConversionReview {
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "ConversionReview".into(),
        request: None,
        response: Some(response),
    })
    .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn to_version(object: Value, version: &str) -> Result<Value, String> {
        if object["spec"]["bad"] == true {
            return Err("spec.bad: no home".into());
        }
        let mut object = object;
        object["apiVersion"] = json!(version);
        Ok(object)
    }

    fn request(objects: &Value) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": { "uid": "u-1", "desiredAPIVersion": "x/v2", "objects": objects },
        })
    }

    #[test]
    fn every_object_is_converted_and_the_uid_echoed() {
        let objects = json!([
            { "apiVersion": "x/v1", "kind": "K", "metadata": { "name": "a" } },
            { "apiVersion": "x/v1", "kind": "K", "metadata": { "name": "b" } },
        ]);
        let response = review(request(&objects), &to_version);
        assert_eq!(response["kind"], "ConversionReview");
        assert_eq!(response["response"]["uid"], "u-1");
        assert_eq!(response["response"]["result"]["status"], "Success");
        let converted = response["response"]["convertedObjects"].as_array().unwrap();
        assert_eq!(converted.len(), 2);
        assert!(converted.iter().all(|o| o["apiVersion"] == "x/v2"));
    }

    #[test]
    fn one_object_that_cannot_be_converted_fails_them_all_naming_it_and_its_field() {
        let objects = json!([
            { "apiVersion": "x/v1", "kind": "K", "metadata": { "name": "a" } },
            { "apiVersion": "x/v1", "kind": "K", "metadata": { "namespace": "ns", "name": "b" },
              "spec": { "bad": true } },
        ]);
        let response = review(request(&objects), &to_version);
        assert_eq!(response["response"]["uid"], "u-1");
        assert_eq!(response["response"]["result"]["status"], "Failure");
        assert_eq!(
            response["response"]["result"]["message"],
            "cannot convert K ns/b to x/v2: spec.bad: no home"
        );
        assert!(response["response"].get("convertedObjects").is_none());
    }

    #[test]
    fn a_body_that_is_no_review_fails_saying_so() {
        let response = review(json!({ "request": 7 }), &to_version);
        assert_eq!(response["response"]["result"]["status"], "Failure");
        assert!(
            response["response"]["result"]["message"]
                .as_str()
                .unwrap()
                .starts_with("not a ConversionReview")
        );
    }
}
