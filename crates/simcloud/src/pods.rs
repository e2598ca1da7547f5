//! What the simulated kubelets do for Pods: a Pod bound to a Node and being
//! deleted (evicted, say) has its containers stopped at once, so the kubelet
//! finishes its deletion, as a real one does once they stopped. Nothing
//! runs a Pod here; without this an evicted Pod would wait for ever.

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::{WatchStreamExt as _, watcher};

/// Finishes the deletion of every terminating Pod bound to a Node, until
/// the task is dropped.
pub(crate) async fn finish_deletions(client: kube::Client) {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut events = watcher(pods, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(event) = events.next().await {
        let Ok(pod) = event else { continue };
        let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        if pod.metadata.deletion_timestamp.is_none() || bound.is_none() {
            continue;
        }
        let (Some(name), Some(namespace)) = (&pod.metadata.name, &pod.metadata.namespace) else {
            continue;
        };
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match Api::<Pod>::namespaced(client.clone(), namespace)
            .delete(name, &params)
            .await
        {
            Ok(_) => tracing::info!(
                pod = name,
                namespace,
                "the Pod's containers stopped: deleted"
            ),
            // Gone already, or another Pod of that name now.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(error) => tracing::warn!(
                pod = name,
                namespace,
                error = %capwasm_runtime::report::error_chain(&error),
                "cannot finish a Pod's deletion; the next change retries"
            ),
        }
    }
}
