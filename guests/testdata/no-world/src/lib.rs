//! Test component: a well-formed component that exports no capwasm
//! provider world, only `greet`. The host must refuse it when loading and
//! say what it exports.

// Generated bindings and exports: undocumented items and `unsafe` glue.
#[allow(unsafe_code, missing_docs, clippy::all, clippy::pedantic)]
mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "greeter",
        default_bindings_module: "crate::bindings",
    });

    struct Greeter;

    impl Guest for Greeter {
        fn greet(name: String) -> String {
            format!("hello, {name}")
        }
    }

    export!(Greeter);
}
