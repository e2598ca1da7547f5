//! The command line: the only code that reads flags or the environment.

mod crds;
mod run;

use clap::{Parser, Subcommand, ValueEnum};

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
}

/// Parses the command line and runs what it asks for.
pub fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match &cli.command {
        Command::Run(args) => run::run(args),
        Command::Crds(args) => crds::run(args),
    }
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second initialisation (tests calling in) keeps the first.
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
