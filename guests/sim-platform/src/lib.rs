//! capwasm platform provider: a platform cluster from a template, as
//! azimuth composes one, on capwasm's own providers. Each node group
//! becomes a MachinePool with its WasmBootstrapConfig (kubeadm-bootstrap)
//! and WasmMachinePool (sim-infrastructure); autoscaling bounds become the
//! cluster-autoscaler's annotations; the phase rolls up in azimuth's order
//! ([`rollup`]); a template change may not downgrade, skip a minor
//! version, or run ahead of the oldest kubelet by more than one minor
//! ([`versions`]).
//!
//! `sim-platform-v2` builds this same source as version 0.2.0 with the
//! `version-label` feature: every MachinePool it renders carries its
//! version, so that a hot swap shows on the objects.
#![no_std]

extern crate alloc;
// The unit tests run natively, with the standard library's harness.
#[cfg(test)]
extern crate std;

mod document;
mod render;
mod rollup;
mod versions;

use capwasm_provider_sdk::platform::{
    ClusterSummary, PlatformProvider, RenderRequest, Rendered, StatusRequest, ValidateRequest,
    Verdict,
};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::ProviderError;

struct SimPlatform;

impl PlatformProvider for SimPlatform {
    fn config_schema() -> String {
        include_str!("schema.json").to_owned()
    }

    fn render(request: RenderRequest) -> Result<Rendered, ProviderError> {
        render::render(&request)
    }

    fn status(request: StatusRequest) -> Result<ClusterSummary, ProviderError> {
        rollup::status(&request)
    }

    fn validate(request: ValidateRequest) -> Result<Verdict, ProviderError> {
        versions::validate(&request)
    }
}

capwasm_provider_sdk::export_platform_provider!(SimPlatform, name = "sim-platform");
