//! One ConversionReview: every object converted to the desired version, or,
//! if any cannot be, none — the API server then refuses the request and
//! writes nothing, with the message naming the object and field.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use serde::de::{Deserializer as _, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::bounds;

/// What is read of an `apiextensions.k8s.io/v1` ConversionReview (k8s-openapi
/// has no type for it: it is not a served resource). The objects stay text,
/// borrowed from the body, until each is converted in turn.
#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(borrow)]
    request: Option<Request<'a>>,
}

#[derive(Deserialize)]
struct Request<'a> {
    uid: String,
    #[serde(rename = "desiredAPIVersion")]
    desired_api_version: String,
    #[serde(borrow, default)]
    objects: Option<&'a RawValue>,
}

/// A ConversionReview that failed (a successful one is written as its
/// objects are converted: [`Converted`]).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Outgoing {
    api_version: &'static str,
    kind: &'static str,
    response: Response,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    uid: String,
    result: Status,
}

/// Converts one object to an API version (`cluster.x-k8s.io/v1beta1`, say),
/// or says why it cannot, naming the field.
pub type Converter = std::sync::Arc<dyn Fn(Value, &str) -> Result<Value, String> + Send + Sync>;

/// The response (JSON) to the ConversionReview `body`. Only one object at a
/// time is ever a tree of values, once counted ([`bounds::MAX_VALUES`]), and
/// it is written into the response before the next is read: the review
/// costs its body, the response, and the largest object's tree.
pub fn review(
    body: &[u8],
    convert: &(dyn Fn(Value, &str) -> Result<Value, String> + Sync),
) -> Vec<u8> {
    let incoming: Incoming = match serde_json::from_slice(body) {
        Ok(incoming) => incoming,
        Err(e) => return failed(String::new(), format!("not a ConversionReview: {e}")),
    };
    let Some(request) = incoming.request else {
        return failed(String::new(), "the ConversionReview has no request".into());
    };
    let version = request.desired_api_version.as_str();
    // Converted objects take about the room they took in the body.
    let mut response = Converted::new(&request.uid, body.len());
    let mut failure = None;
    let walked = each_object(request.objects, |index, object| {
        match convert_one(index, object, version, convert)
            .and_then(|object| response.push(&object).map_err(|e| e.to_string()))
        {
            Ok(()) => true,
            Err(message) => {
                failure = Some(message);
                false
            }
        }
    });
    if let Err(e) = walked {
        return failed(request.uid, format!("not a ConversionReview: {e}"));
    }
    if let Some(message) = failure {
        return failed(request.uid, message);
    }
    response.finish()
}

/// A successful response, written as the objects are converted.
struct Converted {
    json: Vec<u8>,
    objects: usize,
}

impl Converted {
    /// The response to review `uid` up to its first object; room for
    /// `capacity` bytes of them.
    fn new(uid: &str, capacity: usize) -> Self {
        let mut json = Vec::with_capacity(capacity + 256);
        json.extend_from_slice(
            br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{"uid":"#,
        );
        // A string always serialises.
        let _ = serde_json::to_writer(&mut json, uid);
        json.extend_from_slice(br#","convertedObjects":["#);
        Self { json, objects: 0 }
    }

    fn push(&mut self, object: &Value) -> Result<(), serde_json::Error> {
        if self.objects > 0 {
            self.json.push(b',');
        }
        self.objects += 1;
        serde_json::to_writer(&mut self.json, object)
    }

    fn finish(mut self) -> Vec<u8> {
        let success = Status {
            status: Some("Success".into()),
            ..Status::default()
        };
        self.json.extend_from_slice(br#"],"result":"#);
        let _ = serde_json::to_writer(&mut self.json, &success);
        self.json.extend_from_slice(b"}}");
        self.json
    }
}

/// Object `index` (from 0) converted to `version`.
fn convert_one(
    index: usize,
    object: &RawValue,
    version: &str,
    convert: &(dyn Fn(Value, &str) -> Result<Value, String> + Sync),
) -> Result<Value, String> {
    let object: Value = bounds::parse(object.get().as_bytes()).map_err(|e| {
        format!(
            "cannot convert object {index} to {version}: {}",
            crate::report::error_chain(&e)
        )
    })?;
    let name = describe(&object);
    convert(object, version)
        .map_err(|message| format!("cannot convert {name} to {version}: {message}"))
}

/// Calls `each` with every object of the array `objects` in turn, read from
/// the text one by one, until it returns false (the rest is then only
/// checked to be JSON).
fn each_object<'a>(
    objects: Option<&'a RawValue>,
    each: impl FnMut(usize, &'a RawValue) -> bool,
) -> Result<(), serde_json::Error> {
    let Some(objects) = objects else {
        return Ok(());
    };
    let mut deserializer = serde_json::Deserializer::from_str(objects.get());
    deserializer.deserialize_seq(EachObject { each })?;
    deserializer.end()
}

struct EachObject<F> {
    each: F,
}

impl<'de, F: FnMut(usize, &'de RawValue) -> bool> Visitor<'de> for EachObject<F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while let Some(object) = seq.next_element::<&'de RawValue>()? {
            if !(self.each)(index, object) {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                break;
            }
            index += 1;
        }
        Ok(())
    }
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

fn failed(uid: String, message: String) -> Vec<u8> {
    let review = Outgoing {
        api_version: "apiextensions.k8s.io/v1",
        kind: "ConversionReview",
        response: Response {
            uid,
            result: Status {
                status: Some("Failure".into()),
                message: Some(message),
                ..Status::default()
            },
        },
    };
    serde_json::to_vec(&review).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

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

    /// The response to `body`, converted by [`to_version`].
    fn reviewed(body: &str) -> Value {
        serde_json::from_slice(&review(body.as_bytes(), &to_version)).unwrap()
    }

    fn message(response: &Value) -> &str {
        response["response"]["result"]["message"].as_str().unwrap()
    }

    #[test]
    fn every_object_is_converted_and_the_uid_echoed() {
        let objects = json!([
            { "apiVersion": "x/v1", "kind": "K", "metadata": { "name": "a" } },
            { "apiVersion": "x/v1", "kind": "K", "metadata": { "name": "b" } },
        ]);
        let response = reviewed(&request(&objects).to_string());
        assert_eq!(response["kind"], "ConversionReview");
        assert_eq!(response["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(response["response"]["uid"], "u-1");
        assert_eq!(response["response"]["result"]["status"], "Success");
        let converted = response["response"]["convertedObjects"].as_array().unwrap();
        assert_eq!(converted.len(), 2);
        assert!(converted.iter().all(|o| o["apiVersion"] == "x/v2"));
        assert_eq!(converted[1]["metadata"]["name"], "b");
    }

    #[test]
    fn objects_before_the_uid_and_version_are_converted_all_the_same() {
        let body = r#"{"request": {"objects": [{"apiVersion": "x/v1", "kind": "K"}],
            "desiredAPIVersion": "x/v2", "uid": "u-1"}}"#;
        let response = reviewed(body);
        assert_eq!(response["response"]["uid"], "u-1");
        assert_eq!(
            response["response"]["convertedObjects"][0]["apiVersion"],
            "x/v2"
        );
    }

    #[test]
    fn a_review_without_objects_converts_none() {
        for objects in [json!([]), Value::Null] {
            let response = reviewed(&request(&objects).to_string());
            assert_eq!(response["response"]["result"]["status"], "Success");
            assert_eq!(response["response"]["convertedObjects"], json!([]));
        }
    }

    #[test]
    fn one_object_that_cannot_be_converted_fails_them_all_naming_it_and_its_field() {
        let objects = json!([
            { "apiVersion": "x/v1", "kind": "K", "metadata": { "name": "a" } },
            { "apiVersion": "x/v1", "kind": "K", "metadata": { "namespace": "ns", "name": "b" },
              "spec": { "bad": true } },
        ]);
        let response = reviewed(&request(&objects).to_string());
        assert_eq!(response["response"]["uid"], "u-1");
        assert_eq!(response["response"]["result"]["status"], "Failure");
        assert_eq!(
            message(&response),
            "cannot convert K ns/b to x/v2: spec.bad: no home"
        );
        assert!(response["response"].get("convertedObjects").is_none());
    }

    #[test]
    fn objects_after_one_that_cannot_be_converted_are_not_converted() {
        let objects = json!([{ "spec": { "bad": true } }, { "kind": "K" }, { "kind": "K" }]);
        let calls = AtomicUsize::new(0);
        let counting = |object: Value, version: &str| {
            calls.fetch_add(1, Ordering::Relaxed);
            to_version(object, version)
        };
        let response: Value =
            serde_json::from_slice(&review(request(&objects).to_string().as_bytes(), &counting))
                .unwrap();
        assert_eq!(response["response"]["result"]["status"], "Failure");
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn an_object_of_more_values_than_the_bound_fails_the_review_naming_the_bound() {
        let zeros = vec![0; bounds::MAX_VALUES];
        let objects = json!([{ "kind": "K" }, { "kind": "K", "spec": { "zeros": zeros } }]);
        let response = reviewed(&request(&objects).to_string());
        assert_eq!(response["response"]["uid"], "u-1");
        assert_eq!(response["response"]["result"]["status"], "Failure");
        assert_eq!(
            message(&response),
            format!(
                "cannot convert object 1 to x/v2: it holds more than {} JSON values",
                bounds::MAX_VALUES
            )
        );
    }

    #[test]
    fn objects_too_deeply_nested_fail_the_review() {
        let nested = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let body = format!(
            r#"{{"request": {{"uid": "u-1", "desiredAPIVersion": "x/v2", "objects": [{nested}]}}}}"#
        );
        let response = reviewed(&body);
        assert_eq!(response["response"]["result"]["status"], "Failure");
        assert!(message(&response).contains("recursion limit"), "{response}");
    }

    #[test]
    fn a_body_that_is_no_review_fails_saying_so() {
        for body in [
            r#"{ "request": 7 }"#,
            "not JSON",
            r#"{"request": {"uid": "u", "desiredAPIVersion": "v", "objects": 7}}"#,
        ] {
            let response = reviewed(body);
            assert_eq!(response["response"]["result"]["status"], "Failure");
            assert!(
                message(&response).starts_with("not a ConversionReview"),
                "{response}"
            );
        }
    }
}
