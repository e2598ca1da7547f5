//! The operator's image as a release ships it (`image/build.sh`, the
//! newest release in `image/releases` built from its commit by this tree's
//! recipe): reproducible, one static binary run as a non-root user, CA
//! certificates inside, nothing else; pushed to a registry and signed with
//! cosign as the providers are; released (`make release`) with that binary
//! as the CLI, every asset summed and the sums and image signed. (The test
//! image `make test` runs deploy/ with is the development build:
//! `image/build.sh --test`.)

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::Value;
use testenv::clusterctl;
use testenv::image::OperatorImage;
use testenv::registry::{KEY_PASSWORD, Registry};

fn blob(layout: &Path, digest: &str) -> Result<Vec<u8>> {
    let hex = digest.strip_prefix("sha256:").context("a sha256 digest")?;
    let path = layout.join("blobs/sha256").join(hex);
    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
}

fn json_blob(layout: &Path, digest: &str) -> Result<Value> {
    Ok(serde_json::from_slice(&blob(layout, digest)?)?)
}

/// The newest release's version, as `image/releases` records it.
fn release_version() -> Result<String> {
    let releases =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../image/releases"))?;
    releases
        .lines()
        .rfind(|line| !line.is_empty() && !line.starts_with('#'))
        .and_then(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .context("a release in image/releases")
}

/// Whether an ELF executable asks for a dynamic loader (has a PT_INTERP
/// program header).
fn is_dynamic(elf: &[u8]) -> Result<bool> {
    let field = |at: usize, len: usize| -> Result<u64> {
        let bytes = elf.get(at..at + len).context("a truncated ELF header")?;
        Ok(bytes.iter().rev().fold(0, |n, b| (n << 8) | u64::from(*b)))
    };
    if elf.get(..5) != Some(b"\x7fELF\x02") {
        bail!("not a 64-bit ELF file");
    }
    let (offset, size, count) = (field(0x20, 8)?, field(0x36, 2)?, field(0x38, 2)?);
    for header in 0..count {
        let at = usize::try_from(offset + header * size)?;
        if field(at, 4)? == 3 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `image/pack.sh` run again on the files of `layer`, with what `config`
/// says; the digest it writes.
fn repacked_digest(layer: &Path, config: &Value, name: &str) -> Result<String> {
    let rootfs = tempfile::tempdir()?;
    let extracted = Command::new("tar")
        .args([
            "--extract",
            "--gzip",
            "--same-owner",
            "--same-permissions",
            "--file",
        ])
        .arg(layer)
        .arg("--directory")
        .arg(rootfs.path())
        .status()?;
    assert!(extracted.success());
    let created = config["created"].as_str().context("a creation time")?;
    let epoch = Command::new("date")
        .args(["-u", "-d", created, "+%s"])
        .output()?;
    let epoch = String::from_utf8(epoch.stdout)?.trim().to_owned();
    let user = config["config"]["User"].as_str().context("a user")?;
    let user = user.split(':').next().context("a user id")?;
    let labels: Vec<String> = config["config"]["Labels"]
        .as_object()
        .context("labels")?
        .iter()
        .map(|(key, value)| format!("\"{key}\":{value}"))
        .collect();
    let out = tempfile::tempdir()?;
    let pack = Path::new(env!("CARGO_MANIFEST_DIR")).join("../image/pack.sh");
    let packed = Command::new("bash")
        .arg(pack)
        .arg(rootfs.path())
        .arg(out.path())
        .args([name, "/capwasm", user, &epoch, &labels.join(",")])
        .status()?;
    assert!(packed.success());
    Ok(std::fs::read_to_string(out.path().join("digest"))?
        .trim()
        .to_owned())
}

#[tokio::test]
async fn the_image_is_reproducible_static_non_root_and_signed_in_a_registry() -> Result<()> {
    let image = OperatorImage::release()?;
    let version = release_version()?;

    let index = serde_json::from_slice::<Value>(&std::fs::read(image.layout.join("index.json"))?)?;
    assert_eq!(index["manifests"][0]["digest"], image.digest.as_str());
    let manifest = json_blob(&image.layout, &image.digest)?;
    let config_digest = manifest["config"]["digest"].as_str().context("a config")?;
    let config = json_blob(&image.layout, config_digest)?;
    assert_eq!(config["config"]["User"], "65532:65532", "{config}");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/capwasm"])
    );
    assert_eq!(
        config["config"]["Labels"]["org.opencontainers.image.version"],
        version.as_str()
    );
    let layers = manifest["layers"].as_array().context("layers")?;
    assert_eq!(layers.len(), 1, "one layer: {manifest}");

    // What the layer holds, as tar lists it: owner, mode and path.
    let layer_path = layer_path(&image)?;
    let listing = Command::new("tar")
        .args(["--list", "--verbose", "--numeric-owner", "--gzip", "--file"])
        .arg(&layer_path)
        .output()?;
    let listing = String::from_utf8(listing.stdout)?;
    let files: Vec<(&str, &str, &str)> = listing
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            Some((*fields.first()?, *fields.get(1)?, *fields.last()?))
        })
        .collect();
    let paths: Vec<&str> = files.iter().map(|(_, _, path)| *path).collect();
    for expected in [
        "./capwasm",
        "./etc/ssl/certs/ca-certificates.crt",
        "./etc/passwd",
        "./etc/group",
    ] {
        assert!(
            paths.contains(&expected),
            "{expected} in the image: {paths:?}"
        );
    }
    assert!(
        !paths
            .iter()
            .any(|p| p.starts_with("./bin") || p.starts_with("./usr")),
        "no shell or tools in the image: {paths:?}"
    );
    assert!(
        files.iter().all(|(_, owner, _)| *owner == "0/0"),
        "{listing}"
    );
    assert!(
        files
            .iter()
            .any(|(mode, _, path)| *path == "./capwasm" && *mode == "-rwxr-xr-x"),
        "{listing}"
    );

    // Reproducible: the layer's files packed again with the config's own
    // name, entrypoint, user, time and labels give the same digest.
    let name = index["manifests"][0]["annotations"]["io.containerd.image.name"]
        .as_str()
        .context("an image name")?;
    assert_eq!(
        repacked_digest(&layer_path, &config, name)?,
        image.digest,
        "the same files pack to the same digest"
    );

    // The binary: static, and it runs.
    let dir = tempfile::tempdir()?;
    let binary = extract_binary(&layer_path, dir.path())?;
    assert!(
        !is_dynamic(&std::fs::read(&binary)?)?,
        "the binary needs no loader or libc"
    );
    let printed = Command::new(&binary).arg("--version").output()?;
    let printed = String::from_utf8(printed.stdout)?;
    assert!(printed.contains(&version), "{printed}");

    pushed_and_signed(&image, &version).await
}

/// Pushed and signed: the registry's digest is the layout's, and cosign
/// verifies the signature with the publisher's key and no other.
async fn pushed_and_signed(image: &OperatorImage, version: &str) -> Result<()> {
    let registry = Registry::start().await?;
    let reference = registry.image("capwasm/capwasm", version);
    registry.crane(&["push", &image.layout.display().to_string(), &reference])?;
    let pushed = registry.crane(&["digest", &reference])?;
    assert_eq!(pushed, image.digest);
    let by_digest = format!("{}/capwasm/capwasm@{}", registry.authority, image.digest);
    let publisher = registry.key_pair("publisher")?;
    let other = registry.key_pair("other")?;
    // As release.sh signs it (cosign v3, offline), and users verify it.
    registry.sign(&by_digest, &publisher)?;
    registry.verify(&by_digest, &publisher)?;
    assert!(
        registry.verify(&by_digest, &other).is_err(),
        "a signature by another key does not verify"
    );
    Ok(())
}

/// `make release` of the release image, pushed to a registry and signed
/// with the publisher's key: the CLI among the assets is the image's own
/// static binary; SHA256SUMS names every other asset with its right sum and
/// is signed by that key and no other; the image is signed by digest, the
/// tag names that digest, and the components name it there by digest.
#[tokio::test]
async fn a_release_ships_the_images_binary_as_its_cli_and_signs_its_sums_and_image() -> Result<()> {
    let image = OperatorImage::release()?;
    let version = release_version()?;
    let registry = Registry::start().await?;
    let publisher = registry.key_pair("publisher")?;
    let other = registry.key_pair("other")?;
    let repository = format!("{}/capwasm/capwasm", registry.authority);
    let out = tempfile::tempdir()?;
    let layout = image.layout.display().to_string();
    let key = publisher.private.display().to_string();
    let released = clusterctl::release_with(
        &version,
        out.path(),
        &[
            "--image-layout",
            &layout,
            "--push",
            &repository,
            "--key",
            &key,
        ],
        &[("COSIGN_PASSWORD", KEY_PASSWORD)],
    )?;
    let assets = released.join("capwasm").join(format!("v{version}"));

    // The CLI: byte for byte the image's binary, static, this version.
    let cli = assets.join("capwasm-linux-amd64");
    let cli_bytes = std::fs::read(&cli)?;
    let dir = tempfile::tempdir()?;
    let in_image = extract_binary(&layer_path(&image)?, dir.path())?;
    assert!(
        cli_bytes == std::fs::read(in_image)?,
        "the CLI is the image's binary"
    );
    assert!(!is_dynamic(&cli_bytes)?);
    let printed = Command::new(&cli).arg("--version").output()?;
    assert!(String::from_utf8(printed.stdout)?.contains(&version));

    // SHA256SUMS: every other asset, each sum right.
    let sums = std::fs::read_to_string(assets.join("SHA256SUMS"))?;
    let summed: Vec<&str> = sums
        .lines()
        .filter_map(|line| line.split_once("  ").map(|(_, name)| name))
        .collect();
    let mut present: Vec<String> = std::fs::read_dir(&assets)?
        .map(|entry| Ok(entry?.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_>>()?;
    present.retain(|name| !name.starts_with("SHA256SUMS"));
    present.sort();
    assert_eq!(summed, present, "{sums}");
    for name in [
        "capwasm-linux-amd64",
        "infrastructure-components.yaml",
        "bootstrap-components.yaml",
        "metadata.yaml",
        "cluster-template.yaml",
    ] {
        assert!(summed.contains(&name), "{name} in SHA256SUMS: {sums}");
    }
    let checked = Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(&assets)
        .output()?;
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );

    // Its signature: the publisher's, over these bytes only.
    let signature = assets.join("SHA256SUMS.sigstore.json");
    let signed = assets.join("SHA256SUMS");
    registry.verify_blob(&signed, &signature, &publisher)?;
    assert!(
        registry.verify_blob(&signed, &signature, &other).is_err(),
        "another key does not verify the sums"
    );
    let forged = dir.path().join("SHA256SUMS");
    let mut forged_sums = sums.clone().into_bytes();
    forged_sums[0] = if forged_sums[0] == b'0' { b'1' } else { b'0' };
    std::fs::write(&forged, forged_sums)?;
    assert!(
        registry
            .verify_blob(&forged, &signature, &publisher)
            .is_err(),
        "changed sums do not verify"
    );

    // The image: signed by digest, tagged, named by digest.
    let by_digest = format!("{repository}@{}", image.digest);
    registry.verify(&by_digest, &publisher)?;
    assert!(registry.verify(&by_digest, &other).is_err());
    let tagged = registry.crane(&["digest", &format!("{repository}:{version}")])?;
    assert_eq!(tagged.trim(), image.digest);
    let components = std::fs::read_to_string(assets.join("infrastructure-components.yaml"))?;
    assert!(
        components.contains(&by_digest) && !components.contains(testenv::image::REPOSITORY),
        "the operator's image by digest in the pushed repository"
    );
    Ok(())
}

/// `./capwasm` of `layer` extracted into `dir`; its path.
fn extract_binary(layer: &Path, dir: &Path) -> Result<std::path::PathBuf> {
    let extracted = Command::new("tar")
        .args(["--extract", "--gzip", "--file"])
        .arg(layer)
        .arg("--directory")
        .arg(dir)
        .arg("./capwasm")
        .status()?;
    ensure!(extracted.success(), "tar could not extract ./capwasm");
    Ok(dir.join("capwasm"))
}

/// The path of the image's one layer.
fn layer_path(image: &OperatorImage) -> Result<std::path::PathBuf> {
    let manifest = json_blob(&image.layout, &image.digest)?;
    let digest = manifest["layers"][0]["digest"]
        .as_str()
        .context("a layer digest")?;
    let hex = digest.strip_prefix("sha256:").context("a sha256 layer")?;
    Ok(image.layout.join("blobs/sha256").join(hex))
}
