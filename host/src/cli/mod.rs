//! The command line: the only code that reads flags or the environment.

use clap::Parser;

/// capwasm — Cluster API controllers with providers as WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "capwasm", version, about, long_about = None, arg_required_else_help = true)]
pub struct Cli {}

/// Parses the command line and runs what it asks for.
pub fn main() -> anyhow::Result<()> {
    let Cli {} = Cli::parse();
    Ok(())
}
