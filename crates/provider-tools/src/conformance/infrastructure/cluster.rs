//! What a provider says of the cluster: its endpoint and failure domains,
//! and the providerIDs of its instances.

use super::{REGION, cloud, config, instant, loopback, requests};
use crate::conformance::{Failure, Subject, ensure, ensure_eq};

/// The cluster's endpoint and failure domains come from the config alone.
pub async fn reconcile_cluster_reports_endpoint_and_failure_domains_from_config(
    subject: &Subject,
) -> Result<(), Failure> {
    let provider = subject.load(loopback()).await?;
    let config = serde_json::json!({
        "endpoint": "http://127.0.0.1:1",
        "region": REGION,
        "failureDomains": ["zone-a", "zone-b"],
        "controlPlanePort": 7443,
    })
    .to_string();

    let state = provider
        .reconcile_cluster(&requests::cluster_request(&config))
        .await?;

    ensure!(state.ready, "the cluster is not reported ready");
    let endpoint = state
        .control_plane_endpoint
        .map(|e| (e.host, e.port))
        .ok_or_else(|| Failure::Expected("no control plane endpoint".into()))?;
    ensure_eq!(
        endpoint,
        ("127.0.0.1".to_owned(), 7443),
        "control plane endpoint"
    );
    let domains: Vec<_> = state
        .failure_domains
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    ensure_eq!(domains, ["zone-a", "zone-b"], "failure domains");
    Ok(())
}

/// `provider-id` gives what reconcile reported; `owns` claims `sim://` only.
pub async fn provider_ids_are_derived_from_config_and_owned_by_scheme(
    subject: &Subject,
) -> Result<(), Failure> {
    let running = cloud(instant()).await?;
    let provider = subject.load(loopback()).await?;
    let config = config(&running.endpoint());
    let state = provider
        .reconcile(&requests::reconcile_pool(&config, 1))
        .await?;
    let instance = state
        .instances
        .first()
        .ok_or_else(|| Failure::Expected("no instance reported for 1 replica".into()))?;

    let derived = provider.provider_id(&config, instance).await?;
    ensure_eq!(
        derived,
        instance.provider_id,
        "provider-id of the reported instance"
    );
    ensure!(
        provider.owns(&instance.provider_id).await?,
        "owns refuses its own providerID {}",
        instance.provider_id
    );
    ensure!(
        !provider.owns("aws:///us-east-1a/i-0123").await?,
        "owns claims aws:///us-east-1a/i-0123"
    );
    Ok(())
}
