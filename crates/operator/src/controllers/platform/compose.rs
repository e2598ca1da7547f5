//! The cluster's objects as its provider renders them: each stamped with
//! the cluster's namespace, label, owner reference and creation record and
//! a digest of what was rendered, applied (server-side, forced, as the
//! cluster's own field manager) only when the object differs; the Secrets
//! the provider asked for, generated once; and every object created for
//! the cluster and no longer rendered, deleted. A render that breaks a
//! rule, or names an object that exists and was not created for the
//! cluster ([`ownership`]), applies nothing.

use std::collections::HashSet;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Resource as _, ResourceExt as _};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use super::children::{Child, Unreadable};
use super::ownership::{self, Claim};
use super::record::{Foreign, created_for};
use crate::api::conditions::Desired;
use crate::api::platform::{CLUSTER_LABEL, CREATED_FOR_ANNOTATION, objects_manager};
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

    // Every kind is resolved, and every object's owner known, before
    // anything is applied: a kind that cannot be watched, or an object that
    // is not the cluster's, applies nothing.
    let name = object.name_any();
    let mut desired = Vec::with_capacity(composition.objects.len());
    for body in composition.objects {
        let (kind, resource) = resource_of(ctx, &body)
            .await
            .map_err(|e| scope.failed(ConditionType::Composed, e))?;
        // Absent or the cluster's: either way `apply` makes it as rendered.
        claimed(ctx, (&kind, &resource), &namespace, name_of(&body), &object)
            .await
            .map_err(|e| scope.failed(ConditionType::Composed, e))?;
        desired.push((resource, stamped(body, &object, &namespace)));
    }
    let (secret_kind, secret_resource) = secret_resource();
    let mut secrets = Vec::with_capacity(composition.secrets.len());
    for secret in &composition.secrets {
        let claim = claimed(
            ctx,
            (&secret_kind, &secret_resource),
            &namespace,
            &secret.name,
            &object,
        )
        .await
        .map_err(|e| scope.failed(ConditionType::Composed, e))?;
        secrets.push((secret, claim));
    }
    let owner = owner_reference(&object);
    let manager = objects_manager(&name);
    for (resource, body) in &desired {
        if !differs(&observed, resource, body, &owner) {
            continue;
        }
        apply(ctx, resource, &namespace, body, &manager)
            .await
            .map_err(|e| scope.failed(ConditionType::Composed, e))?;
    }
    for (secret, claim) in &secrets {
        if matches!(claim, Claim::Absent) {
            generate(ctx, &object, secret)
                .await
                .map_err(|e| scope.failed(ConditionType::Composed, e))?;
        }
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
    prune(ctx, &observed, &rendered, &name)
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

/// A rendered object's kind, and its resource at the version it was rendered in.
async fn resource_of(
    ctx: &Context,
    body: &Map<String, Value>,
) -> Result<(ObjectKind, ApiResource), Error> {
    let text = |key: &str| body.get(key).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let object_kind = ObjectKind {
        group: group_of(api_version).to_owned(),
        kind: kind.to_owned(),
    };
    let watched = ctx
        .labelled
        .watch(&object_kind)
        .await
        .map_err(|e| Error::from(Unreadable(e)))?;
    let version = api_version.rsplit('/').next().unwrap_or(api_version);
    let gvk = GroupVersionKind::gvk(&watched.resource.group, version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &watched.resource.plural);
    Ok((object_kind, resource))
}

/// The kind and resource of the Secrets the host generates.
fn secret_resource() -> (ObjectKind, ApiResource) {
    let kind = ObjectKind {
        group: String::new(),
        kind: "Secret".to_owned(),
    };
    (kind, ApiResource::erase::<Secret>(&()))
}

/// [`ownership::claim`] for `cluster`; an object created for another
/// platform cluster of the namespace tells that one too.
async fn claimed(
    ctx: &Context,
    kind: (&ObjectKind, &ApiResource),
    namespace: &str,
    name: &str,
    cluster: &PlatformCluster,
) -> Result<Claim, Error> {
    let claim = ownership::claim(ctx, kind, namespace, name, &cluster.name_any()).await;
    if let Err(Error::Kind(failure)) = &claim
        && let Some(foreign) = failure.downcast_ref::<Foreign>()
    {
        ownership::contested(ctx, cluster, foreign).await;
    }
    claim
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
            ("annotations", CREATED_FOR_ANNOTATION, cluster.name_any()),
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
    // The caches hold no Secret's payload: a change of what was rendered
    // for it shows in the digest.
    if child.is("", "Secret") {
        expected.remove("data");
        expected.remove("stringData");
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

/// Applies `body` as the cluster's field manager `manager`: it creates the
/// object (its creation record with it) or updates one created for the
/// cluster, as [`ownership::claim`] found.
async fn apply(
    ctx: &Context,
    resource: &ApiResource,
    namespace: &str,
    body: &Map<String, Value>,
    manager: &str,
) -> Result<(), Error> {
    let name = name_of(body);
    let api = Api::<DynamicObject>::namespaced_with(ctx.client.clone(), namespace, resource);
    let params = PatchParams::apply(manager).force();
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

/// Creates the Secret `secret` asks for, which does not exist: its data
/// never changes once made.
async fn generate(
    ctx: &Context,
    cluster: &PlatformCluster,
    secret: &GeneratedSecret,
) -> Result<(), Error> {
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
    object
        .annotations_mut()
        .insert(CREATED_FOR_ANNOTATION.into(), cluster.name_any());
    let namespace = cluster.namespace().unwrap_or_default();
    let api = Api::<Secret>::namespaced(ctx.client.clone(), &namespace);
    let params = PostParams {
        field_manager: Some(objects_manager(&cluster.name_any())),
        ..PostParams::default()
    };
    match api.create(&params, &object).await {
        Ok(_) => {
            ctx.metrics.write(super::CONTROLLER, "generated_secret");
            Ok(())
        }
        // Made since it was looked up: by an earlier reconcile whose watch
        // event has not arrived, or by someone else.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let (kind, resource) = secret_resource();
            let name = cluster.name_any();
            ownership::claim(ctx, (&kind, &resource), &namespace, &secret.name, &name)
                .await
                .map(|_| ())
        }
        Err(source) => Err(Error::Write {
            what: "a generated Secret",
            name: secret.name.clone(),
            source,
        }),
    }
}

/// Deletes the objects created for the cluster that are no longer
/// rendered; never one it did not create.
async fn prune(
    ctx: &Context,
    observed: &[Child],
    rendered: &HashSet<(String, String, String)>,
    cluster: &str,
) -> Result<(), Error> {
    for child in observed {
        let object = &child.object;
        let key = key(
            &child.resource.group,
            &child.resource.kind,
            &object.name_any(),
        );
        if rendered.contains(&key)
            || !created_for(&child.object.metadata, cluster)
            || object.meta().deletion_timestamp.is_some()
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
