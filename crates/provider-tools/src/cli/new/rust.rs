//! The Rust project of each world it binds.

use super::{File, Refusal, SDK_VERSION, SdkSource, WorldArg, fill, quoted, rewrite};

macro_rules! source {
    ($guest:literal, $file:literal) => {
        File::new(
            concat!("src/", $file),
            include_str!(concat!("../../../../../guests/", $guest, "/src/", $file)),
        )
    };
}

const SERDE: &str =
    r#"serde = { version = "1", default-features = false, features = ["derive", "alloc"] }"#;
const SERDE_JSON: &str =
    r#"serde_json = { version = "1", default-features = false, features = ["alloc"] }"#;
const BASE64: &str =
    r#"base64 = { version = "0.22", default-features = false, features = ["alloc"] }"#;
const VERSION_LABEL: &str = "\n[features]\n# Labels what it makes with the provider's version (capwasm's hot-swap tests build\n# this source twice); drop it with the code it guards.\nversion-label = []\n";

pub(super) fn files(name: &str, world: WorldArg, sdk: &SdkSource) -> Result<Vec<File>, Refusal> {
    let (mut files, features, dependencies) = match world {
        WorldArg::Bootstrap => (
            vec![
                source!("kubeadm-bootstrap", "lib.rs"),
                source!("kubeadm-bootstrap", "config.rs"),
                source!("kubeadm-bootstrap", "cloud_config.rs"),
                source!("kubeadm-bootstrap", "yaml.rs"),
                source!("kubeadm-bootstrap", "schema.json"),
            ],
            "",
            format!("{SERDE}\n\n[dev-dependencies]\n{SERDE_JSON}\n"),
        ),
        WorldArg::Infrastructure => {
            let mut lib = source!("sim-infrastructure", "lib.rs");
            lib.text = rewrite(
                "rust infrastructure",
                &lib.text,
                "capwasm_provider_sdk::export_infrastructure_provider!(\n    SimInfrastructure,\n    name = \"sim-infrastructure\"\n);",
                "capwasm_provider_sdk::export_infrastructure_provider!(SimInfrastructure);",
            )?;
            (
                vec![
                    lib,
                    source!("sim-infrastructure", "api.rs"),
                    source!("sim-infrastructure", "config.rs"),
                    source!("sim-infrastructure", "pool.rs"),
                    source!("sim-infrastructure", "schema.json"),
                ],
                VERSION_LABEL,
                format!("{SERDE}\n{SERDE_JSON}\n{BASE64}\n"),
            )
        }
        WorldArg::Platform => {
            let mut lib = source!("sim-platform", "lib.rs");
            lib.text = rewrite(
                "rust platform",
                &lib.text,
                "capwasm_provider_sdk::export_platform_provider!(SimPlatform, name = \"sim-platform\");",
                "capwasm_provider_sdk::export_platform_provider!(SimPlatform);",
            )?;
            (
                vec![
                    lib,
                    source!("sim-platform", "document.rs"),
                    source!("sim-platform", "render.rs"),
                    source!("sim-platform", "rollup.rs"),
                    source!("sim-platform", "versions.rs"),
                    source!("sim-platform", "schema.json"),
                ],
                VERSION_LABEL,
                format!("{SERDE_JSON}\n"),
            )
        }
    };
    let sdk_source = match sdk {
        SdkSource::Registry => String::new(),
        SdkSource::Local(path) => format!(
            "\n# The SDK from a local copy (capwasm provider new --sdk), at the version\n# Cargo.toml asks for.\n[patch.crates-io]\ncapwasm-provider-sdk = {{ path = {} }}\n",
            quoted(path)
        ),
    };
    files.push(File::new(
        "Cargo.toml",
        fill(
            include_str!("../../../templates/rust/Cargo.toml"),
            &[
                ("name", name),
                ("sdk_version", SDK_VERSION),
                ("features", features),
                ("dependencies", &dependencies),
            ],
        ),
    ));
    files.push(File::new(
        ".cargo/config.toml",
        fill(
            include_str!("../../../templates/rust/config.toml"),
            &[("sdk_source", &sdk_source)],
        ),
    ));
    files.push(File::new(
        ".gitignore",
        include_str!("../../../templates/rust/gitignore"),
    ));
    Ok(files)
}
