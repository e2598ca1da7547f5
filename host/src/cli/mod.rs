//! The command line: the only code that reads flags or the environment.

mod crds;

use clap::{Parser, Subcommand};

/// capwasm — Cluster API controllers with providers as WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "capwasm", version, about, long_about = None, arg_required_else_help = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the CRDs (or write them, one file each, into a directory).
    Crds(crds::Args),
}

/// Parses the command line and runs what it asks for.
pub fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Crds(args) => crds::run(&args),
    }
}
