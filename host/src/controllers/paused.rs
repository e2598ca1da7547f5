//! Pausing (upstream `EnsurePausedCondition`): an object is left alone while
//! its Cluster has `spec.paused` or the object has the paused annotation.

use kube::{Resource, ResourceExt as _};

use crate::api::Cluster;

/// Whether the object or its Cluster is paused, and the message saying so.
pub fn why<K: Resource<DynamicType = ()>>(object: &K, cluster: Option<&Cluster>) -> Option<String> {
    let mut why = Vec::new();
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
