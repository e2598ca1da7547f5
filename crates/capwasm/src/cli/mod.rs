//! The command line: the only code that reads flags or the environment.

mod crds;
mod run;
mod simcloud;

use capwasm_provider_tools::Exit;
use capwasm_provider_tools::cli as provider;
use clap::{Parser, Subcommand, ValueEnum};
use std::io::IsTerminal as _;

/// capwasm — Cluster API controllers with providers as WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "capwasm", version, about, long_about = None, arg_required_else_help = true)]
pub struct Cli {
    /// Log lines as JSON objects or for people; the level comes from RUST_LOG (default info).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human)]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the operator: the Cluster, MachinePool and provider controllers.
    Run(run::Args),
    /// Print the CRDs (or write them, one file each, into a directory).
    Crds(crds::Args),
    /// Inspect a provider component, or make one call into it from a request fixture.
    Provider(provider::Args),
    /// Serve the simulated cloud that the sim-infrastructure provider provisions in.
    SimCloud(simcloud::Args),
}

impl Cli {
    /// The shard `capwasm run` would run, if the command is `run`: its
    /// `--shards` and `--shard-index`, or why they do not fit.
    pub fn shard(
        &self,
    ) -> Option<Result<crate::controllers::shard::Shard, crate::controllers::shard::ShardError>>
    {
        match &self.command {
            Command::Run(args) => Some(args.shard()),
            _ => None,
        }
    }
}

/// Parses the command line, runs what it asks for, and says how it ended:
/// 0, a documented code, or 1 with one line on stderr saying what is wrong.
pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let default_filter = match &cli.command {
        // kube logs each failed request on its own line; sim-cloud reports
        // them itself, with what it was doing.
        Command::SimCloud(_) => "info,kube_client::client::builder=off",
        Command::Provider(args) if args.is_many_calls() => "error",
        _ => "info",
    };
    init_logging(cli.log_format, default_filter);
    let exit = match &cli.command {
        Command::Run(args) => run::run(args).map(|()| Exit::Success),
        Command::Crds(args) => crds::run(args).map(|()| Exit::Success),
        Command::Provider(args) => provider::run(args),
        Command::SimCloud(args) => simcloud::run(args).map(|()| Exit::Success),
    };
    match exit {
        Ok(Exit::Success) => std::process::ExitCode::SUCCESS,
        // Only the outcome's own line was printed; the `error:` line is for failures.
        Ok(Exit::Code(code)) => std::process::ExitCode::from(code),
        Err(error) => {
            eprintln!("error: {}", one_line(&error));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The error as one line, for main to print.
fn one_line(error: &anyhow::Error) -> String {
    crate::report::one_line(error.as_ref())
}

fn init_logging(format: LogFormat, default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    // Colours only for a person at a terminal: escapes in a file or a log
    // collector are noise.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    // A second initialisation (tests calling in) keeps the first.
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("client error (Connect)")]
    struct Connect(#[source] std::io::Error);

    #[test]
    fn one_line_keeps_first_lines_and_drops_causes_already_said() {
        let yaml =
            anyhow::Error::msg("line 1 column 1: expected mapping start\n --> <input>:1:1\n  |")
                .context("cannot read the kubeconfig k");
        assert_eq!(
            one_line(&yaml),
            "cannot read the kubeconfig k: line 1 column 1: expected mapping start"
        );
        let repeated = anyhow::Error::new(Connect(std::io::Error::other("connection refused")))
            .context("ServiceError: client error (Connect)");
        assert_eq!(
            one_line(&repeated),
            "ServiceError: client error (Connect): connection refused"
        );
    }
}
