//! `capwasm provider conformance`: holds a component to the behaviour
//! capwasm's own providers are tested for — the scenarios of its world
//! (for the infrastructure world, against a simulated cloud started here)
//! and any request fixtures that say what they expect.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};

use super::expect::Observed;
use super::fixture::{self, Fixture};
use super::{SandboxArgs, refused, test};
use crate::Exit;
use crate::conformance::{self, Failure, Outcome, Provider, Subject, infrastructure};
use crate::report::error_chain;
use crate::wasm::types::ProviderError;
use crate::wasm::{CallError, PrecompiledCache, World};

/// Exit code when any check failed.
const FAILED: u8 = 30;

const AFTER_HELP: &str = "\
Checks:
  infrastructure  the sim-infrastructure scenarios, each against a simulated cloud of its
                  own on 127.0.0.1: scale up and down, repeats and lost records without
                  duplicates, deletion, bearer-token credentials signed by the host or
                  exposed, missing bootstrap data, failed joins, a full or unreachable
                  cloud, a host not allowed, cluster endpoint and failure domains,
                  providerIDs. The component must provision in the simulated cloud with
                  sim-infrastructure's config (endpoint, region, failureDomains, ...).
  bootstrap       no built-in scenarios: give --fixtures.
  platform        no built-in scenarios: give --fixtures (render, status, validate).
  --fixtures DIR  every *.json fixture in DIR (the format of `capwasm provider test`) that
                  has an \"expect\" and calls this world, held to it:
                    \"expect\": {\"result\": {...}}            the result, exactly
                    \"expect\": {\"error\": \"retry-after\"}
                    \"expect\": {\"error\": \"terminal\", \"reason\": \"...\"}
                    \"expect\": {\"error\": \"invalid-config\", \"path\": \"$.field\"}
                  Examples: examples/requests/ (kubeadm-bootstrap's and sim-platform's outputs).

Output: one line per check on stdout (ok or FAIL, with why), then a count. Exit codes:
   0  every check passed
   1  bad input: a missing or unusable file, a bad fixture, nothing to check
   2  bad flags
  30  some check failed";

/// Flags of `capwasm provider conformance`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// The component (`.wasm`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The world the component must implement; by default, the one it does.
    #[arg(long, value_enum)]
    world: Option<WorldArg>,
    /// A directory of request fixtures with expected outcomes.
    #[arg(long, value_name = "DIR")]
    fixtures: Option<PathBuf>,
    // Without --cache-dir, compiled code goes to a directory removed afterwards.
    #[command(flatten)]
    sandbox: SandboxArgs,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum WorldArg {
    Bootstrap,
    Infrastructure,
    Platform,
}

impl From<WorldArg> for World {
    fn from(world: WorldArg) -> Self {
        match world {
            WorldArg::Bootstrap => Self::Bootstrap,
            WorldArg::Infrastructure => Self::Infrastructure,
            WorldArg::Platform => Self::Platform,
        }
    }
}

pub fn run(args: &Args) -> anyhow::Result<Exit> {
    let shown = args.file.display().to_string();
    let bytes = std::fs::read(&args.file).with_context(|| format!("cannot read {shown}"))?;
    let fixtures = match &args.fixtures {
        Some(dir) => read_fixtures(dir)?,
        None => Vec::new(),
    };
    // Each scenario loads the component afresh; it compiles once.
    let temporary;
    let cache_dir = if let Some(dir) = &args.sandbox.cache_dir {
        dir.as_path()
    } else {
        temporary = tempfile::tempdir().context("cannot make a directory for compiled code")?;
        temporary.path()
    };
    let executor = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    executor.block_on(check(
        args,
        &shown,
        Subject::new(
            bytes,
            args.sandbox.limits.limits(),
            Some(PrecompiledCache::new(cache_dir)),
        )
        .map_err(|e| anyhow!("{e}"))?,
        fixtures,
    ))
}

async fn check(
    args: &Args,
    shown: &str,
    subject: Subject,
    fixtures: Vec<(String, Fixture)>,
) -> anyhow::Result<Exit> {
    let provider = subject
        .load(args.sandbox.capabilities())
        .await
        .map_err(|e| match e {
            Failure::Load(e) => refused(shown, &e),
            other => anyhow!("{other}"),
        })?;
    let loaded = provider.loaded();
    let world = loaded.world;
    if let Some(asked) = args.world.map(World::from)
        && asked != world
    {
        bail!("{shown} implements the {world} world, not the {asked} world");
    }
    let scenarios: &'static [conformance::Scenario] = match world {
        World::Infrastructure => infrastructure::SCENARIOS,
        World::Bootstrap | World::Platform | World::ControlPlane => &[],
    };
    let fixtures: Vec<_> = fixtures
        .into_iter()
        .filter(|(_, f)| f.expect.is_some() && f.call.world().is_none_or(|w| w == world))
        .collect();
    if scenarios.is_empty() && fixtures.is_empty() {
        bail!(
            "nothing to check: the {world} world has no built-in scenarios, and no fixture with an \"expect\" for it was given (--fixtures DIR; see --help)"
        );
    }
    say(format_args!(
        "{shown}: {} {} ({world}, {})",
        loaded.info.name, loaded.info.version, loaded.digest
    ));
    let (checks, mut failed) = (fixtures.len() + scenarios.len(), 0);
    for (name, mut fixture) in fixtures {
        // Each kept fixture has one (filtered above).
        let Some(expect) = fixture.expect.take() else {
            continue;
        };
        let started = Instant::now();
        let verdict = expect.check(&observe(&provider, fixture).await);
        failed += usize::from(verdict.is_err());
        print(&format!("fixture {name}"), verdict.err(), started.elapsed());
    }
    let outcomes = conformance::run_all(&subject, scenarios, |outcome: &Outcome| {
        print(
            &outcome.scenario.title(),
            outcome.result.as_ref().err().map(ToString::to_string),
            outcome.took,
        );
    })
    .await;
    failed += outcomes.iter().filter(|o| o.result.is_err()).count();
    say(format_args!(
        "{checks} checks: {} passed, {failed} failed",
        checks - failed
    ));
    Ok(if failed == 0 {
        Exit::Success
    } else {
        Exit::Code(FAILED)
    })
}

/// One check's line: passed (no `why`) or failed.
fn print(what: &str, why: Option<String>, took: Duration) {
    let ms = took.as_millis();
    match why {
        None => say(format_args!("ok    {what} ({ms} ms)")),
        Some(why) => say(format_args!("FAIL  {what} ({ms} ms): {why}")),
    }
}

/// One line on stdout. A closed stdout (piped into `head`) is no reason to
/// stop checking: the exit code still says how it went.
fn say(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// Every `*.json` in `dir`, by name, parsed.
fn read_fixtures(dir: &Path) -> anyhow::Result<Vec<(String, Fixture)>> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the fixtures in {}", dir.display()))?;
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("cannot read the fixtures in {}", dir.display()))?
            .path();
        if path.extension().is_some_and(|e| e == "json") {
            paths.push(path);
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read the fixture {}", path.display()))?;
            let fixture = fixture::parse(&text)
                .map_err(|e| anyhow!("bad fixture {}: {e}", path.display()))?;
            let name = path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            Ok((name, fixture))
        })
        .collect()
}

/// What the call of `fixture` comes to, config schema first as the operator does.
async fn observe(provider: &Provider<'_>, fixture: Fixture) -> Observed {
    if let Some(config) = &fixture.config
        && let Err(mismatch) = provider.loaded().config_schema.check(config)
    {
        return Observed::InvalidConfig(mismatch.path);
    }
    match test::make(provider.runtime(), provider.loaded(), fixture.call).await {
        Ok(result) => Observed::Result(result),
        Err(CallError::Provider { error, .. } | CallError::CredentialsRejected { error, .. }) => {
            match error {
                ProviderError::RetryAfter(_) => Observed::RetryAfter,
                ProviderError::Terminal(t) => Observed::Terminal(t.reason),
                ProviderError::InvalidConfig(c) => Observed::InvalidConfig(c.path),
            }
        }
        Err(other) => Observed::Other(
            test::describe(&other).map_or_else(|| error_chain(&other), |(line, _)| line),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_documents_the_failure_code() {
        assert!(AFTER_HELP.contains(&format!("  {FAILED}  ")));
    }
}
