//! A simulated cloud: the HTTP API the sim-infrastructure and
//! sim-control-plane providers call, with instances that boot, fail to join
//! or terminate on timers, hosted control planes, and optionally a Ready
//! Node per running instance in a workload cluster.
//!
//! It backs the runtime and controller tests, the demo and `capwasm
//! sim-cloud`, so it behaves like a small real cloud rather than a mock:
//!
//! ```text
//! POST   /v1/regions/{region}/instances          201 new, 200 same requestToken still listed
//! GET    /v1/regions/{region}/instances?pool=P   200 {"instances": [...]}, oldest first
//! DELETE /v1/regions/{region}/instances/{id}     202 terminating, 404 unknown
//! GET    /v1/instance-types/{name}               200 capacity, architecture; 404 unknown
//! PUT    /v1/control-planes/{name}               200 created or updated, with its state
//! GET    /v1/control-planes/{name}               200 its state, 404 unknown
//! DELETE /v1/control-planes/{name}               202 deleting (gone at once), 404 unknown
//! ```
//!
//! - Instances are `pending` for [`Settings::boot_delay`], then `running`,
//!   and are listed as `terminating` for [`Settings::termination_delay`]
//!   after a delete; then they are gone and their request token may create
//!   a new instance.
//! - Bootstrap data is handed to the machine, not read by the API: data that
//!   is not base64 is refused (400), but data a machine cannot run (empty,
//!   cloud-config without `#cloud-config`, a script without `#!`, Ignition
//!   that is not an Ignition config) creates an instance that ends `failed`,
//!   the way a VM whose node never joins looks on a real cloud.
//! - Everything is bounded: request bodies ([`Settings::max_body_bytes`],
//!   413), bootstrap data (400), and instances ([`Settings::max_instances`],
//!   429 with Retry-After, so providers retry).
//! - A control plane ([`PutControlPlane`], [`ControlPlane`]) is named
//!   `<namespace>/<name>` (one path segment, the `/` encoded) or `<name>`,
//!   and holds a loopback port for its API server from its creation on
//!   (for now a record only: nothing listens there). Its replicas start
//!   like instances boot. A new version leaves them out of date; every GET
//!   or PUT then replaces the oldest one, once none is starting. A version
//!   that is not `vX.Y.Z` or zero replicas get 400, a lower minor than a
//!   replica runs 409 `VersionDowngrade`, another idempotency key for the
//!   same name 409 `ControlPlaneNameInUse`, and more than
//!   [`Settings::max_control_planes`] 429.
//! - With [`Settings::bearer_token`], requests without it get 401.
//! - [`SimCloud::set_faults`] makes a share of requests fail: 503, an answer
//!   held past any timeout, or one cut off (the last two after handling).
//!
//! Errors are JSON [`ErrorBody`]s with a CamelCase code.
#![warn(missing_docs)]
// Input reaches every path of the operator: no unwrap, expect or panic on any of them.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod api;
mod api_error;
mod bootstrap;
mod cloud;
mod control_planes;
mod error;
mod faults;
pub mod instance_types;
mod inventory;
mod nodes;
mod pods;
mod server;

pub use api::{
    Address, AddressType, BootstrapFormat, ControlPlane, ControlPlaneEndpoint, CreateInstance,
    ErrorBody, Instance, InstanceList, InstanceState, PutControlPlane,
};
pub use bootstrap::JoinFailure;
pub use cloud::{Settings, SimCloud};
pub use error::Error;
pub use faults::{Faults, HANG, Injected};
pub use inventory::InstanceRecord;
pub use server::RunningSimCloud;
