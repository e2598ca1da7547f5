//! `capwasm provider new`: a provider project that builds and passes
//! `capwasm provider conformance` as written, outside this repository.
//!
//! Each world's starting point is a provider of this repository in the
//! language asked for — kubeadm-bootstrap, sim-infrastructure,
//! sim-platform — its sources embedded here as the guests have them, so a
//! project is always one the test suite holds to the same checks. The SDK
//! is a dependency by version; `--sdk` points that dependency at a local
//! copy of the packaged SDK (before it is published, or in tests).

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
            include_str!("../../../templates/providermodule.yaml"),
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

mod files;
mod python;
mod readme;
mod rust;
#[cfg(test)]
mod tests;
mod typescript;
mod world;

use files::{File, fill, quoted, rewrite, write};
use readme::readme;
use world::{capabilities, fixtures};
