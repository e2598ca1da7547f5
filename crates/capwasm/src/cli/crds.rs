//! `capwasm crds`: the CRDs generated from the API types.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;

/// Flags of `capwasm crds`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write `<group>_<plural>.yaml` files into this directory instead of printing.
    #[arg(long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let files = crate::api::published_crds()
        .context("cannot merge the v1beta1 and v1beta2 CRDs")?
        .iter()
        .map(crate::api::crds_yaml)
        .collect::<Result<Vec<_>, _>>()
        .context("cannot render the CRDs as YAML")?;
    if let Some(dir) = &args.output_dir {
        let names: Vec<String> = files.iter().map(|(name, _)| name.clone()).collect();
        let path = dir.join("kustomization.yaml");
        std::fs::write(&path, crate::api::crds_kustomization(&names))
            .with_context(|| format!("cannot write {}", path.display()))?;
        for (name, body) in files {
            let path = dir.join(name);
            std::fs::write(&path, body)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    } else {
        let mut out = std::io::stdout().lock();
        for (_, body) in files {
            write!(out, "---\n{body}")?;
        }
    }
    Ok(())
}
