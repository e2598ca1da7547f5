//! Pausing (upstream `EnsurePausedCondition`): an object is left alone while
//! its Cluster has `spec.paused`, the object has the paused annotation, or
//! (for kinds with one) its own `spec.paused` is set.

use kube::{Resource, ResourceExt as _};

use crate::api::Cluster;

/// Whether the object or its Cluster is paused, and the message saying so;
/// `spec_paused`: the object's own `spec.paused`.
pub fn why<K: Resource<DynamicType = ()>>(
    object: &K,
    cluster: Option<&Cluster>,
    spec_paused: bool,
) -> Option<String> {
    let mut why = Vec::new();
    if spec_paused {
        why.push(format!("{} spec.paused is set to true", K::kind(&())));
    }
    if cluster.is_some_and(Cluster::is_paused) {
        why.push("Cluster spec.paused is set to true".to_owned());
    }
    if object
        .annotations()
        .contains_key(crate::api::annotations::PAUSED)
    {
        why.push(format!(
            "{} has the {} annotation",
            K::kind(&()),
            crate::api::annotations::PAUSED
        ));
    }
    (!why.is_empty()).then(|| why.join(", "))
}
