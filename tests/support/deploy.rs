//! An install as its users apply it into a real Kubernetes ([`crate::node`]):
//! `deploy/` rendered by kustomize with the image named by digest, applied
//! server-side, its Deployments waited for, and what a user would look at
//! when a Pod does not come up.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, LogParams, PatchParams};
use kube::{Client, ResourceExt as _};

use crate::image::{OperatorImage, REPOSITORY};
use crate::{Error, Result};

/// `deploy/<variant>` (`""` for the standalone install) as kustomize
/// renders it, the operator's image named by digest, as a release does.
///
/// # Errors
///
/// If kustomize fails, or the rendering names no operator image.
pub fn rendered(variant: &str, image: &OperatorImage) -> Result<Vec<DynamicObject>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(variant);
    let mut objects = crate::kustomize::objects(&dir)?;
    let mut named = 0;
    let prefix = format!("{REPOSITORY}:");
    for object in &mut objects {
        let Some(containers) = object
            .data
            .pointer_mut("/spec/template/spec/containers")
            .and_then(|c| c.as_array_mut())
        else {
            continue;
        };
        for container in containers {
            let Some(image_field) = container.get_mut("image") else {
                continue;
            };
            if image_field.as_str().is_some_and(|i| i.starts_with(&prefix)) {
                *image_field = serde_json::Value::String(image.reference());
                named += 1;
            }
        }
    }
    if named == 0 {
        return Err(Error::Manifest(format!(
            "deploy/{variant} names no {REPOSITORY} image"
        )));
    }
    Ok(objects)
}

/// Applies `objects` in order, server-side as `manager`, taking over
/// fields another manager set.
///
/// # Errors
///
/// At the first object refused.
pub async fn apply_all(client: &Client, objects: &[DynamicObject], manager: &str) -> Result<()> {
    let params = PatchParams::apply(manager).force();
    for object in objects {
        crate::kustomize::apply(client, object, &params)
            .await
            .map_err(|e| {
                let kind = object.types.as_ref().map_or("", |t| t.kind.as_str());
                Error::Manifest(format!(
                    "applying {kind} {}: {}",
                    object.name_any(),
                    capwasm::report::error_chain(&e)
                ))
            })?;
    }
    Ok(())
}

/// What a user would look at when a Deployment does not become available:
/// each Pod of `namespace` with its phase, conditions, container states
/// and last log lines.
pub async fn describe_pods(client: &Client, namespace: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut text = String::new();
    let list = match pods.list(&ListParams::default()).await {
        Ok(list) => list,
        Err(e) => return format!("the Pods of {namespace} could not be listed: {e}"),
    };
    if list.items.is_empty() {
        return format!("{namespace} has no Pods");
    }
    for pod in list {
        let name = pod.name_any();
        let status = serde_json::to_string_pretty(&pod.status).unwrap_or_default();
        let logs = pods
            .logs(
                &name,
                &LogParams {
                    tail_lines: Some(40),
                    ..LogParams::default()
                },
            )
            .await
            .unwrap_or_else(|e| format!("(no logs: {e})"));
        let _ = writeln!(text, "Pod {namespace}/{name}\n{status}\nlogs:\n{logs}");
    }
    text
}

/// Waits until Deployment `namespace/name` has `replicas` available.
///
/// # Errors
///
/// If it cannot be read, or is not available `within`: the error describes
/// the namespace's Pods ([`describe_pods`]).
pub async fn wait_available(
    client: &Client,
    namespace: &str,
    name: &str,
    replicas: i32,
    within: Duration,
) -> Result<()> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let started = Instant::now();
    loop {
        let available = deployments
            .get(name)
            .await?
            .status
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        if available >= replicas {
            return Ok(());
        }
        if started.elapsed() > within {
            return Err(Error::Node(format!(
                "{replicas} replicas of Deployment {namespace}/{name} not available within \
                 {within:?}\n{}",
                describe_pods(client, namespace).await
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The whole log of each Pod (of its one container) in `namespace` labelled
/// `selector`, each line prefixed with its Pod's name.
///
/// # Errors
///
/// If the Pods cannot be listed or a log read; a namespace with no such
/// Pod is an error too, so that no check passes on logs never read.
pub async fn logs(client: &Client, namespace: &str, selector: &str) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods.list(&ListParams::default().labels(selector)).await?;
    if list.items.is_empty() {
        return Err(Error::Node(format!(
            "no Pod in {namespace} is labelled {selector}"
        )));
    }
    let mut text = String::new();
    for pod in list {
        let name = pod.name_any();
        let log = pods.logs(&name, &LogParams::default()).await?;
        for line in log.lines() {
            let _ = writeln!(text, "{name}: {line}");
        }
    }
    Ok(text)
}
