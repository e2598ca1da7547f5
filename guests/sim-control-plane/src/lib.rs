//! capwasm control-plane provider for the simulated cloud that
//! `capwasm sim-cloud` serves. The cloud hosts each control plane (see
//! [`api`]): there are no control-plane machines, so the state says it is
//! externally managed. A control plane is named `<namespace>/<name>` after
//! its object, as sim-infrastructure names pools; its idempotency key goes
//! with every PUT, so that the cloud never lets two objects share one.
#![no_std]

extern crate alloc;
// The unit tests run natively, with the standard library's harness.
#[cfg(test)]
extern crate std;

mod api;
mod config;
mod state;

use capwasm_provider_sdk::control_plane::{
    ControlPlaneProvider, ControlPlaneRequest, ControlPlaneState,
};
use capwasm_provider_sdk::log;
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{self, DeleteOutcome, ProviderError};

use api::{Client, PutControlPlane};

struct SimControlPlane;

/// The cloud's name for a control plane: `<namespace>/<name>` of its object.
fn plane_name(object: &types::ObjectRef) -> String {
    format!("{}/{}", object.namespace, object.name)
}

fn client<'a>(
    config: &config::Config,
    name: &'a str,
    credentials: &'a [types::Credential],
) -> Client<'a> {
    Client::new(
        config.control_plane_url(name),
        name,
        types::credential(credentials, "token"),
    )
}

impl ControlPlaneProvider for SimControlPlane {
    fn config_schema() -> String {
        include_str!("schema.json").to_owned()
    }

    fn reconcile_control_plane(
        request: ControlPlaneRequest,
    ) -> Result<ControlPlaneState, ProviderError> {
        let config = config::parse(&request.config)?;
        let name = plane_name(&request.control_plane);
        let plane = client(&config, &name, &request.credentials).put(&PutControlPlane {
            version: &request.version,
            replicas: request.replicas,
            idempotency_key: &request.idempotency_key,
        })?;
        Ok(state::control_plane_state(plane, request.replicas))
    }

    fn delete_control_plane(request: ControlPlaneRequest) -> Result<DeleteOutcome, ProviderError> {
        let config = config::parse(&request.config)?;
        let name = plane_name(&request.control_plane);
        let client = client(&config, &name, &request.credentials);
        if !client.delete()? {
            return Ok(DeleteOutcome::Done);
        }
        log::info("deleting control plane", &[("control_plane", &name)]);
        // The cloud may take its time: done only once it no longer lists it.
        Ok(match client.get()? {
            None => DeleteOutcome::Done,
            Some(_) => DeleteOutcome::InProgress(state::REQUEUE_SECONDS),
        })
    }
}

capwasm_provider_sdk::export_control_plane_provider!(SimControlPlane);

#[cfg(test)]
mod tests {
    use serde_json::Value;

    #[test]
    fn schema_is_a_strict_json_schema_object() {
        let schema: Value =
            serde_json::from_str(include_str!("schema.json")).expect("schema is JSON");
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], serde_json::json!(["endpoint"]));
    }
}
