//! The command line: the only code that reads flags or the environment.

mod crds;
mod run;
mod simcloud;
mod telemetry;

use capwasm_provider_tools::Exit;
use capwasm_provider_tools::cli as provider;
use clap::{Parser, Subcommand, ValueEnum};

/// capwasm — Cluster API controllers with providers as WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "capwasm", version, about, long_about = None, arg_required_else_help = true)]
pub struct Cli {
    /// Log lines as JSON objects or for people.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human)]
    log_format: LogFormat,

    /// What to log: error, warn, info (the default), debug or trace, or a
    /// filter directive (`info,capwasm=debug`). RUST_LOG, when set, wins.
    #[arg(long, global = true, value_name = "LEVEL", value_parser = telemetry::parse_log_level)]
    log_level: Option<String>,

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
    // Boxed: its flags outweigh every other command's.
    Run(Box<run::Args>),
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

    /// Where `capwasm run` sends its spans, if anywhere.
    fn otlp_endpoint(&self) -> Option<&str> {
        match &self.command {
            Command::Run(args) => args.otlp_endpoint.as_deref(),
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
    let rust_log = std::env::var("RUST_LOG").ok();
    let directives = telemetry::filter_directives(
        rust_log.as_deref(),
        cli.log_level.as_deref(),
        default_filter,
    );
    let telemetry = match telemetry::init(cli.log_format, directives, cli.otlp_endpoint()) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("error: {}", one_line(&error));
            return std::process::ExitCode::FAILURE;
        }
    };
    let exit = match &cli.command {
        Command::Run(args) => run::run(args).map(|()| Exit::Success),
        Command::Crds(args) => crds::run(args).map(|()| Exit::Success),
        Command::Provider(args) => provider::run(args),
        Command::SimCloud(args) => simcloud::run(args).map(|()| Exit::Success),
    };
    telemetry.shutdown();
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
