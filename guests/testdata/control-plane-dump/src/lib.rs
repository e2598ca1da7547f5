//! Test component: a control-plane provider that looks through everything
//! a reconcile is given (config, version, cluster, credentials, the
//! certificates) for a PEM certificate and a PEM private key, and says
//! what it found in its message. Its control plane never comes up: the
//! state is never initialized, so the host must create nothing that waits
//! on that (no kubeconfig, no workers).
#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;

use capwasm_provider_sdk::control_plane::{
    ControlPlaneProvider, ControlPlaneRequest, ControlPlaneState,
};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{DeleteOutcome, ProviderError};

struct ControlPlaneDump;

/// Every text the request carries, named.
fn inputs(request: &ControlPlaneRequest) -> Vec<(String, String)> {
    let certificates = &request.certificates;
    let mut inputs: Vec<(String, String)> = [
        ("config", &request.config),
        ("version", &request.version),
        ("idempotencyKey", &request.idempotency_key),
        ("cluster.name", &request.cluster.name),
        ("certificates.namespace", &certificates.namespace),
        ("certificates.ca", &certificates.ca),
        ("certificates.etcd", &certificates.etcd),
        ("certificates.frontProxy", &certificates.front_proxy),
        ("certificates.serviceAccount", &certificates.service_account),
        ("certificates.caCertificate", &certificates.ca_certificate),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value.clone()))
    .collect();
    for credential in &request.credentials {
        inputs.push((
            format!("credentials.{}", credential.key),
            String::from_utf8_lossy(&credential.value).into_owned(),
        ));
    }
    inputs
}

/// The names of the inputs holding `needle`, or `none`.
fn holding(inputs: &[(String, String)], needle: &str) -> String {
    let names: Vec<&str> = inputs
        .iter()
        .filter(|(_, value)| value.contains(needle))
        .map(|(name, _)| name.as_str())
        .collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(",")
    }
}

impl ControlPlaneProvider for ControlPlaneDump {
    fn config_schema() -> String {
        r#"{"type": "object"}"#.to_owned()
    }

    fn reconcile_control_plane(
        request: ControlPlaneRequest,
    ) -> Result<ControlPlaneState, ProviderError> {
        let inputs = inputs(&request);
        let message = format!(
            "certificates in: {}; private keys in: {}",
            holding(&inputs, "BEGIN CERTIFICATE"),
            holding(&inputs, "PRIVATE KEY"),
        );
        Ok(ControlPlaneState {
            endpoint: None,
            initialized: false,
            replicas: 0,
            ready_replicas: 0,
            available_replicas: 0,
            up_to_date_replicas: 0,
            version: None,
            externally_managed: true,
            message: Some(message),
            requeue_after_seconds: Some(5),
        })
    }

    fn delete_control_plane(request: ControlPlaneRequest) -> Result<DeleteOutcome, ProviderError> {
        let _ = request;
        Ok(DeleteOutcome::Done)
    }
}

capwasm_provider_sdk::export_control_plane_provider!(ControlPlaneDump);
