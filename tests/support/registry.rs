//! A real OCI registry (go-containerregistry's `crane registry serve`, built
//! from its Go module by `tests/registry/build.sh`) on a loopback port, and
//! cosign (v3 built by `tests/cosign/build.sh`, v2 by `build-v2.sh`) to
//! sign what is pushed to it: the signatures the operator checks are
//! cosign's own, in both its layouts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::binaries::build_script;
use crate::ports::free_port;
use crate::probe;
use crate::process::Process;
use crate::{Error, Result};

/// How long the registry gets to answer.
const READY: Duration = Duration::from_secs(30);
/// The password of every test key (cosign asks for one).
pub const KEY_PASSWORD: &str = "capwasm-test";
/// The user an authenticated registry knows.
pub const USERNAME: &str = "capwasm";
/// Its password.
pub const PASSWORD: &str = "pull-secret-test";
/// `USERNAME:bcrypt(PASSWORD)`, as `htpasswd -B` writes it.
const HTPASSWD: &str = "capwasm:$2a$10$0Xj7UluSkM4K6f43oLTrl.q9JxbNcHP4/5GBEQlfx93yLf7wxKzqe";

/// A running registry, holding what is pushed in memory; stopped when
/// dropped (or by [`Registry::stop`]).
pub struct Registry {
    process: Process,
    dir: TempDir,
    crane: PathBuf,
    /// cosign v3: Sigstore bundles, stored as referrers.
    cosign: PathBuf,
    /// cosign v2: the `.sig` layout.
    cosign_v2: PathBuf,
    /// `127.0.0.1:<port>`.
    pub authority: String,
}

/// A cosign key pair made by `cosign generate-key-pair`.
pub struct KeyPair {
    /// The encrypted private key file.
    pub private: PathBuf,
    /// The public key, PEM.
    pub public_pem: String,
}

impl Registry {
    /// Builds crane and cosign the first time, and serves a registry.
    pub async fn start() -> Result<Self> {
        Self::launch(|crane, dir, authority| Self::serve(crane, authority, dir)).await
    }

    /// A registry that serves the OCI 1.1 referrers API (crane patched by
    /// `tests/registry/build-referrers.sh`), so cosign v3 stores its
    /// bundles as referrers without the `sha256-<hex>` referrers tag.
    pub async fn start_with_referrers_api() -> Result<Self> {
        let crane = build_script("registry/build-referrers.sh")?.join("crane");
        Self::launch(|_, dir, authority| {
            let args =
                ["registry", "serve", "--referrers", "--address", authority].map(str::to_owned);
            Process::spawn_exiting_with_stdin(
                "registry",
                &crane,
                &args,
                &[],
                dir.join("registry.log"),
            )
        })
        .await
    }

    /// A registry that asks for [`USERNAME`] and [`PASSWORD`] (the CNCF
    /// distribution registry with htpasswd authentication, built by
    /// `tests/distribution/build.sh`), holding what is pushed in memory.
    pub async fn start_authenticated() -> Result<Self> {
        let distribution = build_script("distribution/build.sh")?.join("registry");
        Self::launch(|_, dir, authority| {
            let htpasswd = dir.join("htpasswd");
            let config = dir.join("config.yml");
            let io = |e: std::io::Error| Error::Binaries(format!("the registry's configuration: {e}"));
            std::fs::write(&htpasswd, format!("{HTPASSWD}\n")).map_err(io)?;
            std::fs::write(
                &config,
                format!(
                    "version: 0.1\nlog:\n  level: warn\nstorage:\n  inmemory: {{}}\nhttp:\n  addr: {authority}\nauth:\n  htpasswd:\n    realm: capwasm-test\n    path: {}\n",
                    htpasswd.display()
                ),
            )
            .map_err(io)?;
            let args = ["serve".to_owned(), config.display().to_string()];
            Process::spawn_exiting_with_stdin(
                "registry",
                &distribution,
                &args,
                &[],
                dir.join("registry.log"),
            )
        })
        .await
    }

    /// Builds crane and cosign the first time, starts what `serve` starts
    /// (given crane, a directory of its own and a loopback address) and
    /// waits until it answers.
    async fn launch(serve: impl FnOnce(&Path, &Path, &str) -> Result<Process>) -> Result<Self> {
        let crane = build_script("registry/build.sh")?.join("crane");
        let cosign = build_script("cosign/build.sh")?.join("cosign");
        let cosign_v2 = build_script("cosign/build-v2.sh")?.join("cosign");
        let dir = crate::rundir::create(&crate::rundir::default_root())?;
        let authority = format!("127.0.0.1:{}", free_port()?);
        let process = serve(&crane, dir.path(), &authority)?;
        let mut registry = Self {
            process,
            dir,
            crane,
            cosign,
            cosign_v2,
            authority,
        };
        registry.wait_ready().await?;
        Ok(registry)
    }

    fn serve(crane: &Path, authority: &str, dir: &Path) -> Result<Process> {
        let args = ["registry", "serve", "--address", authority].map(str::to_owned);
        Process::spawn_exiting_with_stdin("registry", crane, &args, &[], dir.join("registry.log"))
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let started = Instant::now();
        // An authenticated registry answers 401: an answer is enough.
        while probe::get(&self.authority, "/v2/").await.is_none() {
            if let Some(status) = self.process.exited() {
                return Err(self.process.not_ready(format!("exited: {status}")));
            }
            if started.elapsed() > READY {
                return Err(self
                    .process
                    .not_ready(format!("no answer within {READY:?}")));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Stops the registry: its port then refuses connections, and what it
    /// held is gone.
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// `127.0.0.1:<port>/<repository>:<tag>`.
    pub fn image(&self, repository: &str, tag: &str) -> String {
        format!("{}/{repository}:{tag}", self.authority)
    }

    /// Makes a cosign key pair named `name`.
    pub fn key_pair(&self, name: &str) -> Result<KeyPair> {
        let dir = self.dir.path().join(format!("key-{name}"));
        std::fs::create_dir_all(&dir).map_err(|e| Error::Binaries(format!("{e}")))?;
        self.run(&self.cosign_v2, &["generate-key-pair"], Some(&dir))?;
        let public_pem = std::fs::read_to_string(dir.join("cosign.pub"))
            .map_err(|e| Error::Binaries(format!("cosign.pub: {e}")))?;
        Ok(KeyPair {
            private: dir.join("cosign.key"),
            public_pem,
        })
    }

    /// Signs `image` (by digest) with `key` as cosign v3 does by default:
    /// a Sigstore bundle stored as a referrer of the image (through the
    /// referrers tag, unless the registry serves the referrers API). Offline: a
    /// signing config naming no transparency log or timestamp authority.
    pub fn sign(&self, image: &str, key: &KeyPair) -> Result<()> {
        let config = self.dir.path().join("signing-config.json");
        std::fs::write(
            &config,
            r#"{"mediaType":"application/vnd.dev.sigstore.signingconfig.v0.2+json","rekorTlogConfig":{},"tsaConfig":{}}"#,
        )
        .map_err(|source| Error::Io {
            path: config.clone(),
            source,
        })?;
        let (key, config) = (
            key.private.display().to_string(),
            config.display().to_string(),
        );
        self.run(
            &self.cosign,
            &[
                "sign",
                "--key",
                &key,
                "--signing-config",
                &config,
                "--allow-http-registry",
                "--allow-insecure-registry",
                "--yes",
                image,
            ],
            None,
        )
        .map(|_| ())
    }

    /// Signs `image` (by digest) with `key` as cosign v2 did offline: a
    /// simple-signing payload in the `sha256-<hex>.sig` manifest beside
    /// the image, no transparency log.
    pub fn sign_legacy(&self, image: &str, key: &KeyPair) -> Result<()> {
        let key = key.private.display().to_string();
        self.run(
            &self.cosign_v2,
            &[
                "sign",
                "--key",
                &key,
                "--tlog-upload=false",
                "--allow-http-registry",
                "--allow-insecure-registry",
                "--yes",
                image,
            ],
            None,
        )
        .map(|_| ())
    }

    /// Checks `image`'s signature against `key` as a user would, with
    /// `cosign verify` (offline: no transparency log).
    ///
    /// # Errors
    ///
    /// If cosign finds no signature by `key`.
    pub fn verify(&self, image: &str, key: &KeyPair) -> Result<()> {
        let public = self.public_key_file(key)?;
        self.verify_offline(
            &public,
            &[
                "verify",
                "--key",
                &public,
                "--insecure-ignore-tlog=true",
                "--allow-http-registry",
                "--allow-insecure-registry",
                image,
            ],
        )
    }

    /// Checks `bundle` (`cosign sign-blob --bundle`) of `file` against
    /// `key` as a user would, with `cosign verify-blob` (offline).
    ///
    /// # Errors
    ///
    /// If the signature is not `key`'s over `file`.
    pub fn verify_blob(&self, file: &Path, bundle: &Path, key: &KeyPair) -> Result<()> {
        let public = self.public_key_file(key)?;
        let (file, bundle) = (file.display().to_string(), bundle.display().to_string());
        self.verify_offline(
            &public,
            &[
                "verify-blob",
                "--key",
                &public,
                "--bundle",
                &bundle,
                "--insecure-ignore-tlog=true",
                &file,
            ],
        )
    }

    /// `key`'s public half written to a file of this registry's directory.
    fn public_key_file(&self, key: &KeyPair) -> Result<String> {
        let public = self.dir.path().join("verify.pub");
        std::fs::write(&public, &key.public_pem).map_err(|source| Error::Io {
            path: public.clone(),
            source,
        })?;
        Ok(public.display().to_string())
    }

    /// Releases `candidate` (an image pushed by digest) as `tag` the way a
    /// publisher should: its digest signed with `key`, and only then `tag`
    /// (a reference or a bare tag) moved to it, so the tag never names an
    /// unsigned digest.
    ///
    /// # Errors
    ///
    /// If cosign or crane fails.
    pub fn release(&self, candidate: &str, key: &KeyPair, tag: &str) -> Result<()> {
        self.sign(candidate, key)?;
        let name = tag.rsplit(':').next().unwrap_or(tag);
        self.crane(&["tag", candidate, name])?;
        Ok(())
    }

    /// `crane` with `args`, against this registry over plain HTTP; what it printed.
    pub fn crane(&self, args: &[&str]) -> Result<String> {
        let mut all = args.to_vec();
        all.push("--insecure");
        self.run(&self.crane, &all, None)
    }

    /// cosign v3 with `args` and `env`, against this registry; what it printed.
    pub fn cosign_v3(&self, args: &[&str], env: &[(&str, &str)]) -> Result<String> {
        self.run_with(&self.cosign, args, None, env)
    }

    fn run(&self, binary: &Path, args: &[&str], dir: Option<&Path>) -> Result<String> {
        self.run_with(binary, args, dir, &[])
    }

    /// cosign's `verify` and `verify-blob` with the public key file
    /// `public`, offline. Naming a Rekor key (any: with
    /// `--insecure-ignore-tlog` none is read) keeps cosign from fetching
    /// the public Sigstore trust root from the internet, which it otherwise
    /// tries even for a key.
    fn verify_offline(&self, public: &str, args: &[&str]) -> Result<()> {
        self.run_with(
            &self.cosign,
            args,
            None,
            &[("SIGSTORE_REKOR_PUBLIC_KEY", public)],
        )
        .map(|_| ())
    }

    fn run_with(
        &self,
        binary: &Path,
        args: &[&str],
        dir: Option<&Path>,
        env: &[(&str, &str)],
    ) -> Result<String> {
        let mut command = Command::new(binary);
        command
            .args(args)
            .envs(env.iter().copied())
            .env("COSIGN_PASSWORD", KEY_PASSWORD)
            .env("HOME", self.dir.path())
            .stdin(std::process::Stdio::null());
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        let output = command.output().map_err(|source| Error::Spawn {
            name: "registry tool",
            binary: binary.to_owned(),
            source,
        })?;
        if !output.status.success() {
            return Err(Error::Binaries(format!(
                "{} {} failed ({}): {}",
                binary.display(),
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }
}
