//! `capwasm provider inspect`: what a component is, as the operator sees it.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use serde::Serialize;

use super::{Loaded, executor, load, load_bytes};
use crate::oci::{Auth, ImageRef, Puller};
use crate::report::error_chain;
use crate::wasm::{Capabilities, Limits, LoadedProvider};

/// Flags of `capwasm provider inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The component: a `.wasm` file, or an OCI image
    /// (`REGISTRY/REPOSITORY:TAG` or `@sha256:DIGEST`) pulled as the
    /// operator pulls it.
    #[arg(value_name = "FILE|IMAGE")]
    file: PathBuf,
    /// Speak plain HTTP to the image's registry (a loopback registry only).
    #[arg(long)]
    plain_http: bool,
    /// `text` for people, `json` for scripts.
    #[arg(long, short, value_enum, default_value_t = Output::Text)]
    output: Output,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Output {
    Text,
    Json,
}

/// The image `args` names, if it names no file that exists.
fn image(args: &Args) -> anyhow::Result<Option<ImageRef>> {
    let written = args.file.to_string_lossy();
    if args.file.exists()
        || !written.contains('/')
        || !(written.contains(':') || written.contains('@'))
    {
        return Ok(None);
    }
    ImageRef::parse(&written, args.plain_http)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("{} is no file, nor an image: {}", written, error_chain(&e)))
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
    let (Loaded { provider, size, .. }, shown) = match image(args)? {
        None => (
            load(&args.file, Limits::default(), Capabilities::default(), None)?,
            args.file.display().to_string(),
        ),
        Some(image) => {
            let executor = executor()?;
            let puller = Puller::default();
            let artifact = executor
                .block_on(async {
                    let session = puller.session(&image, &Auth::Anonymous)?;
                    let digest = session.digest().await?;
                    session.pull(session.resolve(&digest).await?).await
                })
                .map_err(|e| anyhow::anyhow!("cannot pull {image}: {}", error_chain(&e)))?;
            let shown = image.by_digest(&artifact.resolved.manifest_digest);
            let name = image.repository();
            let name = name.rsplit('/').next().unwrap_or("provider");
            let loaded = load_bytes(
                executor,
                (name, &shown),
                artifact.bytes,
                Limits::default(),
                (Capabilities::default(), None),
            )?;
            (loaded, shown)
        }
    };
    let description = describe(&shown, &provider, size);
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

fn describe<'a>(file: &str, provider: &'a LoadedProvider, size: usize) -> Description<'a> {
    let exports = provider.exports();
    Description {
        file: file.to_owned(),
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
        .find_map(|e| {
            let (package, rest) = e.split_once('/')?;
            let (_, version) = rest.rsplit_once('@')?;
            package
                .starts_with("capwasm:")
                .then(|| format!("{package}@{version}"))
        })
        .unwrap_or_default()
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
            "capwasm:provider/bootstrap@0.1.2".to_owned(),
        ];
        assert_eq!(wit_package(&exports), "capwasm:provider@0.1.2");
        assert_eq!(wit_package(&["info".to_owned()]), "");
        let platform = ["capwasm:platform/composition@0.1.0".to_owned()];
        assert_eq!(wit_package(&platform), "capwasm:platform@0.1.0");
    }
}
