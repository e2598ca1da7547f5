//! Bindings generated from `wit/provider` and `wit/platform`: the only `wit_bindgen::generate!`
//! calls among the guests.
//!
//! The infrastructure world is generated first and owns every imported
//! interface; the bootstrap and control-plane worlds reuse those through
//! `with`, so all worlds share one set of types (one `ProviderError`, one
//! `log`, one `wasi:http` for the SDK's `http` module). Each
//! world's export macro is public, so the component type of the world a
//! provider exports is emitted in the provider's crate, not here.
#![allow(unsafe_code, missing_docs, clippy::all, clippy::pedantic)]

/// The `infrastructure-provider` world and every imported interface.
pub mod infrastructure {
    wit_bindgen::generate!({
        world: "infrastructure-provider",
        path: "wit/provider",
        pub_export_macro: true,
        export_macro_name: "export_infrastructure_world",
        default_bindings_module: "$crate::bindings::infrastructure",
        generate_all,
    });
}

/// The `bootstrap-provider` world; its imports are the ones above.
pub mod bootstrap {
    wit_bindgen::generate!({
        world: "bootstrap-provider",
        path: "wit/provider",
        pub_export_macro: true,
        export_macro_name: "export_bootstrap_world",
        default_bindings_module: "$crate::bindings::bootstrap",
        with: {
            "capwasm:provider/types@0.1.2": crate::bindings::infrastructure::capwasm::provider::types,
            "capwasm:provider/log@0.1.2": crate::bindings::infrastructure::capwasm::provider::log,
            "wasi:clocks/monotonic-clock@0.2.12": crate::bindings::infrastructure::wasi::clocks::monotonic_clock,
            "wasi:clocks/wall-clock@0.2.12": crate::bindings::infrastructure::wasi::clocks::wall_clock,
            "wasi:random/random@0.2.12": crate::bindings::infrastructure::wasi::random::random,
            "wasi:io/poll@0.2.12": crate::bindings::infrastructure::wasi::io::poll,
        },
    });
}

/// The `control-plane-provider` world; its imports are the ones above,
/// `wasi:http` and the `wasi:io` it builds on included, so `crate::http`
/// (written against the infrastructure bindings) serves this world too.
pub mod control_plane {
    wit_bindgen::generate!({
        world: "control-plane-provider",
        path: "wit/provider",
        pub_export_macro: true,
        export_macro_name: "export_control_plane_world",
        default_bindings_module: "$crate::bindings::control_plane",
        with: {
            "capwasm:provider/types@0.1.2": crate::bindings::infrastructure::capwasm::provider::types,
            "capwasm:provider/log@0.1.2": crate::bindings::infrastructure::capwasm::provider::log,
            "wasi:http/types@0.2.12": crate::bindings::infrastructure::wasi::http::types,
            "wasi:http/outgoing-handler@0.2.12": crate::bindings::infrastructure::wasi::http::outgoing_handler,
            "wasi:io/error@0.2.12": crate::bindings::infrastructure::wasi::io::error,
            "wasi:io/poll@0.2.12": crate::bindings::infrastructure::wasi::io::poll,
            "wasi:io/streams@0.2.12": crate::bindings::infrastructure::wasi::io::streams,
            "wasi:clocks/monotonic-clock@0.2.12": crate::bindings::infrastructure::wasi::clocks::monotonic_clock,
            "wasi:clocks/wall-clock@0.2.12": crate::bindings::infrastructure::wasi::clocks::wall_clock,
            "wasi:random/random@0.2.12": crate::bindings::infrastructure::wasi::random::random,
        },
    });
}

/// The `platform-provider` world (package `capwasm:platform`); its imports
/// are the ones above.
pub mod platform {
    wit_bindgen::generate!({
        world: "platform-provider",
        path: "wit/platform",
        pub_export_macro: true,
        export_macro_name: "export_platform_world",
        default_bindings_module: "$crate::bindings::platform",
        with: {
            "capwasm:provider/types@0.1.2": crate::bindings::infrastructure::capwasm::provider::types,
            "capwasm:provider/log@0.1.2": crate::bindings::infrastructure::capwasm::provider::log,
        },
    });
}
