//! Test component: a bootstrap provider built against
//! `capwasm:provider@0.2.0` (its own copy of the WIT, in `wit/`). The host
//! implements 0.1 and must refuse it by that version when loading.
//!
//! Not built on the SDK, which implements the supported version; so this is
//! one of the few crates with its own `wit_bindgen::generate!`.

// Generated bindings and exports: undocumented items and `unsafe` glue.
#[allow(unsafe_code, missing_docs, clippy::all, clippy::pedantic)]
mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "bootstrap-provider",
        default_bindings_module: "crate::bindings",
    });

    struct NextVersion;

    impl Guest for NextVersion {
        fn info() -> ProviderInfo {
            ProviderInfo {
                name: env!("CARGO_PKG_NAME").into(),
                version: env!("CARGO_PKG_VERSION").into(),
            }
        }

        fn config_schema() -> String {
            r#"{"type": "object"}"#.into()
        }
    }

    impl exports::capwasm::provider::bootstrap::Guest for NextVersion {
        fn generate(_config: String) -> Result<String, String> {
            Ok("#cloud-config\n".into())
        }
    }

    export!(NextVersion);
}
