//! `capwasm provider test`: one call into a component from a request
//! fixture, with the operator's checks and limits, and its outcome sorted
//! the way the operator sorts it.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context as _, anyhow, bail};
use serde::Serialize;

use super::fixture::{self, Call};
use super::{Loaded, SandboxArgs, json, load, platform_json};
use crate::Exit;
use crate::conformance::said;
use crate::wasm::types::ProviderError;
use crate::wasm::{CallError, LoadedProvider, MemoryBound, PrecompiledCache, Runtime};

/// Exit codes besides 0 (the call returned a result), 1 (bad input: a
/// missing or unusable file, a bad fixture, a call the component's world
/// lacks) and 2 (bad flags). Documented in `--help` by [`AFTER_HELP`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The provider's `retry-after` error.
    RetryAfter = 10,
    /// The provider's `terminal` error.
    Terminal = 11,
    /// The provider's `invalid-config` error, or the config failed its schema.
    InvalidConfig = 12,
    /// The guest trapped (a panic, say).
    Trap = 20,
    /// The call ran past `--timeout-ms`.
    Deadline = 21,
    /// The guest tried to grow past `--memory-mib`.
    MemoryLimit = 22,
    /// The result was over `--max-output-kib`.
    OutputTooLarge = 23,
    InvalidResult = 25,
    /// No instance could be made.
    Instantiate = 24,
}

impl Verdict {
    fn exit(self) -> Exit {
        Exit::Code(self as u8)
    }
}

const AFTER_HELP: &str = "\
The fixture names the call and its request:

  {\"call\": \"generate\", \"request\": {...}}

Calls: generate, reconcile-pool, delete-pool, reconcile-cluster, delete-cluster,
provider-id, owns, render, status, validate, info, config-schema. The request is the WIT record of the call
with field names in camelCase (idempotency-key -> idempotencyKey), enum cases as in
the WIT (cloud-config, internal-ip, running), `config` as a JSON document (default {}),
and byte lists (bootstrap data, credential values) as a UTF-8 string or
{\"base64\": \"...\"}. provider-id takes {\"config\", \"instance\"}, owns takes
{\"providerId\"}, info and config-schema take nothing. The platform world's calls
take documents as JSON objects: render {\"cluster\", \"template\", \"values\" (checked
against the schema, default {}), \"observed\"}, status {\"cluster\", \"template\",
\"observed\", \"nodes\"}, validate {\"old\", \"new\", \"oldTemplate\", \"newTemplate\"}
(its result {\"allowed\": true} or {\"refused\": why}). An optional top-level
\"description\" is ignored. Examples: examples/requests/.

The config is checked against the provider's config schema before the call,
as the operator does.

Output: the result as JSON on stdout, or one line on stderr (a trap adds what
the guest said before it died, its panic message, on the lines after it,
each starting `guest said: `). Exit codes:
   0  the call returned a result
   1  bad input: a missing or unusable file, a bad fixture, a call the world lacks
   2  bad flags
  10  the provider asked to retry:       retry after 15s: ...
  11  the provider failed terminally:    terminal (QuotaExceeded): ...
  12  the config is invalid:             invalid config at $.token: ...
  20  the guest trapped:                 trap in bootstrap.generate: ...
  21  the call ran past --timeout-ms:    deadline exceeded: ...
  22  the guest hit --memory-mib:        memory limit exceeded: ...
  23  the result was over --max-output-kib: output too large: ...
  24  no instance could be made:         cannot instantiate: ...
  25  the result broke the contract:      invalid result: ... (a malformed providerID, say)";

/// Flags of `capwasm provider test`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The component (`.wasm`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The request fixture (JSON; format below).
    #[arg(long, short, value_name = "REQUEST.json")]
    input: PathBuf,
    #[command(flatten)]
    sandbox: SandboxArgs,
}

pub fn run(args: &Args) -> anyhow::Result<Exit> {
    let path = args.input.display();
    let text = std::fs::read_to_string(&args.input)
        .with_context(|| format!("cannot read the fixture {path}"))?;
    let fixture = fixture::parse(&text).map_err(|e| {
        anyhow!("bad fixture {path}: {e} (see `capwasm provider test --help` for the format)")
    })?;
    let capabilities = args.sandbox.capabilities();
    let cache = args.sandbox.cache_dir.as_deref().map(PrecompiledCache::new);
    let loaded = load(
        &args.file,
        args.sandbox.limits.limits(),
        capabilities,
        cache,
    )?;
    // Before the config check: a config cannot make up for the wrong component.
    if let Some(world) = fixture.call.world()
        && world != loaded.provider.world
    {
        bail!(
            "{} implements the {} world, which has no {} (an export of the {world} world)",
            args.file.display(),
            loaded.provider.world,
            fixture.call.export(),
        );
    }
    if let Some(config) = &fixture.config
        && let Err(e) = loaded.provider.config_schema.check(config)
    {
        eprintln!(
            "invalid config at {}: {} (refused by the provider's config schema, before any call)",
            e.path, e.message
        );
        return Ok(Verdict::InvalidConfig.exit());
    }
    match call(&loaded, fixture.call) {
        Ok(result) => {
            let mut out = std::io::stdout().lock();
            serde_json::to_writer_pretty(&mut out, &result)?;
            writeln!(out)?;
            out.flush().context("cannot write to stdout")?;
            Ok(Exit::Success)
        }
        Err(error) => verdict(&error),
    }
}

/// Makes the call; the result as JSON.
fn call(loaded: &Loaded, call: Call) -> Result<serde_json::Value, CallError> {
    loaded
        .executor
        .block_on(make(&loaded.runtime, &loaded.provider, call))
}

/// Makes the call into `provider`, in service in `runtime`; the result as JSON.
pub(super) async fn make(
    runtime: &Runtime,
    provider: &LoadedProvider,
    call: Call,
) -> Result<serde_json::Value, CallError> {
    let name = provider.name();
    match call {
        Call::Generate(r) => runtime
            .generate(name, &r)
            .await
            .map(|d| to_json(&json::BootstrapData::from(d))),
        Call::ReconcilePool(r) => runtime
            .reconcile_pool(name, &r)
            .await
            .map(|s| to_json(&json::PoolState::from(s))),
        Call::DeletePool(r) => runtime
            .delete_pool(name, &r)
            .await
            .map(|o| to_json(&json::DeleteOutcome::from(o))),
        Call::ReconcileCluster(r) => runtime
            .reconcile_cluster(name, &r)
            .await
            .map(|s| to_json(&json::ClusterState::from(s))),
        Call::DeleteCluster(r) => runtime
            .delete_cluster(name, &r)
            .await
            .map(|o| to_json(&json::DeleteOutcome::from(o))),
        Call::ProviderId { config, instance } => runtime
            .provider_id(name, &config, &instance)
            .await
            .map(serde_json::Value::String),
        Call::Owns(provider_id) => runtime
            .owns(name, &provider_id)
            .await
            .map(serde_json::Value::Bool),
        Call::Render { request, namespace } => runtime
            .render(name, "", &namespace, &request)
            .await
            .map(|c| to_json(&platform_json::Rendered::from(c))),
        Call::Status(r) => runtime
            .platform_status(name, "", "", &r)
            .await
            .map(|s| to_json(&platform_json::ClusterSummary::from(s))),
        Call::Validate(r) => runtime
            .validate(name, "", "", &r)
            .await
            .map(platform_json::verdict),
        Call::Info => runtime
            .info(name)
            .await
            .map(|i| to_json(&json::ProviderInfo::from(i))),
        // What the export returned when the component was loaded (and checked).
        Call::ConfigSchema => Ok(provider.config_schema.json().clone()),
    }
}

fn to_json(value: &impl Serialize) -> serde_json::Value {
    // Plain records of strings, numbers and booleans always serialise.
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

/// Prints the line for a typed error or a host verdict, and says how to exit.
fn verdict(error: &CallError) -> anyhow::Result<Exit> {
    let (line, verdict) = describe(error).ok_or_else(|| match error {
        CallError::WrongWorld { world, .. } => anyhow!(
            "{}; use a call of the {world} world (see `capwasm provider test --help`)",
            crate::report::error_chain(error)
        ),
        other => anyhow!("{}", crate::report::error_chain(other)),
    })?;
    let mut err = std::io::stderr().lock();
    writeln!(err, "{line}")?;
    if let CallError::Trapped { last_words, .. } = error {
        for guest_line in last_words.trim_start().lines() {
            writeln!(err, "guest said: {guest_line}")?;
        }
    }
    Ok(verdict.exit())
}

/// The one line and exit code of an outcome that is the provider's or the
/// sandbox's answer; `None` for a failure to make the call at all.
pub(super) fn describe(error: &CallError) -> Option<(String, Verdict)> {
    Some(match error {
        CallError::Provider { error, .. } => (
            said(error),
            match error {
                ProviderError::RetryAfter(_) => Verdict::RetryAfter,
                ProviderError::Terminal(_) => Verdict::Terminal,
                ProviderError::InvalidConfig(_) => Verdict::InvalidConfig,
            },
        ),
        CallError::CredentialsRejected {
            host,
            status,
            error,
            ..
        } => {
            let (line, verdict) = describe(&CallError::Provider {
                provider: String::new(),
                digest: String::new(),
                export: "",
                error: error.clone(),
            })?;
            (
                format!("{host} refused the credentials (HTTP {status}); {line}"),
                verdict,
            )
        }
        CallError::Trapped { export, trap, .. } => {
            (format!("trap in {export}: {trap}"), Verdict::Trap)
        }
        CallError::DeadlineExceeded {
            export, deadline, ..
        } => (
            format!("deadline exceeded: {export} ran past {deadline:?} (--timeout-ms)"),
            Verdict::Deadline,
        ),
        CallError::MemoryLimit { export, bound, .. } => (
            match bound {
                MemoryBound::Instance(bytes) => format!(
                    "memory limit exceeded: {export} tried to grow past {} MiB (--memory-mib)",
                    bytes >> 20
                ),
                MemoryBound::Runtime(bytes) => format!(
                    "memory limit exceeded: {export} wanted more than the {} MiB all providers share",
                    bytes >> 20
                ),
            },
            Verdict::MemoryLimit,
        ),
        CallError::OutputTooLarge {
            export,
            limit_bytes,
            ..
        } => (
            format!(
                "output too large: {export} returned more than the limit of {limit_bytes} bytes (--max-output-kib)"
            ),
            Verdict::OutputTooLarge,
        ),
        CallError::InvalidResult {
            export, violation, ..
        } => (
            format!("invalid result: {export} returned {violation}"),
            Verdict::InvalidResult,
        ),
        CallError::Instantiate { .. } => (
            format!("cannot instantiate: {}", crate::report::error_chain(error)),
            Verdict::Instantiate,
        ),
        // One call is never throttled or kept waiting.
        CallError::NotLoaded(_)
        | CallError::WrongWorld { .. }
        | CallError::Abandoned { .. }
        | CallError::Throttled { .. }
        | CallError::Busy { .. } => {
            return None;
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::wasm::types::{RetryAfterError, TerminalError};

    fn provider_error(error: ProviderError) -> CallError {
        CallError::Provider {
            provider: "p".into(),
            digest: "sha256:00".into(),
            export: "machine-pools.reconcile",
            error,
        }
    }

    #[test]
    fn describe_gives_typed_errors_their_line_and_code() {
        let retry = provider_error(ProviderError::RetryAfter(RetryAfterError {
            seconds: 15,
            message: "no bootstrap data yet".into(),
        }));
        assert_eq!(
            describe(&retry),
            Some((
                "retry after 15s: no bootstrap data yet".into(),
                Verdict::RetryAfter
            ))
        );
        let terminal = provider_error(ProviderError::Terminal(TerminalError {
            reason: "QuotaExceeded".into(),
            message: "no room".into(),
        }));
        assert_eq!(
            describe(&terminal),
            Some((
                "terminal (QuotaExceeded): no room".into(),
                Verdict::Terminal
            ))
        );
    }

    #[test]
    fn describe_names_the_flag_behind_a_host_verdict() {
        let deadline = CallError::DeadlineExceeded {
            provider: "p".into(),
            digest: "sha256:00".into(),
            export: "bootstrap.generate",
            deadline: Duration::from_millis(100),
        };
        let (line, verdict) = describe(&deadline).unwrap();
        assert_eq!(verdict, Verdict::Deadline);
        assert!(line.contains("--timeout-ms"), "{line}");
    }

    #[test]
    fn describe_leaves_calls_that_could_not_be_made_to_the_error_path() {
        let wrong = CallError::WrongWorld {
            provider: "p".into(),
            world: "bootstrap-provider",
            export: "machine-pools.reconcile",
        };
        assert_eq!(describe(&wrong), None);
    }

    #[test]
    fn help_documents_every_exit_code() {
        for verdict in [
            Verdict::RetryAfter,
            Verdict::Terminal,
            Verdict::InvalidConfig,
            Verdict::Trap,
            Verdict::Deadline,
            Verdict::MemoryLimit,
            Verdict::OutputTooLarge,
            Verdict::InvalidResult,
            Verdict::Instantiate,
        ] {
            let code = format!("  {}  ", verdict as u8);
            assert!(AFTER_HELP.contains(&code), "{verdict:?} is not in --help");
        }
        for call in fixture::CALLS {
            assert!(AFTER_HELP.contains(call), "{call} is not in --help");
        }
    }
}
