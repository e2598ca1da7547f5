//! The host side of the WIT contract. The only `bindgen!` of the host: one
//! per world, the bootstrap world reusing the infrastructure world's shared
//! interfaces so both use the same Rust types.

// Generated items carry the WIT doc comments where the WIT has them.
#[allow(missing_docs)]
mod generated {
    wasmtime::component::bindgen!({
        world: "infrastructure-provider",
        path: "../../wit/provider",
        require_store_data_send: true,
        // Calls run as futures: a deadline can end one whatever it waits on.
        exports: { default: async },
        with: {
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
            "wasi:random": wasmtime_wasi::p2::bindings::random,
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
        },
    });

    pub mod bootstrap_world {
        wasmtime::component::bindgen!({
            world: "bootstrap-provider",
            path: "../../wit/provider",
            require_store_data_send: true,
            exports: { default: async },
            with: {
                "capwasm:provider/types": super::capwasm::provider::types,
                "capwasm:provider/log": super::capwasm::provider::log,
                "wasi:io": wasmtime_wasi::p2::bindings::io,
                "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
                "wasi:random": wasmtime_wasi::p2::bindings::random,
            },
        });
    }

    pub mod control_plane_world {
        wasmtime::component::bindgen!({
            world: "control-plane-provider",
            path: "../../wit/provider",
            require_store_data_send: true,
            exports: { default: async },
            with: {
                "capwasm:provider/types": super::capwasm::provider::types,
                "capwasm:provider/log": super::capwasm::provider::log,
                "wasi:io": wasmtime_wasi::p2::bindings::io,
                "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
                "wasi:random": wasmtime_wasi::p2::bindings::random,
                "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            },
        });
    }

    pub mod platform_world {
        wasmtime::component::bindgen!({
            world: "platform-provider",
            path: "../../wit/platform",
            require_store_data_send: true,
            exports: { default: async },
            with: {
                "capwasm:provider/types": super::capwasm::provider::types,
                "capwasm:provider/log": super::capwasm::provider::log,
            },
        });
    }
}

pub(crate) use generated::bootstrap_world::BootstrapProviderIndices;
pub(crate) use generated::capwasm::provider::log;
pub(crate) use generated::control_plane_world::ControlPlaneProviderIndices;

/// The host interface handing a bootstrap provider the bootstrap token the
/// host made for the call (0.1.1 on).
pub mod bootstrap_tokens {
    pub use super::generated::bootstrap_world::capwasm::provider::bootstrap_tokens::BootstrapToken;
    pub(crate) use super::generated::bootstrap_world::capwasm::provider::bootstrap_tokens::{
        Host, add_to_linker,
    };
}
pub(crate) use generated::platform_world::PlatformProviderIndices;

/// Where an exported interface's functions are, and loading them from an
/// instance (which type-checks only that interface's functions).
pub(crate) mod interfaces {
    pub(crate) use super::generated::bootstrap_world::exports::capwasm::provider::bootstrap::GuestIndices as Bootstrap;
    pub(crate) use super::generated::control_plane_world::exports::capwasm::provider::control_planes::GuestIndices as ControlPlanes;
    pub(crate) use super::generated::exports::capwasm::provider::clusters::GuestIndices as Clusters;
    pub(crate) use super::generated::exports::capwasm::provider::machine_pools::GuestIndices as MachinePools;
    pub(crate) use super::generated::exports::capwasm::provider::node_shapes::GuestIndices as NodeShapes;
    pub(crate) use super::generated::exports::capwasm::provider::pool_machines::GuestIndices as PoolMachines;
    pub(crate) use super::generated::exports::capwasm::provider::provider_ids::GuestIndices as ProviderIds;
    pub(crate) use super::generated::platform_world::exports::capwasm::platform::composition::GuestIndices as Composition;
}

/// Types shared by every interface: identities, errors, instances.
pub mod types {
    pub use super::generated::capwasm::provider::types::*;
}

/// The bootstrap interface's request type.
pub mod bootstrap {
    pub use super::generated::bootstrap_world::exports::capwasm::provider::bootstrap::GenerateRequest;
}

/// The machine-pools interface's request and result types.
pub mod machine_pools {
    pub use super::generated::exports::capwasm::provider::machine_pools::{
        DeleteRequest, PoolState, ReconcileRequest,
    };
}

/// The pool-machines interface's request type (0.1.2 on).
pub mod pool_machines {
    pub use super::generated::exports::capwasm::provider::pool_machines::RemoveRequest;
}

/// The node-shapes interface's request and result types (0.1.2 on).
pub mod node_shapes {
    pub use super::generated::exports::capwasm::provider::node_shapes::{
        DescribeRequest, NodeShape,
    };
}

/// The clusters interface's request and result types.
pub mod clusters {
    pub use super::generated::exports::capwasm::provider::clusters::{
        ClusterRequest, ClusterState, FailureDomain,
    };
}

/// The control-planes interface's request and result types (control-plane world).
pub mod control_planes {
    pub use super::generated::control_plane_world::exports::capwasm::provider::control_planes::{
        ClusterCertificates, ControlPlaneRequest, ControlPlaneState,
    };
}

/// The composition interface's request and result types (platform world).
pub mod composition {
    pub use super::generated::platform_world::exports::capwasm::platform::composition::{
        ClusterSummary, Condition, ConditionStatus, GeneratedSecret, NodeGroupSummary, NodeSummary,
        Phase, RenderRequest, Rendered, StatusRequest, ValidateRequest, Verdict,
    };
}
