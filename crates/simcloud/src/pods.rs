//! What the simulated kubelets do for Pods: a Pod bound to a Node is
//! reported Running and Ready (nothing runs its containers), and one being
//! deleted (evicted, say) has them stopped at once, so the kubelet finishes
//! its deletion, as a real one does once they stopped. Without this a Pod
//! would stay Pending, which the Eviction API evicts whatever its
//! PodDisruptionBudget says, and an evicted Pod would wait for ever.

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;

/// Reports every Pod bound to a Node running, and finishes the deletion of
/// those being deleted, until the task is dropped.
pub(crate) async fn finish_deletions(client: kube::Client) {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut events = watcher(pods, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(event) = events.next().await {
        let Ok(pod) = event else { continue };
        let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        let (Some(name), Some(namespace)) = (&pod.metadata.name, &pod.metadata.namespace) else {
            continue;
        };
        if bound.is_none() {
            continue;
        }
        let api = Api::<Pod>::namespaced(client.clone(), namespace);
        if pod.metadata.deletion_timestamp.is_none() {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            if phase != Some("Running") {
                run(&api, name).await;
            }
            continue;
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(name, &params).await {
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

/// Reports Pod `name` Running and Ready, as a kubelet does once its
/// containers started.
async fn run(api: &Api<Pod>, name: &str) {
    let status = json!({"status": {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Initialized", "status": "True"},
            {"type": "ContainersReady", "status": "True"},
            {"type": "Ready", "status": "True"},
        ],
    }});
    if let Err(error) = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
    {
        tracing::warn!(
            pod = name,
            error = %capwasm_runtime::report::error_chain(&error),
            "cannot report a Pod running; its next change retries"
        );
    }
}
