//! The project's README: what it is, what to change, the commands.

use std::fmt::Write as _;

use super::files::fill;
use super::{Language, WorldArg};

/// The project's README: what it is, what to change, the commands.
pub(super) fn readme(name: &str, world: WorldArg, language: Language) -> String {
    let wasm = match language {
        Language::Rust => format!(
            "target/wasm32-wasip2/release/{}.wasm",
            name.replace('-', "_")
        ),
        Language::Python | Language::Typescript => format!("build/{name}.wasm"),
    };
    let build = match language {
        Language::Rust => {
            "cargo build --release              # rustup target add wasm32-wasip2, once"
        }
        Language::Python => "./build.sh                         # python3 -m venv, componentize-py",
        Language::Typescript => {
            "npm install && npm run build       # tsc, esbuild, componentize-js"
        }
    };
    let fixture = match world {
        WorldArg::Bootstrap => "kubeadm-generate-join.json",
        WorldArg::Infrastructure => "sim-owns.json",
        // A render is held to the kinds its module allows: `provider test`
        // needs an --allow-kind for each, so the README shows a validate.
        WorldArg::Platform => "sim-platform-validate-one-minor.json",
    };
    let what = match world {
        WorldArg::Bootstrap => {
            "capwasm's kubeadm-bootstrap: the cloud-config that runs `kubeadm join` (or `init`) on a new node"
        }
        WorldArg::Infrastructure => {
            "capwasm's sim-infrastructure: pools of instances in the simulated cloud `capwasm sim-cloud` serves"
        }
        WorldArg::Platform => {
            "capwasm's sim-platform: a PlatformCluster's node groups as MachinePools served by kubeadm-bootstrap and sim-infrastructure"
        }
    };
    let conformance = match world {
        WorldArg::Infrastructure => {
            "For the infrastructure world `conformance` runs capwasm's scenarios against a simulated cloud it starts (scaling, removing chosen instances, repeats, lost records, deletion, credentials, a full or unreachable cloud): they hold while the provider talks to the simulated cloud. Once it talks to yours, hold it to fixtures instead, and test it against your cloud."
        }
        WorldArg::Bootstrap | WorldArg::Platform => {
            "For this world `conformance` checks the fixtures that say what they expect; with none it has nothing to check and says so."
        }
    };
    let pool = match world {
        WorldArg::Bootstrap => {
            "name this provider in the WasmBootstrapConfig's `spec.provider`, with the config its schema takes."
        }
        WorldArg::Infrastructure => {
            "name this provider in the WasmCluster's and WasmMachinePool's `spec.provider`, with the config its schema takes, and give its ProviderModule the hosts it reaches (`allowedHosts`) and the credentials it needs (`credentialsSecret`, `requestAuth`)."
        }
        WorldArg::Platform => {
            "for a platform provider, docs/platform-clusters.md has the ClusterTemplate naming it and the PlatformCluster whose node groups become pools."
        }
    };
    let change = change(world, language);
    let mut out = fill(
        include_str!("../../../templates/README.md"),
        &[
            ("name", name),
            ("world", world.as_str()),
            ("language", language.title()),
            ("what", what),
            ("change", &change),
            ("build", build),
            ("wasm", &wasm),
            ("fixture", fixture),
            ("conformance", conformance),
            ("pool", pool),
        ],
    );
    if language == Language::Rust {
        let _ = write!(
            out,
            "\nUnit tests run natively: `cargo test --target $(rustc -vV | sed -n 's/^host: //p')`.\n"
        );
    }
    out
}

/// What to change, by world and language.
fn change(world: WorldArg, language: Language) -> String {
    let (schema, logic, glue) = match (language, world) {
        (Language::Rust, WorldArg::Bootstrap) => (
            "src/schema.json",
            "src/config.rs (parsing `spec.config`) and src/cloud_config.rs (what it renders)",
            "src/lib.rs (the trait impl and the export macro)",
        ),
        (Language::Rust, WorldArg::Infrastructure) => (
            "src/schema.json",
            "src/api.rs (the cloud's API: replace with your cloud's), src/config.rs and src/pool.rs (ordinals and request tokens that make a repeated call create nothing twice)",
            "src/lib.rs (the trait impl and the export macro)",
        ),
        (Language::Rust, WorldArg::Platform) => (
            "src/schema.json",
            "src/render.rs (the objects of a cluster), src/rollup.rs (its phase) and src/versions.rs (which template changes are safe)",
            "src/lib.rs (the trait impl and the export macro)",
        ),
        (Language::Python, WorldArg::Bootstrap) => (
            "src/schema.json",
            "src/kubeadm.py (parsing `spec.config` and rendering), with its tests in tests/",
            "src/app.py (the world's classes)",
        ),
        (Language::Python, _) => (
            "src/schema.json",
            "src/sim.py (the config and the pool arithmetic) and the cloud calls in src/app.py, with tests in tests/",
            "src/app.py (the world's classes)",
        ),
        (Language::Typescript, WorldArg::Bootstrap) => (
            "src/schema.json",
            "src/kubeadm.ts (parsing `spec.config` and rendering), with its tests in test/",
            "src/app.ts (the world's exports, typed by `typeof World.*`)",
        ),
        (Language::Typescript, _) => (
            "src/schema.json",
            "src/app.js: its config parsing and the cloud calls (rename it app.ts to type-check it)",
            "the exports at the end of src/app.js",
        ),
    };
    let info = match language {
        Language::Rust => "come from Cargo.toml's package",
        Language::Python => "are written in `info` in src/app.py",
        Language::Typescript => "are written in `info` in src/app",
    };
    format!(
        "- the config schema, {schema}: what `spec.config` of the objects it serves may hold; the host checks it before every call;\n- the logic, {logic};\n- the wiring, {glue}: change it only for a new call;\n- the name and version `info` reports {info}."
    )
}
