//! `capwasm provider push`: a component checked as the operator would load
//! it, then pushed in the Wasm OCI artifact layout; prints the reference
//! to pin and the digest cosign signs.

use std::path::PathBuf;

use crate::oci::{self, Auth, ImageRef};
use crate::report::error_chain;
use crate::wasm::Capabilities;

use super::LimitArgs;

/// Flags of `capwasm provider push`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The component (.wasm).
    file: PathBuf,
    /// Where to push it: `REGISTRY/REPOSITORY:TAG`.
    image: String,
    /// Speak plain HTTP to the registry (a loopback registry only).
    #[arg(long)]
    plain_http: bool,
    /// A Docker config file (`~/.docker/config.json`, a pull Secret's
    /// `.dockerconfigjson`) holding credentials for the registry.
    #[arg(long, value_name = "FILE")]
    registry_config: Option<PathBuf>,
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let image = ImageRef::parse(&args.image, args.plain_http)
        .map_err(|e| anyhow::anyhow!("{}", error_chain(&e)))?;
    let auth = match &args.registry_config {
        Some(path) => {
            let config = std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            Auth::from_docker_config(&config, image.registry())
                .map_err(|why| anyhow::anyhow!("{} {why}", path.display()))?
        }
        None => Auth::Anonymous,
    };
    // Refuse what the operator would refuse before it reaches a registry.
    let loaded = super::load(
        &args.file,
        LimitArgs::defaults().limits(),
        Capabilities::default(),
        None,
    )?;
    let bytes = std::fs::read(&args.file)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.file.display()))?;
    let pushed = loaded
        .executor
        .block_on(oci::push_component(&image, &auth, bytes))
        .map_err(|e| anyhow::anyhow!("cannot push {image}: {}", error_chain(&e)))?;
    println!(
        "pushed {} {} to {image}",
        loaded.provider.info.name, loaded.provider.info.version
    );
    println!("image:     {}", pushed.image);
    println!("component: {}", pushed.component_digest);
    // cosign v3's commands: a Sigstore bundle stored as a referrer of the
    // image, which the operator reads (and the `.sig` layout before it).
    let image = &pushed.image;
    println!("sign it:   cosign sign --key cosign.key {image}");
    println!(
        "  offline:  cosign signing-config create --out offline.json && cosign sign --key cosign.key --signing-config offline.json {image}"
    );
    println!("  keyless:  cosign sign --yes {image}   # in CI, with its OIDC identity");
    println!(
        "attest it: cosign attest --type slsaprovenance1 --predicate provenance.json --yes {image}"
    );
    Ok(())
}
