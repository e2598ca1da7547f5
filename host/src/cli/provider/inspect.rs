//! `capwasm provider inspect`: what a component is, as the operator sees it.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use serde::Serialize;

use super::{Loaded, load};
use crate::wasm::{Capabilities, Limits, LoadedProvider};

/// Flags of `capwasm provider inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The component (`.wasm`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// `text` for people, `json` for scripts.
    #[arg(long, short, value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Output {
    Text,
    Json,
}

/// What is printed, in both forms.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Description<'a> {
    file: String,
    size: usize,
    digest: &'a str,
    world: &'static str,
    /// The `capwasm:provider` version the component was built against.
    wit_package: String,
    name: &'a str,
    version: &'a str,
    exports: Vec<String>,
    imports: Vec<String>,
    /// What a component of its world may import at all.
    may_import: Vec<&'static str>,
    config_schema: &'a serde_json::Value,
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    // Loading makes the same check calls under the operator's default limits.
    let Loaded { provider, size, .. } =
        load(&args.file, Limits::default(), Capabilities::default())?;
    let description = describe(&args.file, &provider, size);
    let mut out = std::io::stdout().lock();
    match args.output {
        Output::Json => {
            serde_json::to_writer_pretty(&mut out, &description)?;
            writeln!(out)?;
        }
        Output::Text => write_text(&mut out, &description)?,
    }
    out.flush().context("cannot write to stdout")
}

fn describe<'a>(
    file: &std::path::Path,
    provider: &'a LoadedProvider,
    size: usize,
) -> Description<'a> {
    let exports = provider.exports();
    Description {
        file: file.display().to_string(),
        size,
        digest: &provider.digest,
        world: provider.world.as_str(),
        wit_package: wit_package(&exports),
        name: &provider.info.name,
        version: &provider.info.version,
        imports: provider.imports(),
        may_import: provider.world.may_import().collect(),
        exports,
        config_schema: provider.config_schema.json(),
    }
}

/// `capwasm:provider@<version>` from the versioned name of an exported
/// interface (loading has already refused components without one).
fn wit_package(exports: &[String]) -> String {
    exports
        .iter()
        .find_map(|e| e.strip_prefix("capwasm:provider/"))
        .and_then(|e| e.rsplit_once('@'))
        .map_or_else(String::new, |(_, version)| {
            format!("capwasm:provider@{version}")
        })
}

fn write_text(out: &mut impl std::io::Write, d: &Description<'_>) -> anyhow::Result<()> {
    writeln!(out, "file:     {}", d.file)?;
    writeln!(out, "size:     {} bytes", d.size)?;
    writeln!(out, "digest:   {}", d.digest)?;
    writeln!(out, "world:    {}", d.world)?;
    writeln!(out, "wit:      {}", d.wit_package)?;
    writeln!(out, "provider: {} {}", d.name, d.version)?;
    writeln!(out, "exports:")?;
    for export in &d.exports {
        writeln!(out, "  {export}")?;
    }
    writeln!(out, "imports:")?;
    for import in &d.imports {
        writeln!(out, "  {import}")?;
    }
    writeln!(out, "its world may import:")?;
    for import in &d.may_import {
        writeln!(out, "  {import}")?;
    }
    writeln!(out, "config schema:")?;
    writeln!(out, "{}", serde_json::to_string_pretty(d.config_schema)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wit_package_comes_from_a_versioned_capwasm_export() {
        let exports = [
            "info".to_owned(),
            "capwasm:provider/bootstrap@0.1.0".to_owned(),
        ];
        assert_eq!(wit_package(&exports), "capwasm:provider@0.1.0");
        assert_eq!(wit_package(&["info".to_owned()]), "");
    }
}
