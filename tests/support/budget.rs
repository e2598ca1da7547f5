//! A Pod whose PodDisruptionBudget holds a drain up, until the test lets
//! it go: what shows that a Node is drained before its instance goes.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::flows::wait_for;

/// Pod `app` on Node `node` of the workload cluster, in `default`, and a
/// PodDisruptionBudget of it that allows no eviction yet (no status: the
/// API server refuses evictions until one is written).
///
/// # Panics
///
/// If the API server refuses either, or the Pod never runs.
pub async fn pod_with_budget(
    workload: &Client,
    node: &str,
    app: &str,
) -> (Api<Pod>, Api<PodDisruptionBudget>, PodDisruptionBudget) {
    let pods: Api<Pod> = Api::namespaced(workload.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": app, "labels": {"app": app}},
        "spec": {"nodeName": node, "containers": [{"name": "web", "image": "web"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    // Running (the simulated kubelet says so): a Pending Pod is evicted
    // whatever its budget says.
    wait_for(&pods, app, "the Pod runs", |p| {
        p.and_then(|p| p.status.as_ref())
            .is_some_and(|s| s.phase.as_deref() == Some("Running"))
    })
    .await;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(workload.clone(), "default");
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": app},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": app}}},
    }))
    .unwrap();
    let budget = budgets
        .create(&PostParams::default(), &budget)
        .await
        .unwrap();
    (pods, budgets, budget)
}

/// Lets `budget` allow one disruption, as the disruption controller would
/// write it: the held Pod may be evicted.
///
/// # Panics
///
/// If the API server refuses the write.
pub async fn allow_one(budgets: &Api<PodDisruptionBudget>, budget: &PodDisruptionBudget) {
    let name = budget.metadata.name.clone().unwrap_or_default();
    budgets
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "observedGeneration": budget.metadata.generation,
                "disruptionsAllowed": 1,
                "currentHealthy": 1,
                "desiredHealthy": 0,
                "expectedPods": 1,
            }})),
        )
        .await
        .unwrap();
}
