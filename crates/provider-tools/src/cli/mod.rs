//! `capwasm provider`: a provider component on its own, without a cluster.

mod conformance;
mod expect;
mod fixture;
mod inspect;
mod json;
mod new;
mod platform_json;
mod push;
mod test;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::report::error_chain;
use crate::wasm::{
    self, Capabilities, Limits, LoadedProvider, ObjectKind, PrecompiledCache, ProviderSource,
    ProviderSpec, Runtime, bounds,
};

use crate::Exit;

/// Flags of `capwasm provider`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Load a component as the operator would and describe it: world, WIT
    /// version, exports, info, config schema, size and digest.
    Inspect(inspect::Args),
    /// Make one call into a component from a request fixture, and print its
    /// result or its error.
    Test(test::Args),
    /// Hold a component to what capwasm's own providers are tested for: its
    /// world's scenarios (infrastructure: against a simulated cloud it
    /// starts) and request fixtures with expected outcomes.
    Conformance(conformance::Args),
    /// Check a component as the operator would load it and push it to an
    /// OCI registry in the Wasm artifact layout; prints the digest to pin.
    Push(push::Args),
    /// Write a new provider project, outside this repository, that builds
    /// and passes `capwasm provider conformance` as written.
    New(new::Args),
}

impl Args {
    /// Whether the command makes many calls, whose guests' info logs would
    /// bury its own lines.
    pub fn is_many_calls(&self) -> bool {
        matches!(self.command, Command::Conformance(_))
    }
}

/// Runs `capwasm provider <command>`.
pub fn run(args: &Args) -> anyhow::Result<Exit> {
    match &args.command {
        Command::Inspect(args) => inspect::run(args).map(|()| Exit::Success),
        Command::Test(args) => test::run(args),
        Command::Push(args) => push::run(args).map(|()| Exit::Success),
        Command::Conformance(args) => conformance::run(args),
        Command::New(args) => new::run(args).map(|()| Exit::Success),
    }
}

/// A component loaded through the operator's own stages (read, check the
/// bytes, compile, find its world and version, check calls), in service in
/// `runtime` under its file stem.
struct Loaded {
    /// Where the calls run: the command is one short-lived call at a time.
    executor: tokio::runtime::Runtime,
    runtime: Runtime,
    provider: Arc<LoadedProvider>,
    size: usize,
}

/// Loads `path` the way a ProviderModule's component is loaded, so that it
/// fails for the same reasons, each said with what to do about it.
fn load(
    path: &Path,
    limits: Limits,
    capabilities: Capabilities,
    cache: Option<PrecompiledCache>,
) -> anyhow::Result<Loaded> {
    let executor = executor()?;
    // Read here rather than by the runtime, so that size and digest describe the same bytes.
    let bytes = std::fs::read(path).map_err(|source| {
        refused(
            &path.display().to_string(),
            &wasm::Error::Read {
                path: path.to_owned(),
                source,
            },
        )
    })?;
    let name = path.file_stem().map_or_else(
        || "provider".to_owned(),
        |s| s.to_string_lossy().into_owned(),
    );
    load_bytes(
        executor,
        (&name, &path.display().to_string()),
        bytes,
        limits,
        (capabilities, cache),
    )
}

/// A runtime for the command's calls: one short-lived call at a time.
fn executor() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))
}

/// Loads `bytes`, served as `name` and called `shown` in messages.
fn load_bytes(
    executor: tokio::runtime::Runtime,
    (name, shown): (&str, &str),
    bytes: Vec<u8>,
    limits: Limits,
    (capabilities, cache): (Capabilities, Option<PrecompiledCache>),
) -> anyhow::Result<Loaded> {
    let runtime = Runtime::new(
        wasm::RuntimeSettings {
            max_memory_bytes: limits.memory_bytes,
            // One call at a time, plus the loading check.
            max_instances: 2,
            cache,
            ..wasm::RuntimeSettings::default()
        },
        None,
    )
    .map_err(|e| anyhow::anyhow!("cannot start the WebAssembly runtime: {}", error_chain(&e)))?;
    let size = bytes.len();
    let provider = executor
        .block_on(runtime.load(ProviderSpec {
            name: name.to_owned(),
            source: ProviderSource::Bytes(bytes),
            sha256: None,
            limits,
            capabilities,
        }))
        .map_err(|e| refused(shown, &e))?;
    let provider = Arc::new(provider);
    runtime.registry().install(provider.clone());
    Ok(Loaded {
        executor,
        runtime,
        provider,
        size,
    })
}

/// One line: what is wrong with the component and, where there is
/// something to do about it, what.
fn refused(shown: &str, error: &wasm::Error) -> anyhow::Error {
    let what = match error {
        wasm::Error::Read { .. } => return anyhow::anyhow!("{}", error_chain(error)),
        other => error_chain(other),
    };
    let hint = match error {
        wasm::Error::NotAComponent => {
            "; build it for wasm32-wasip2, or wrap a core module with `wasm-tools component new`"
        }
        wasm::Error::UnknownWorld { .. } => {
            "; a provider exports the bootstrap-provider or infrastructure-provider world of wit/provider"
        }
        wasm::Error::UnsupportedVersion { .. } => "; rebuild it against this host's wit/provider",
        wasm::Error::Link { .. } => {
            "; it may import only what its world grants (log, clocks, random, and for infrastructure wasi:http) and the WASI pieces toolchains link, served empty (cli, io, filesystem, sockets)"
        }
        _ => "",
    };
    anyhow::anyhow!("cannot load {shown}: {what}{hint}")
}

/// How a command runs the component: what it may reach, where its compiled
/// code is kept, and the limits of each call.
#[derive(Debug, clap::Args)]
struct SandboxArgs {
    /// A host (`host` or `host:port`) outgoing HTTP may reach; repeatable.
    /// Without any, the component may make no HTTP requests at all.
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// A kind a platform component may render (`Kind.group`, as
    /// `MachinePool.cluster.x-k8s.io`; `Secret` for the core group), as
    /// the ProviderModule's capabilities.allowedKinds; repeatable.
    #[arg(long = "allow-kind", value_name = "KIND")]
    allow_kinds: Vec<ObjectKind>,
    /// Where compiled components are kept, so that the next run of the
    /// same component does not compile it again (a Python provider takes
    /// seconds to compile).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    #[command(flatten)]
    limits: LimitArgs,
}

impl SandboxArgs {
    /// What the component may reach and render.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            allowed_hosts: self.allow_hosts.clone(),
            allowed_kinds: self.allow_kinds.clone(),
            // A fixture's credentials are the developer's own: handed to
            // the guest as written, there being no Secret to sign with.
            expose_credentials: true,
            ..Capabilities::default()
        }
    }
}

/// `--memory-mib` and friends, as the operator's per-ProviderModule limits.
#[derive(Debug, clap::Args)]
struct LimitArgs {
    /// Linear memory the component may grow to, in MiB (the operator's default).
    #[arg(long, value_name = "MIB", default_value_t = bounds::MEMORY_MIB,
          value_parser = clap::value_parser!(u32).range(
              i64::from(bounds::MEMORY_MIB_MIN)..=i64::from(bounds::MEMORY_MIB_MAX)))]
    memory_mib: u32,
    /// Wall-clock time one call may take, in milliseconds (the operator's default).
    #[arg(long, value_name = "MS", default_value_t = u64::from(bounds::TIMEOUT_MILLIS),
          value_parser = clap::value_parser!(u64).range(
              u64::from(bounds::TIMEOUT_MILLIS_MIN)..=u64::from(bounds::TIMEOUT_MILLIS_MAX)))]
    timeout_ms: u64,
    /// Size of what one call may return, in KiB (the operator's default).
    #[arg(long, value_name = "KIB", default_value_t = bounds::MAX_OUTPUT_KIB,
          value_parser = clap::value_parser!(u32).range(
              i64::from(bounds::MAX_OUTPUT_KIB_MIN)..=i64::from(bounds::MAX_OUTPUT_KIB_MAX)))]
    max_output_kib: u32,
}

impl LimitArgs {
    /// The operator's defaults.
    fn defaults() -> Self {
        Self {
            memory_mib: bounds::MEMORY_MIB,
            timeout_ms: u64::from(bounds::TIMEOUT_MILLIS),
            max_output_kib: bounds::MAX_OUTPUT_KIB,
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            memory_bytes: (self.memory_mib as usize) << 20,
            deadline: std::time::Duration::from_millis(self.timeout_ms),
            max_output_bytes: (self.max_output_kib as usize) << 10,
            ..Limits::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        limits: LimitArgs,
    }

    #[test]
    fn limit_flags_default_to_the_operators_limits() {
        let flags = Flags::try_parse_from(["x"]).unwrap();
        assert_eq!(flags.limits.limits(), Limits::default());
    }
}
