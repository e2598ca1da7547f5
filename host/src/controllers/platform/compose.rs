//! The cluster's objects as its provider renders them: each stamped with
//! the cluster's namespace, label and owner reference and a digest of what
//! was rendered, applied (server-side, forced, as the platform's field
//! manager) only when the object differs; the Secrets the provider asked
//! for, generated once; and every labelled object no longer rendered,
//! deleted. A render that breaks a rule applies nothing.

use std::collections::HashSet;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Resource as _, ResourceExt as _};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use super::children::Child;
use crate::api::conditions::Desired;
use crate::api::platform::{CLUSTER_LABEL, FIELD_MANAGER};
use crate::api::provider::ServedBy;
use crate::api::{ConditionType, PlatformCluster, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;
use crate::wasm::ObjectKind;
use crate::wasm::composed::group_of;
use crate::wasm::composition::{GeneratedSecret, RenderRequest};

/// On every applied object: a digest of what was rendered for it, so that
/// a render that changed is applied (dropping the fields it no longer
/// sets) and one that did not costs no write.
pub const RENDERED_ANNOTATION: &str = "platform.capwasm.dev/rendered";

/// Renders, applies what differs, generates Secrets and prunes.
pub(super) async fn compose(
    scope: &mut Scope<PlatformCluster>,
    ctx: &Context,
) -> Result<Outcome, Error> {
    let found = &scope.found;
    let (Some(provider), Some(values), Some(observed)) =
        (&found.provider, &found.values, &found.observed)
    else {
        return Ok(Outcome::Continue);
    };
    if found.hold {
        return Ok(Outcome::Continue);
    }
    let (provider, observed) = (provider.clone(), observed.clone());
    let object = scope.object.clone();
    let (namespace, uid) = (scope.namespace(), object.uid().unwrap_or_default());
    let documents = &found.documents;
    let request = RenderRequest {
        cluster: documents.cluster.clone(),
        template: documents.template.clone(),
        values: values.clone(),
        observed: documents.observed.clone(),
    };
    let composition = ctx
        .runtime
        .render(provider.name(), &uid, &namespace, &request)
        .await
        .map_err(|e| scope.failed(ConditionType::Composed, Error::Guest(e)))?;

    // Every kind is resolved before anything is applied: one that cannot be
    // watched applies nothing.
    let mut desired = Vec::with_capacity(composition.objects.len());
    for body in composition.objects {
        let resource = resource_of(ctx, &body)
            .await
            .map_err(|e| scope.failed(ConditionType::Composed, e))?;
        desired.push((resource, stamped(body, &object, &namespace)));
    }
    let owner = owner_reference(&object);
    for (resource, body) in &desired {
        if !differs(&observed, resource, body, &owner) {
            continue;
        }
        apply(ctx, resource, &namespace, body)
            .await
            .map_err(|e| scope.failed(ConditionType::Composed, e))?;
    }
    for secret in &composition.secrets {
        generate(ctx, &observed, &object, secret)
            .await
            .map_err(|e| scope.failed(ConditionType::Composed, e))?;
    }
    let mut rendered: HashSet<(String, String, String)> = desired
        .iter()
        .map(|(r, body)| key(&r.group, &r.kind, name_of(body)))
        .collect();
    rendered.extend(
        composition
            .secrets
            .iter()
            .map(|s| key("", "Secret", &s.name)),
    );
    prune(ctx, &observed, &rendered, &uid)
        .await
        .map_err(|e| scope.failed(ConditionType::Composed, e))?;

    let status = &mut scope.status;
    status.applied_template = Some(object.spec.template_name.clone());
    status.served_by = Some(ServedBy {
        digest: provider.digest.clone(),
        version: provider.info.version.clone(),
    });
    let count = desired.len() + composition.secrets.len();
    scope.set(Desired::holds(
        ConditionType::Composed,
        Reason::Composed,
        format!(
            "{count} objects as provider {:?} renders them",
            provider.name()
        ),
    ));
    Ok(Outcome::Continue)
}

fn key(group: &str, kind: &str, name: &str) -> (String, String, String) {
    (group.to_owned(), kind.to_owned(), name.to_owned())
}

fn name_of(body: &Map<String, Value>) -> &str {
    body.get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The resource of a rendered object's kind at the version it was rendered in.
async fn resource_of(ctx: &Context, body: &Map<String, Value>) -> Result<ApiResource, Error> {
    let text = |key: &str| body.get(key).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let watched = ctx
        .platform
        .watch(&ObjectKind {
            group: group_of(api_version).to_owned(),
            kind: kind.to_owned(),
        })
        .await
        .map_err(Error::Children)?;
    let version = api_version.rsplit('/').next().unwrap_or(api_version);
    let gvk = GroupVersionKind::gvk(&watched.resource.group, version, kind);
    Ok(ApiResource::from_gvk_with_plural(
        &gvk,
        &watched.resource.plural,
    ))
}

/// The cluster's owner reference: not its controller, since the Cluster API
/// controllers adopt some of its objects as theirs.
pub fn owner_reference(cluster: &PlatformCluster) -> OwnerReference {
    OwnerReference {
        block_owner_deletion: Some(true),
        controller: Some(false),
        ..cluster.owner_ref(&()).unwrap_or_default()
    }
}

/// `body` with the cluster's namespace, label and owner reference, and the
/// digest of what was rendered.
fn stamped(
    mut body: Map<String, Value>,
    cluster: &PlatformCluster,
    namespace: &str,
) -> Map<String, Value> {
    let digest = hex::encode(&Sha256::digest(Value::Object(body.clone()).to_string())[..16]);
    let metadata = body
        .entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(metadata) = metadata {
        metadata.insert("namespace".into(), namespace.into());
        let owner = serde_json::to_value(owner_reference(cluster)).unwrap_or_default();
        metadata.insert("ownerReferences".into(), json!([owner]));
        for (field, key, value) in [
            ("labels", CLUSTER_LABEL, cluster.name_any()),
            ("annotations", RENDERED_ANNOTATION, digest),
        ] {
            let map = metadata.entry(field).or_insert_with(|| json!({}));
            if let Some(map) = map.as_object_mut() {
                map.insert(key.into(), value.into());
            }
        }
    }
    body
}

/// Whether `body` must be applied: it is not there, was rendered
/// otherwise, or a field it sets has been changed by someone else (its
/// owner reference removed, say).
fn differs(
    observed: &[Child],
    resource: &ApiResource,
    body: &Map<String, Value>,
    owner: &OwnerReference,
) -> bool {
    let name = name_of(body);
    let Some(child) = observed.iter().find(|c| {
        c.resource.group == resource.group
            && c.resource.kind == resource.kind
            && c.object.name_any() == name
    }) else {
        return true;
    };
    let adopted = child
        .object
        .owner_references()
        .iter()
        .any(|r| r.uid == owner.uid);
    let mut expected = body.clone();
    if let Some(metadata) = expected.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("ownerReferences");
    }
    let current = child.value();
    !adopted || !contains(&current, &Value::Object(expected))
}

/// Whether `current` holds everything `expected` sets (objects key by key,
/// everything else equal).
fn contains(current: &Value, expected: &Value) -> bool {
    match (current, expected) {
        (Value::Object(current), Value::Object(expected)) => expected
            .iter()
            .all(|(k, v)| current.get(k).is_some_and(|c| contains(c, v))),
        (Value::Array(current), Value::Array(expected)) => {
            current.len() == expected.len()
                && current.iter().zip(expected).all(|(c, e)| contains(c, e))
        }
        (current, expected) => current == expected,
    }
}

async fn apply(
    ctx: &Context,
    resource: &ApiResource,
    namespace: &str,
    body: &Map<String, Value>,
) -> Result<(), Error> {
    let name = name_of(body);
    let api = Api::<DynamicObject>::namespaced_with(ctx.client.clone(), namespace, resource);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(body))
        .await
        .map_err(|source| Error::Write {
            what: "a rendered object",
            name: format!("{}/{name}", resource.kind),
            source,
        })?;
    ctx.metrics.write(super::CONTROLLER, "rendered");
    Ok(())
}

/// Creates the Secret `secret` asks for unless it exists: its data never
/// changes once made.
async fn generate(
    ctx: &Context,
    observed: &[Child],
    cluster: &PlatformCluster,
    secret: &GeneratedSecret,
) -> Result<(), Error> {
    let exists = observed.iter().any(|c| {
        c.resource.group.is_empty()
            && c.resource.kind == "Secret"
            && c.object.name_any() == secret.name
    });
    if exists {
        return Ok(());
    }
    let mut data = std::collections::BTreeMap::new();
    for key in &secret.keys {
        let mut bytes = vec![0; secret.bytes as usize];
        getrandom::fill(&mut bytes).map_err(|e| Error::Write {
            what: "a generated Secret",
            name: secret.name.clone(),
            source: kube::Error::Service(Box::new(std::io::Error::other(e.to_string()))),
        })?;
        let text = base64::engine::general_purpose::STANDARD.encode(bytes);
        data.insert(key.clone(), k8s_openapi::ByteString(text.into_bytes()));
    }
    let mut object = Secret {
        data: Some(data),
        ..Secret::default()
    };
    object.metadata.name = Some(secret.name.clone());
    object.metadata.namespace = cluster.namespace();
    object.metadata.owner_references = Some(vec![owner_reference(cluster)]);
    object
        .labels_mut()
        .insert(CLUSTER_LABEL.into(), cluster.name_any());
    let api =
        Api::<Secret>::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => {
            ctx.metrics.write(super::CONTROLLER, "generated_secret");
            Ok(())
        }
        // Made by an earlier reconcile whose watch event has not arrived.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(Error::Write {
            what: "a generated Secret",
            name: secret.name.clone(),
            source,
        }),
    }
}

/// Deletes the cluster's objects no longer rendered: those it owns, or
/// that lost every owner (a restore); never one another owner took.
async fn prune(
    ctx: &Context,
    observed: &[Child],
    rendered: &HashSet<(String, String, String)>,
    uid: &str,
) -> Result<(), Error> {
    for child in observed {
        let object = &child.object;
        let key = key(
            &child.resource.group,
            &child.resource.kind,
            &object.name_any(),
        );
        if rendered.contains(&key) || !child.ours(uid) || object.meta().deletion_timestamp.is_some()
        {
            continue;
        }
        super::observe::remove(ctx, child).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kube::api::ObjectMeta;

    use super::*;

    #[test]
    fn an_object_as_rendered_and_owned_does_not_differ_though_its_list_item_has_no_kind() {
        let gvk = GroupVersionKind::gvk("", "v1", "ConfigMap");
        let resource = ApiResource::from_gvk(&gvk);
        let owner = OwnerReference {
            uid: "u-1".into(),
            ..OwnerReference::default()
        };
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "ownerReferences": [owner]}, "data": {"k": "v"}});
        let Value::Object(body) = body else {
            panic!("not an object: {body}")
        };
        // As a watch of a built-in kind lists it: no apiVersion or kind.
        let mut object = DynamicObject {
            types: None,
            metadata: ObjectMeta {
                name: Some("c".into()),
                owner_references: Some(vec![owner.clone()]),
                ..ObjectMeta::default()
            },
            data: json!({"data": {"k": "v"}}),
        };
        let child = |object: &DynamicObject| Child {
            resource: resource.clone(),
            object: Arc::new(object.clone()),
        };
        assert!(!differs(&[child(&object)], &resource, &body, &owner));
        object.data = json!({"data": {"k": "changed"}});
        assert!(differs(&[child(&object)], &resource, &body, &owner));
        object.data = json!({"data": {"k": "v"}});
        object.metadata.owner_references = None;
        assert!(differs(&[child(&object)], &resource, &body, &owner));
    }

    #[test]
    fn contains_reads_objects_key_by_key_and_lists_whole() {
        let current = json!({"a": 1, "b": {"c": [1, {"d": 2, "e": 3}], "f": "x"}});
        assert!(contains(&current, &json!({"b": {"c": [1, {"d": 2}]}})));
        assert!(!contains(&current, &json!({"b": {"c": [1]}})));
        assert!(!contains(&current, &json!({"a": 2})));
        assert!(!contains(&current, &json!({"g": null})));
    }
}
