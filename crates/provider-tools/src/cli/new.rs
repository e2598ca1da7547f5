//! `capwasm provider new`: a provider project that builds and passes
//! `capwasm provider conformance` as written, outside this repository.
//!
//! Each world's starting point is a provider of this repository in the
//! language asked for — kubeadm-bootstrap, sim-infrastructure,
//! sim-platform — its sources embedded here as the guests have them, so a
//! project is always one the test suite holds to the same checks. The SDK
//! is a dependency by version; `--sdk` points that dependency at a local
//! copy of the packaged SDK (before it is published, or in tests).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

/// The SDKs' version: capwasm's own (Cargo and npm; PEP 440 writes it `0.2.0.dev0`).
pub const SDK_VERSION: &str = "0.2.0-dev";
/// [`SDK_VERSION`] as PEP 440 normalises it.
pub const PYTHON_SDK_VERSION: &str = "0.2.0.dev0";

const AFTER_HELP: &str = "\
Worlds and languages: bootstrap and infrastructure in rust, python and typescript; platform
in rust (the Python and TypeScript SDKs do not bind the platform world yet).

The project starts as a working provider of its world from capwasm's own: bootstrap as
kubeadm-bootstrap (a kubeadm join/init cloud-config), infrastructure as sim-infrastructure
(instances in the simulated cloud of `capwasm sim-cloud`), platform as sim-platform. Its
README says what to change and the commands from building it to a pool.

--sdk SOURCE points the SDK dependency, by version all the same, at a local copy:
  rust        a directory holding the SDK crate (`cargo package` unpacks one into
              target/package/capwasm-provider-sdk-VERSION): a [patch.crates-io] in
              .cargo/config.toml
  python      a directory holding its wheel (guests/python/sdk/package.sh writes one):
              --find-links in requirements.txt
  typescript  its npm tarball (guests/js/sdk/pack.sh writes one): a file: dependency
Without it the SDK comes from crates.io, PyPI or npm.

DIR (by default ./NAME) must not exist or be empty: nothing is written into a directory
that holds anything.";

/// Flags of `capwasm provider new`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The provider's name: lowercase letters, digits and `-`, starting
    /// with a letter (the package's name, and the ProviderModule's).
    #[arg(value_name = "NAME")]
    name: String,
    /// The WIT world it implements.
    #[arg(long, value_enum)]
    world: WorldArg,
    /// The language it is written in.
    #[arg(long, value_enum)]
    language: Language,
    /// Where to write it (by default ./NAME); must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// A local copy of the packaged SDK to depend on (see below).
    #[arg(long, value_name = "SOURCE")]
    sdk: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum WorldArg {
    Bootstrap,
    Infrastructure,
    Platform,
}

impl WorldArg {
    fn as_str(self) -> &'static str {
        match self {
            Self::Bootstrap => "bootstrap",
            Self::Infrastructure => "infrastructure",
            Self::Platform => "platform",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Language {
    Rust,
    Python,
    Typescript,
}

impl Language {
    fn title(self) -> &'static str {
        match self {
            Self::Rust => "Rust",
            Self::Python => "Python",
            Self::Typescript => "TypeScript",
        }
    }
}

/// Why a project cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The name cannot be a package's.
    #[error(
        "{0:?} cannot name a provider: use 1 to 63 lowercase letters, digits and '-', starting with a letter and not ending with '-'"
    )]
    Name(String),
    /// The language's SDK does not bind the world.
    #[error(
        "the {language} SDK does not bind the {world} world yet: write a {world} provider in Rust (--language rust)"
    )]
    Unsupported {
        /// The world asked for.
        world: &'static str,
        /// The language asked for.
        language: &'static str,
    },
    /// The target directory holds something.
    #[error("{0} is not empty: give a new or empty directory (--dir); nothing was written")]
    NotEmpty(String),
    /// A path cannot be written into the project's files.
    #[error("{0} is not valid UTF-8: it cannot be written into the project's files")]
    Path(String),
    /// A template lost the text the generator rewrites (a bug here).
    #[error("the template {0} no longer has the text it is rewritten at: {1:?}")]
    Template(&'static str, &'static str),
}

/// One file of a project.
struct File {
    path: &'static str,
    text: String,
    executable: bool,
}

impl File {
    fn new(path: &'static str, text: impl Into<String>) -> Self {
        Self {
            path,
            text: text.into(),
            executable: false,
        }
    }
}

/// Where the SDK comes from, as each language's files write it.
enum SdkSource {
    Registry,
    Local(String),
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    let sdk = match &args.sdk {
        None => SdkSource::Registry,
        Some(path) => SdkSource::Local(local_sdk(path, args.language)?),
    };
    let files = project(&args.name, args.world, args.language, &sdk)?;
    write(&dir, &files)?;
    let shown = dir.display();
    println!(
        "wrote {} ({} world, {}) into {shown}: {} files; its README.md says what to change and how to build, test and ship it",
        args.name,
        args.world.as_str(),
        args.language.title(),
        files.len()
    );
    Ok(())
}

/// The absolute path of a local SDK copy, checked to be what `language` takes.
fn local_sdk(path: &Path, language: Language) -> anyhow::Result<String> {
    let absolute = std::fs::canonicalize(path)
        .with_context(|| format!("--sdk {}: cannot be read", path.display()))?;
    let ok = match language {
        Language::Rust => absolute.join("Cargo.toml").is_file(),
        Language::Python => absolute.is_dir(),
        Language::Typescript => absolute.is_file(),
    };
    if !ok {
        bail!(
            "--sdk {}: for {} give {}",
            path.display(),
            language.title(),
            match language {
                Language::Rust => "a directory holding the SDK crate's Cargo.toml",
                Language::Python => "a directory holding the SDK's wheel",
                Language::Typescript => "the SDK's npm tarball (.tgz)",
            }
        );
    }
    absolute
        .to_str()
        .map(str::to_owned)
        .ok_or_else(|| Refusal::Path(absolute.display().to_string()).into())
}

/// Whether `name` can name a crate, a Python and an npm package, and a
/// Kubernetes object alike.
fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes[0].is_ascii_lowercase()
        && bytes[bytes.len() - 1] != b'-'
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// Writes `files` into `dir`, which must not exist or be empty. They are
/// written into a directory beside it first and moved into place whole, so
/// a failure part-way leaves nothing behind.
fn write(dir: &Path, files: &[File]) -> anyhow::Result<()> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Refusal::NotEmpty(dir.display().to_string()).into());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(Refusal::NotEmpty(dir.display().to_string()).into());
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot make {}", parent.display()))?;
    let stage = tempfile::Builder::new()
        .prefix(".capwasm-provider-new-")
        .tempdir_in(&parent)
        .with_context(|| format!("cannot write into {}", parent.display()))?;
    for file in files {
        let path = stage.path().join(file.path);
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder)
                .with_context(|| format!("cannot make {}", folder.display()))?;
        }
        std::fs::write(&path, &file.text)
            .with_context(|| format!("cannot write {}", path.display()))?;
        if file.executable {
            executable(&path)?;
        }
    }
    // An empty directory is replaced by the rename.
    std::fs::rename(stage.path(), dir)
        .with_context(|| format!("cannot move the project into {}", dir.display()))?;
    // Renamed away: nothing is left for the guard to remove.
    let _ = stage.keep();
    Ok(())
}

#[cfg(unix)]
fn executable(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

#[cfg(not(unix))]
fn executable(_: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// `text` with every `{{key}}` replaced by its value.
fn fill(text: &str, values: &[(&str, &str)]) -> String {
    let mut out = text.to_owned();
    for (key, value) in values {
        out = out.replace(&format!("{{{{{key}}}}}"), value);
    }
    out
}

/// `text` with `from` replaced by `to`, failing if `from` is not in it:
/// the embedded sources are the guests', and a rewrite that no longer
/// applies must not yield a project that silently differs.
fn rewrite(
    template: &'static str,
    text: &str,
    from: &'static str,
    to: &str,
) -> Result<String, Refusal> {
    if text.contains(from) {
        Ok(text.replace(from, to))
    } else {
        Err(Refusal::Template(template, from))
    }
}

/// A string as a TOML or JSON string literal (the two agree for paths).
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// Every file of the project.
fn project(
    name: &str,
    world: WorldArg,
    language: Language,
    sdk: &SdkSource,
) -> Result<Vec<File>, Refusal> {
    if !valid_name(name) {
        return Err(Refusal::Name(name.to_owned()));
    }
    let mut files = match (language, world) {
        (Language::Rust, _) => rust::files(name, world, sdk)?,
        (Language::Python | Language::Typescript, WorldArg::Platform) => {
            return Err(Refusal::Unsupported {
                world: world.as_str(),
                language: language.title(),
            });
        }
        (Language::Python, _) => python::files(name, world, sdk)?,
        (Language::Typescript, _) => typescript::files(name, world, sdk)?,
    };
    files.extend(fixtures(world));
    files.push(File::new(
        "deploy/providermodule.yaml",
        fill(
            include_str!("../../templates/providermodule.yaml"),
            &[
                ("name", name),
                ("world", world.as_str()),
                ("capabilities", capabilities(world)),
            ],
        ),
    ));
    files.push(File::new("README.md", readme(name, world, language)));
    Ok(files)
}

/// The request fixtures the project starts with: the examples of its
/// world, those with an `"expect"` held by `conformance --fixtures`.
fn fixtures(world: WorldArg) -> Vec<File> {
    macro_rules! fixture {
        ($name:literal) => {
            File::new(
                concat!("fixtures/", $name),
                include_str!(concat!("../../../../examples/requests/", $name)),
            )
        };
    }
    match world {
        WorldArg::Bootstrap => vec![
            fixture!("kubeadm-generate-join.json"),
            fixture!("kubeadm-generate-no-endpoint.json"),
            fixture!("kubeadm-generate-invalid-token.json"),
            fixture!("kubeadm-generate-bad-version.json"),
        ],
        WorldArg::Infrastructure => vec![
            fixture!("sim-reconcile-pool.json"),
            fixture!("sim-reconcile-pool-no-bootstrap.json"),
            fixture!("sim-delete-pool.json"),
            fixture!("sim-reconcile-cluster.json"),
            fixture!("sim-provider-id.json"),
            fixture!("sim-owns.json"),
        ],
        WorldArg::Platform => vec![
            fixture!("sim-platform-render.json"),
            fixture!("sim-platform-render-bad-version.json"),
            fixture!("sim-platform-status.json"),
            fixture!("sim-platform-status-upgrading.json"),
            fixture!("sim-platform-validate-one-minor.json"),
            fixture!("sim-platform-validate-two-minors.json"),
        ],
    }
}

/// The ProviderModule's capabilities for the world's starting point.
fn capabilities(world: WorldArg) -> &'static str {
    match world {
        WorldArg::Bootstrap => "",
        WorldArg::Infrastructure => {
            "  capabilities:\n    providerIDPrefix: \"sim://\"   # the providerIDs its instances carry\n    allowedHosts: [\"sim-cloud.example:8081\"]   # the only hosts it may reach\n"
        }
        WorldArg::Platform => {
            "  capabilities:\n    # the kinds its renders may make (\"\" is the core group)\n    allowedKinds:\n    - { group: cluster.x-k8s.io, kind: Cluster }\n    - { group: cluster.x-k8s.io, kind: MachinePool }\n    - { group: infrastructure.cluster.x-k8s.io, kind: WasmCluster }\n    - { group: infrastructure.cluster.x-k8s.io, kind: WasmMachinePool }\n    - { group: bootstrap.cluster.x-k8s.io, kind: WasmBootstrapConfig }\n    - { group: \"\", kind: Secret }\n"
        }
    }
}

/// The project's README: what it is, what to change, the commands.
fn readme(name: &str, world: WorldArg, language: Language) -> String {
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
            "For the infrastructure world `conformance` runs capwasm's scenarios against a simulated cloud it starts (scaling, repeats, lost records, deletion, credentials, a full or unreachable cloud): they hold while the provider talks to the simulated cloud. Once it talks to yours, hold it to fixtures instead, and test it against your cloud."
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
        include_str!("../../templates/README.md"),
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

mod rust {
    use super::{File, Refusal, SDK_VERSION, SdkSource, WorldArg, fill, quoted, rewrite};

    macro_rules! source {
        ($guest:literal, $file:literal) => {
            File::new(
                concat!("src/", $file),
                include_str!(concat!("../../../../guests/", $guest, "/src/", $file)),
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

    pub(super) fn files(
        name: &str,
        world: WorldArg,
        sdk: &SdkSource,
    ) -> Result<Vec<File>, Refusal> {
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
                include_str!("../../templates/rust/Cargo.toml"),
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
                include_str!("../../templates/rust/config.toml"),
                &[("sdk_source", &sdk_source)],
            ),
        ));
        files.push(File::new(
            ".gitignore",
            include_str!("../../templates/rust/gitignore"),
        ));
        Ok(files)
    }
}

mod python {
    use super::{File, PYTHON_SDK_VERSION, Refusal, SdkSource, WorldArg, fill, rewrite};

    macro_rules! source {
        ($to:literal, $guest:literal, $file:literal) => {
            File::new(
                concat!($to, "/", $file),
                include_str!(concat!("../../../../guests/python/", $guest, "/", $file)),
            )
        };
    }

    pub(super) fn files(
        name: &str,
        world: WorldArg,
        sdk: &SdkSource,
    ) -> Result<Vec<File>, Refusal> {
        let info = format!("exports.info({name:?}, \"0.1.0\")");
        let mut files = match world {
            WorldArg::Bootstrap => {
                let mut app = source!("src", "kubeadm-bootstrap", "app.py");
                app.text = rewrite(
                    "python bootstrap",
                    &app.text,
                    "exports.info(\"kubeadm-bootstrap-python\", \"0.1.0\")",
                    &info,
                )?;
                vec![
                    app,
                    source!("src", "kubeadm-bootstrap", "kubeadm.py"),
                    source!("src", "kubeadm-bootstrap", "yamlout.py"),
                    File::new(
                        "src/schema.json",
                        include_str!("../../../../guests/kubeadm-bootstrap/src/schema.json"),
                    ),
                    source!("tests", "kubeadm-bootstrap", "test_kubeadm.py"),
                ]
            }
            // Platform is refused before this.
            WorldArg::Infrastructure | WorldArg::Platform => {
                let mut app = source!("src", "sim-infrastructure", "app.py");
                app.text = rewrite(
                    "python infrastructure",
                    &app.text,
                    "exports.info(\"sim-infrastructure-python\", \"0.1.0\")",
                    &info,
                )?;
                vec![
                    app,
                    source!("src", "sim-infrastructure", "sim.py"),
                    File::new(
                        "src/schema.json",
                        include_str!("../../../../guests/sim-infrastructure/src/schema.json"),
                    ),
                    source!("tests", "sim-infrastructure", "test_sim.py"),
                ]
            }
        };
        let sdk_source = match sdk {
            SdkSource::Registry => String::new(),
            // pip reads options in a requirements file; the index is still
            // asked for componentize-py.
            SdkSource::Local(path) => format!("--find-links {path}\n"),
        };
        let values = [
            ("name", name),
            ("world", world.as_str()),
            ("sdk_version", PYTHON_SDK_VERSION),
            ("sdk_source", sdk_source.as_str()),
        ];
        files.push(File::new(
            "requirements.txt",
            fill(
                include_str!("../../templates/python/requirements.txt"),
                &values,
            ),
        ));
        let mut build = File::new(
            "build.sh",
            fill(include_str!("../../templates/python/build.sh"), &values),
        );
        build.executable = true;
        files.push(build);
        files.push(File::new(
            ".gitignore",
            include_str!("../../templates/python/gitignore"),
        ));
        Ok(files)
    }
}

mod typescript {
    use super::{File, Refusal, SDK_VERSION, SdkSource, WorldArg, fill, quoted, rewrite};

    macro_rules! source {
        ($to:literal, $guest:literal, $file:literal) => {
            File::new(
                concat!($to, "/", $file),
                include_str!(concat!("../../../../guests/js/", $guest, "/", $file)),
            )
        };
    }

    /// The guests import the SDK by path; a project imports the package.
    const IMPORTS: [(&str, &str); 4] = [
        ("'../sdk/capwasm-provider.ts'", "'capwasm-provider-sdk'"),
        ("'../sdk/exports.ts'", "'capwasm-provider-sdk/exports'"),
        ("'../sdk/log.ts'", "'capwasm-provider-sdk/log'"),
        ("'../sdk/http.ts'", "'capwasm-provider-sdk/http'"),
    ];

    /// `text` importing the SDK package; every import of it is rewritten.
    fn imports(template: &'static str, text: &str) -> Result<String, Refusal> {
        let mut out = text.to_owned();
        for (from, to) in IMPORTS {
            out = out.replace(from, to);
        }
        if out.contains("'../sdk/") {
            return Err(Refusal::Template(template, "'../sdk/"));
        }
        Ok(out)
    }

    pub(super) fn files(
        name: &str,
        world: WorldArg,
        sdk: &SdkSource,
    ) -> Result<Vec<File>, Refusal> {
        let info = format!("({{ name: '{name}', version: '0.1.0' }})");
        let (mut files, main, has_tests) = match world {
            WorldArg::Bootstrap => {
                let mut app = source!("src", "kubeadm-bootstrap", "app.ts");
                app.text = rewrite(
                    "typescript bootstrap",
                    &app.text,
                    "({ name: 'kubeadm-bootstrap-js', version: '0.1.0' })",
                    &info,
                )?;
                let mut tests = source!("test", "kubeadm-bootstrap", "kubeadm.test.ts");
                tests.text = rewrite(
                    "typescript bootstrap tests",
                    &tests.text,
                    "'./kubeadm.ts'",
                    "'../src/kubeadm.ts'",
                )?;
                (
                    vec![
                        app,
                        source!("src", "kubeadm-bootstrap", "kubeadm.ts"),
                        source!("src", "kubeadm-bootstrap", "yaml.ts"),
                        File::new(
                            "src/schema.json",
                            include_str!("../../../../guests/kubeadm-bootstrap/src/schema.json"),
                        ),
                        tests,
                    ],
                    "ts",
                    true,
                )
            }
            // Platform is refused before this.
            WorldArg::Infrastructure | WorldArg::Platform => {
                let mut app = source!("src", "sim-infrastructure", "app.js");
                app.text = rewrite(
                    "typescript infrastructure",
                    &app.text,
                    "{ name: 'sim-infrastructure-js', version: '0.1.0' }",
                    &format!("{{ name: '{name}', version: '0.1.0' }}"),
                )?;
                (
                    vec![
                        app,
                        File::new(
                            "src/schema.json",
                            include_str!("../../../../guests/sim-infrastructure/src/schema.json"),
                        ),
                    ],
                    "js",
                    false,
                )
            }
        };
        for file in &mut files {
            if std::path::Path::new(file.path)
                .extension()
                .is_none_or(|e| e != "json")
            {
                file.text = imports(file.path, &file.text)?;
            }
        }
        let sdk_source = match sdk {
            SdkSource::Registry => quoted(SDK_VERSION),
            SdkSource::Local(path) => quoted(&format!("file:{path}")),
        };
        // The bootstrap world grants no HTTP: leave out the engine's fetch.
        let disable = match world {
            WorldArg::Bootstrap => "fetch-event http",
            WorldArg::Infrastructure | WorldArg::Platform => "fetch-event",
        };
        let mut package = fill(
            include_str!("../../templates/typescript/package.json"),
            &[
                ("name", name),
                ("world", world.as_str()),
                ("main_ext", main),
                ("disable", disable),
                ("sdk_source", &sdk_source),
            ],
        );
        if !has_tests {
            package = rewrite(
                "typescript package.json",
                &package,
                "npm run check && npm test && ",
                "npm run check && ",
            )?;
        }
        files.push(File::new("package.json", package));
        files.push(File::new(
            "tsconfig.json",
            fill(
                include_str!("../../templates/typescript/tsconfig.json"),
                &[("world", world.as_str())],
            ),
        ));
        files.push(File::new(
            ".gitignore",
            include_str!("../../templates/typescript/gitignore"),
        ));
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORLDS: [WorldArg; 3] = [
        WorldArg::Bootstrap,
        WorldArg::Infrastructure,
        WorldArg::Platform,
    ];
    const LANGUAGES: [Language; 3] = [Language::Rust, Language::Python, Language::Typescript];
    /// Every key the templates are filled in at.
    const PLACEHOLDERS: [&str; 17] = [
        "name",
        "world",
        "language",
        "what",
        "change",
        "build",
        "wasm",
        "fixture",
        "conformance",
        "pool",
        "sdk_version",
        "sdk_source",
        "features",
        "dependencies",
        "main_ext",
        "disable",
        "capabilities",
    ];

    #[test]
    fn every_placeholder_of_the_templates_is_known() {
        let templates = [
            include_str!("../../templates/README.md"),
            include_str!("../../templates/providermodule.yaml"),
            include_str!("../../templates/rust/Cargo.toml"),
            include_str!("../../templates/rust/config.toml"),
            include_str!("../../templates/python/build.sh"),
            include_str!("../../templates/python/requirements.txt"),
            include_str!("../../templates/typescript/package.json"),
            include_str!("../../templates/typescript/tsconfig.json"),
        ];
        for text in templates {
            for (at, _) in text.match_indices("{{") {
                let key = text[at + 2..].split("}}").next().unwrap_or_default();
                assert!(PLACEHOLDERS.contains(&key), "unknown placeholder {key:?}");
            }
        }
    }

    fn supported(world: WorldArg, language: Language) -> bool {
        language == Language::Rust || world != WorldArg::Platform
    }

    #[test]
    fn every_supported_pair_is_written_with_no_placeholder_left() {
        for world in WORLDS {
            for language in LANGUAGES {
                for sdk in [SdkSource::Registry, SdkSource::Local("/sdk".into())] {
                    let made = project("my-provider", world, language, &sdk);
                    if !supported(world, language) {
                        assert!(
                            matches!(made, Err(Refusal::Unsupported { .. })),
                            "{world:?} {language:?}"
                        );
                        continue;
                    }
                    let files = made.unwrap_or_else(|e| panic!("{world:?} {language:?}: {e}"));
                    for file in &files {
                        assert!(
                            !PLACEHOLDERS
                                .iter()
                                .any(|key| file.text.contains(&format!("{{{{{key}}}}}"))),
                            "{world:?} {language:?} {}: a placeholder is left",
                            file.path
                        );
                    }
                    let all: String = files.iter().map(|f| f.text.as_str()).collect();
                    assert!(!all.contains("../sdk/"), "{world:?} {language:?}");
                    assert!(
                        files
                            .iter()
                            .any(|f| f.path.starts_with("fixtures/")
                                && f.text.contains("\"expect\""))
                            || world == WorldArg::Infrastructure,
                        "{world:?} {language:?}: no fixture says what it expects"
                    );
                    if let SdkSource::Local(_) = sdk {
                        assert!(all.contains("/sdk"), "{world:?} {language:?}: --sdk unused");
                    }
                }
            }
        }
    }

    #[test]
    fn the_project_reports_its_own_name() {
        for (world, language, file) in [
            (WorldArg::Bootstrap, Language::Python, "src/app.py"),
            (WorldArg::Infrastructure, Language::Python, "src/app.py"),
            (WorldArg::Bootstrap, Language::Typescript, "src/app.ts"),
            (WorldArg::Infrastructure, Language::Typescript, "src/app.js"),
            (WorldArg::Bootstrap, Language::Rust, "Cargo.toml"),
            (WorldArg::Infrastructure, Language::Rust, "Cargo.toml"),
            (WorldArg::Platform, Language::Rust, "Cargo.toml"),
        ] {
            let files = project("acme-cloud", world, language, &SdkSource::Registry)
                .unwrap_or_else(|e| panic!("{e}"));
            let text = files
                .iter()
                .find(|f| f.path == file)
                .map(|f| f.text.as_str())
                .unwrap_or_default();
            assert!(text.contains("acme-cloud"), "{world:?} {language:?} {file}");
        }
    }

    #[test]
    fn names_that_cannot_name_a_package_are_refused() {
        for bad in [
            "",
            "Caps",
            "1st",
            "a_b",
            "end-",
            "../x",
            "a b",
            &"a".repeat(64),
        ] {
            assert!(
                matches!(
                    project(
                        bad,
                        WorldArg::Bootstrap,
                        Language::Rust,
                        &SdkSource::Registry
                    ),
                    Err(Refusal::Name(_))
                ),
                "{bad:?}"
            );
        }
        assert!(valid_name("my-provider2"));
    }

    #[test]
    fn a_directory_holding_anything_is_refused_and_left_as_it_was() {
        let parent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = parent.path().join("p");
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join("keep"), "mine").unwrap_or_else(|e| panic!("{e}"));
        let files = vec![File::new("README.md", "x")];
        let refused = write(&dir, &files).map_err(|e| e.to_string());
        assert!(
            refused.as_ref().is_err_and(|e| e.contains("is not empty")),
            "{refused:?}"
        );
        let left: Vec<_> = std::fs::read_dir(parent.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, [std::ffi::OsString::from("p")]);
        let inside: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{e}"))
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(inside, [std::ffi::OsString::from("keep")]);
        assert_eq!(
            std::fs::read_to_string(dir.join("keep")).ok().as_deref(),
            Some("mine")
        );

        // An empty one is filled.
        let empty = parent.path().join("empty");
        std::fs::create_dir(&empty).unwrap_or_else(|e| panic!("{e}"));
        write(&empty, &files).unwrap_or_else(|e| panic!("{e}"));
        assert!(empty.join("README.md").is_file());
    }
}
