//! A private Sigstore on loopback, for keyless signing without the
//! internet: an OIDC issuer in this process that mints ID tokens for any
//! identity, a Fulcio (ephemeral CA, no certificate-transparency log) that
//! certifies them, and a timestamp authority (in-memory signer) that proves
//! when a signature was made; with [`Sigstore::start_with_log`] also a
//! Rekor v2 transparency log (rekor-tiles' POSIX backend, its tiles in the
//! run directory) that logs each signature. Fulcio, the timestamp authority
//! and Rekor are built from their Go modules by `tests/sigstore/build.sh`,
//! Fulcio and the timestamp authority patched to listen on loopback only.
//!
//! cosign v3 signs against it with the signing config and trust root
//! [`Sigstore::start`] writes; a verifier trusts what it signed through
//! [`Sigstore::trusted_root_json`]. Every server has fresh keys, so another
//! [`Sigstore`]'s trust root is an untrusted one.
//!
//! Rekor v2 entries carry no integrated time (Rekor v1's, vouched for by
//! its signed entry timestamps, did): the signing time still comes from the
//! timestamp authority (cosign v3 refuses to log in Rekor v2 without one,
//! and sigstore-verify to accept a Rekor v2 entry without an RFC 3161
//! timestamp), and the log proves inclusion, with a checkpoint signed by
//! the log's key, which the trust root lists under the log's origin.
//!
//! The issuer serves two issuers, each an issuer URL Fulcio knows:
//! [`Sigstore::email_issuer`], whose certificates name an email address
//! ([`Sigstore::token`]), and [`Sigstore::github_issuer`], which Fulcio
//! treats as GitHub Actions' (`github-workflow`), whose certificates name a
//! workflow ([`Sigstore::workflow_token`], [`Sigstore::workflow_subject`]).
//!
//! The ID tokens are ES256 JWTs. cosign reads `--identity-token` inline
//! only when it parses as RS256, and opens anything else as a file, so
//! [`Sigstore::sign`] and [`Sigstore::attest_provenance`] hand it the
//! token in a file; the discovery documents list ES256, which Fulcio's OIDC
//! verifier then accepts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::routing::get;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::binaries::build_script;
use crate::ports::free_port;
use crate::probe;
use crate::process::Process;
use crate::registry::Registry;
use crate::{Error, Result};

/// How long each server gets to answer.
const READY: Duration = Duration::from_secs(60);
/// The audience Fulcio's issuers are configured with (`ClientID`), as
/// public Sigstore's.
const AUDIENCE: &str = "sigstore";
/// How long an ID token is valid.
const TOKEN_LIFETIME: u64 = 600;
/// The issuer paths, and Fulcio's type for each.
const ISSUERS: [(&str, &str); 2] = [("email", "email"), ("github", "github-workflow")];
/// The key id of the issuer's one signing key.
const KEY_ID: &str = "capwasm-test-oidc";
/// A commit, for the workflow claims and the provenance.
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
/// When the signing config's services start being valid (any past time).
const VALID_FROM: &str = "2020-01-01T00:00:00Z";
/// The DER of a P-256 public key (SubjectPublicKeyInfo) up to its point:
/// id-ecPublicKey, prime256v1, then the BIT STRING of 65 bytes.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// A running private Sigstore; everything it started stops when dropped.
pub struct Sigstore {
    fulcio: Process,
    timestamps: Process,
    /// Rekor v2, with [`Sigstore::start_with_log`].
    log: Option<Process>,
    oidc: OidcIssuer,
    signing_config: PathBuf,
    trusted_root: PathBuf,
    trusted_root_json: String,
    /// Names the files tokens and predicates are written to.
    written: AtomicU64,
    /// Last: removed once the processes are gone.
    dir: TempDir,
}

impl Sigstore {
    /// Builds Fulcio, the timestamp authority (`tests/sigstore/build.sh`)
    /// and cosign (`tests/cosign/build.sh`) the first time; starts the OIDC
    /// issuer, then the timestamp authority and Fulcio (which reads the
    /// issuers' discovery documents once, as it starts), and writes the
    /// signing config and trust root for cosign: no transparency log.
    pub async fn start() -> Result<Self> {
        Self::launch(false).await
    }

    /// As [`Sigstore::start`], and a Rekor v2 transparency log besides: the
    /// signing config names it (`api-version=2`), so cosign logs each
    /// signature there and puts the entry, with its inclusion proof and the
    /// log's signed checkpoint, into the bundle; the trust root lists the
    /// log's key, so a verifier requires and checks that entry.
    pub async fn start_with_log() -> Result<Self> {
        Self::launch(true).await
    }

    async fn launch(with_log: bool) -> Result<Self> {
        let binaries = build_script("sigstore/build.sh")?;
        let cosign = build_script("cosign/build.sh")?.join("cosign");
        let dir = crate::rundir::create(&crate::rundir::default_root())?;
        let oidc = OidcIssuer::start()?;
        let timestamps = Service::timestamps(&binaries, dir.path()).await?;
        let fulcio = Service::fulcio(&binaries, dir.path(), &oidc).await?;
        let log = if with_log {
            Some(Log::start(&binaries, dir.path()).await?)
        } else {
            None
        };

        let signing_config = dir.path().join("signing-config.json");
        let trusted_root = dir.path().join("trusted-root.json");
        let service = |url: &str, version: u8| {
            format!("url={url},api-version={version},start-time={VALID_FROM},operator=capwasm-test")
        };
        let (fulcio_service, tsa_service) = (service(&fulcio.url, 1), service(&timestamps.url, 1));
        let mut args = vec![
            "signing-config".to_owned(),
            "create".to_owned(),
            format!("--fulcio={fulcio_service}"),
            format!("--tsa={tsa_service}"),
            "--tsa-config=ANY".to_owned(),
        ];
        if let Some(log) = &log {
            // Rekor v2's API (`/api/v2/log/entries`); v1 would be Rekor v1's.
            args.push(format!("--rekor={}", service(&log.url, 2)));
            args.push("--rekor-config=ANY".to_owned());
        }
        args.extend(["--out".to_owned(), signing_config.display().to_string()]);
        run_cosign(&cosign, dir.path(), &args)?;

        let mut args = vec![
            "trusted-root".to_owned(),
            "create".to_owned(),
            format!(
                "--fulcio=url={},certificate-chain={}",
                fulcio.url,
                fulcio.chain.display()
            ),
            format!(
                "--tsa=url={},certificate-chain={}",
                timestamps.url,
                timestamps.chain.display()
            ),
        ];
        if let Some(log) = &log {
            // With its origin, cosign gives the log the ID its checkpoints'
            // signatures name (the signed-note key hash), as Rekor v2's.
            args.push(format!(
                "--rekor=url={},public-key={},start-time={VALID_FROM},origin={}",
                log.url,
                log.public_key.display(),
                log.origin
            ));
        }
        args.extend(["--out".to_owned(), trusted_root.display().to_string()]);
        run_cosign(&cosign, dir.path(), &args)?;
        let trusted_root_json =
            std::fs::read_to_string(&trusted_root).map_err(|source| Error::Io {
                path: trusted_root.clone(),
                source,
            })?;
        Ok(Self {
            fulcio: fulcio.process,
            timestamps: timestamps.process,
            log: log.map(|log| log.process),
            oidc,
            signing_config,
            trusted_root,
            trusted_root_json,
            written: AtomicU64::new(0),
            dir,
        })
    }

    /// The trust root (`trusted_root.json`): this Fulcio's CA and this
    /// timestamp authority's chain; this Rekor's key if it has one
    /// ([`Sigstore::start_with_log`]), no other log.
    pub fn trusted_root_json(&self) -> String {
        self.trusted_root_json.clone()
    }

    /// The file of [`Sigstore::trusted_root_json`], for cosign's `--trusted-root`.
    pub fn trusted_root(&self) -> &Path {
        &self.trusted_root
    }

    /// The signing config for cosign's `--signing-config`: this Fulcio and
    /// this timestamp authority, and this Rekor if it has one.
    pub fn signing_config(&self) -> &Path {
        &self.signing_config
    }

    /// The issuer URL of email identities (Fulcio type `email`):
    /// certificates name the token's `email` claim.
    pub fn email_issuer(&self) -> String {
        self.oidc.issuer("email")
    }

    /// The issuer URL of GitHub Actions workflow identities (Fulcio type
    /// `github-workflow`): certificates name the workflow, see
    /// [`Sigstore::workflow_subject`].
    pub fn github_issuer(&self) -> String {
        self.oidc.issuer("github")
    }

    /// An ID token from `issuer` (one of this Sigstore's issuer URLs) for
    /// the verified email address `subject_email`, valid ten minutes. From
    /// [`Sigstore::email_issuer`] its certificate names `subject_email`.
    ///
    /// # Errors
    ///
    /// If `issuer` is not one of this Sigstore's.
    pub fn token(&self, issuer: &str, subject_email: &str) -> Result<String> {
        self.oidc.mint(
            issuer,
            json!({"sub": subject_email, "email": subject_email, "email_verified": true}),
        )
    }

    /// An ID token from [`Sigstore::github_issuer`] as GitHub Actions would
    /// issue one to workflow `workflow_ref` (`<path>@<ref>`, such as
    /// `.github/workflows/release.yml@refs/heads/main`) of `repository`
    /// (`owner/name`), run on a push. Its certificate's subject is
    /// [`Sigstore::workflow_subject`]: `https://github.com/<repository>/<workflow_ref>`.
    ///
    /// # Errors
    ///
    /// If `workflow_ref` has no `@<ref>` or `repository` no owner.
    pub fn workflow_token(&self, repository: &str, workflow_ref: &str) -> Result<String> {
        let (path, git_ref) = workflow_ref.split_once('@').ok_or_else(|| {
            Error::Tool(format!("workflow ref {workflow_ref:?} is not <path>@<ref>"))
        })?;
        let (owner, _) = repository.split_once('/').ok_or_else(|| {
            Error::Tool(format!("repository {repository:?} is not <owner>/<name>"))
        })?;
        let workflow = Path::new(path)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or(path);
        let job_workflow_ref = format!("{repository}/{workflow_ref}");
        self.oidc.mint(
            &self.github_issuer(),
            json!({
                "sub": format!("repo:{repository}:ref:{git_ref}"),
                "repository": repository,
                "repository_id": "1234",
                "repository_owner": owner,
                "repository_owner_id": "5678",
                "repository_visibility": "public",
                "ref": git_ref,
                "sha": COMMIT,
                "event_name": "push",
                "workflow": workflow,
                "workflow_ref": job_workflow_ref,
                "workflow_sha": COMMIT,
                "job_workflow_ref": job_workflow_ref,
                "job_workflow_sha": COMMIT,
                "runner_environment": "github-hosted",
                "run_id": "42",
                "run_attempt": "1",
            }),
        )
    }

    /// The subject (URI SAN) of the certificate a
    /// [`Sigstore::workflow_token`] for the same arguments yields.
    pub fn workflow_subject(repository: &str, workflow_ref: &str) -> String {
        format!("https://github.com/{repository}/{workflow_ref}")
    }

    /// Signs `image` (on `registry`, by digest) keyless with cosign v3 as
    /// the holder of `token`: a Sigstore bundle stored as a referrer of the
    /// image, its certificate from this Fulcio, its time from this
    /// timestamp authority.
    ///
    /// # Errors
    ///
    /// If cosign fails; its message says why.
    pub fn sign(&self, registry: &Registry, image: &str, token: &str) -> Result<()> {
        let token = self.write_file("token.jwt", token)?;
        self.cosign(registry, "sign", &[], &token, image)
    }

    /// Attests SLSA v1 provenance of `image` (on `registry`, by digest)
    /// keyless as the holder of `token` (`cosign attest --type
    /// slsaprovenance1`): built by `builder_id` from `source_repository`
    /// (a URL such as `https://github.com/acme/widget`) at its
    /// `refs/heads/main`.
    ///
    /// # Errors
    ///
    /// If cosign fails; its message says why.
    pub fn attest_provenance(
        &self,
        registry: &Registry,
        image: &str,
        token: &str,
        builder_id: &str,
        source_repository: &str,
    ) -> Result<()> {
        let predicate = json!({
            "buildDefinition": {
                "buildType": "https://slsa-framework.github.io/github-actions-buildtypes/workflow/v1",
                "externalParameters": {
                    "workflow": {
                        "ref": "refs/heads/main",
                        "repository": source_repository,
                        "path": ".github/workflows/release.yml",
                    },
                },
                "resolvedDependencies": [{
                    "uri": format!("git+{source_repository}@refs/heads/main"),
                    "digest": {"gitCommit": COMMIT},
                }],
            },
            "runDetails": {
                "builder": {"id": builder_id},
            },
        });
        let predicate = self.write_file("provenance.json", &predicate.to_string())?;
        let token = self.write_file("token.jwt", token)?;
        let predicate = predicate.display().to_string();
        self.cosign(
            registry,
            "attest",
            &["--predicate", &predicate, "--type", "slsaprovenance1"],
            &token,
            image,
        )
    }

    /// Checks `image`'s keyless signature as a user would, with `cosign
    /// verify` against this trust root: signed by `subject` from `issuer`,
    /// its time from the timestamp authority (the certificate lives ten
    /// minutes), its entry in this Rekor if it has one, no
    /// certificate-transparency log.
    ///
    /// # Errors
    ///
    /// If cosign finds no such signature.
    pub fn verify(
        &self,
        registry: &Registry,
        image: &str,
        subject: &str,
        issuer: &str,
    ) -> Result<()> {
        let root = self.trusted_root.display().to_string();
        let tuf = self.dir.path().join("tuf").display().to_string();
        let ignore_tlog = if self.log.is_some() {
            "--insecure-ignore-tlog=false"
        } else {
            "--insecure-ignore-tlog=true"
        };
        registry
            .cosign_v3(
                &[
                    "verify",
                    "--trusted-root",
                    &root,
                    "--use-signed-timestamps",
                    ignore_tlog,
                    "--insecure-ignore-sct=true",
                    "--certificate-identity",
                    subject,
                    "--certificate-oidc-issuer",
                    issuer,
                    "--allow-http-registry",
                    "--allow-insecure-registry",
                    image,
                ],
                &[("TUF_ROOT", &tuf)],
            )
            .map(|_| ())
    }

    /// `cosign <command> <args>` of `image` with the token in file `token`,
    /// this signing config and trust root.
    fn cosign(
        &self,
        registry: &Registry,
        command: &str,
        args: &[&str],
        token: &Path,
        image: &str,
    ) -> Result<()> {
        let (token, config, root) = (
            token.display().to_string(),
            self.signing_config.display().to_string(),
            self.trusted_root.display().to_string(),
        );
        let tuf = self.dir.path().join("tuf").display().to_string();
        let mut all = vec![command];
        all.extend_from_slice(args);
        all.extend_from_slice(&[
            "--identity-token",
            &token,
            "--signing-config",
            &config,
            "--trusted-root",
            &root,
            "--allow-http-registry",
            "--allow-insecure-registry",
            "--yes",
            image,
        ]);
        registry.cosign_v3(&all, &[("TUF_ROOT", &tuf)]).map(|_| ())
    }

    /// Writes `contents` to a new file `<n>-<name>` in the run directory.
    fn write_file(&self, name: &str, contents: &str) -> Result<PathBuf> {
        let n = self.written.fetch_add(1, Ordering::Relaxed);
        crate::rundir::write(self.dir.path(), &format!("{n}-{name}"), contents)
    }
}

impl Drop for Sigstore {
    /// Rekor, Fulcio and the timestamp authority stop before the OIDC
    /// issuer (a field, dropped after) and the run directory (which holds
    /// Rekor's tiles).
    fn drop(&mut self) {
        if let Some(log) = &mut self.log {
            log.stop();
        }
        self.fulcio.stop();
        self.timestamps.stop();
    }
}

/// Fulcio or the timestamp authority, answering.
struct Service {
    process: Process,
    /// What cosign's signing config and trust root name.
    url: String,
    /// Its certificate chain, PEM, written to the run directory.
    chain: PathBuf,
}

impl Service {
    /// The timestamp authority, signing with a key it makes in memory.
    async fn timestamps(binaries: &Path, dir: &Path) -> Result<Self> {
        let authority = format!("127.0.0.1:{}", free_port()?);
        let (host, port) = split(&authority);
        let args = [
            "serve",
            "--host",
            host,
            "--port",
            port,
            "--timestamp-signer",
            "memory",
            "--disable-ntp-monitoring",
        ]
        .map(str::to_owned);
        let mut process = Process::spawn_exiting_with_stdin(
            "timestamp-authority",
            &binaries.join("timestamp-server"),
            &args,
            &[],
            dir.join("timestamp-authority.log"),
        )?;
        let chain = wait_for(&mut process, &authority, "/api/v1/timestamp/certchain").await?;
        Ok(Self {
            process,
            url: format!("http://{authority}/api/v1/timestamp"),
            chain: crate::rundir::write(dir, "tsa-chain.pem", &chain)?,
        })
    }

    /// Fulcio with an ephemeral CA and no certificate-transparency log,
    /// certifying the identities of `oidc`'s issuers (up before, as Fulcio
    /// reads their discovery documents once, as it starts).
    async fn fulcio(binaries: &Path, dir: &Path, oidc: &OidcIssuer) -> Result<Self> {
        let issuers: serde_json::Map<String, Value> = ISSUERS
            .iter()
            .map(|(path, kind)| {
                let issuer = oidc.issuer(path);
                let entry = json!({"IssuerURL": issuer, "ClientID": AUDIENCE, "Type": kind});
                (issuer, entry)
            })
            .collect();
        let config = json!({ "OIDCIssuers": issuers }).to_string();
        let config = crate::rundir::write(dir, "fulcio-config.json", &config)?;
        let authority = format!("127.0.0.1:{}", free_port()?);
        let (host, port) = split(&authority);
        let socket = format!("@capwasm-fulcio-{}-{port}", std::process::id());
        let args = [
            "serve",
            "--ca",
            "ephemeralca",
            "--config-path",
            &config.display().to_string(),
            "--ct-log-url",
            "",
            "--host",
            host,
            "--port",
            port,
            // gRPC and metrics on ports of their own choosing (metrics
            // patched in to bind --host); the gRPC port must differ from
            // --port, or Fulcio serves both on one and v1.8.8 panics.
            "--grpc-host",
            host,
            "--grpc-port",
            "0",
            "--metrics-port",
            "0",
            // The legacy gRPC socket, abstract so nothing is left behind.
            "--legacy-unix-domain-socket",
            &socket,
        ]
        .map(str::to_owned);
        let log = dir.join("fulcio.log");
        let mut process = Process::spawn_exiting_with_stdin(
            "fulcio",
            &binaries.join("fulcio"),
            &args,
            &[],
            log.clone(),
        )?;
        let chain = wait_for(&mut process, &authority, "/api/v1/rootCert").await?;
        // An issuer it could not read as it started is only logged, and
        // every token of it refused later.
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        if log.contains("error creating provider") {
            return Err(process.not_ready("it could not read an OIDC issuer's discovery".into()));
        }
        Ok(Self {
            process,
            url: format!("http://{authority}"),
            chain: crate::rundir::write(dir, "fulcio-chain.pem", &chain)?,
        })
    }
}

/// Rekor v2, answering: rekor-tiles' POSIX server, its tiles and
/// checkpoints in the run directory, signing checkpoints with a P-256 key
/// made here.
struct Log {
    process: Process,
    /// What cosign's signing config and trust root name.
    url: String,
    /// Its public key, PEM, written to the run directory.
    public_key: PathBuf,
    /// The origin of its checkpoints (`--hostname`): the host of
    /// [`Log::url`], without the port, as sigstore-go expects it.
    origin: String,
}

impl Log {
    async fn start(binaries: &Path, dir: &Path) -> Result<Self> {
        let rng = SystemRandom::new();
        let failed = |what: &str| Error::Tool(format!("the test Rekor's key: {what}"));
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| failed("generating it"))?;
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|_| failed("reading it"))?;
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(key.public_key().as_ref());
        let private_key =
            crate::rundir::write(dir, "rekor-key.pem", &pem("PRIVATE KEY", pkcs8.as_ref()))?;
        let public_key = crate::rundir::write(dir, "rekor-key.pub", &pem("PUBLIC KEY", &spki))?;
        let storage = dir.join("rekor-tiles");
        std::fs::create_dir_all(&storage).map_err(|source| Error::Io {
            path: storage.clone(),
            source,
        })?;

        let authority = format!("127.0.0.1:{}", free_port()?);
        let (host, port) = split(&authority);
        let grpc_port = free_port()?.to_string();
        let args = [
            "serve",
            // The checkpoints' origin, which the trust root names too:
            // the URL's host, where cosign (sigstore-go) looks for it.
            "--hostname",
            host,
            "--storage-dir",
            &storage.display().to_string(),
            "--signer-filepath",
            &private_key.display().to_string(),
            "--http-address",
            host,
            "--http-port",
            port,
            // The HTTP API is a gateway to this gRPC server (port 0 is
            // refused for both).
            "--grpc-address",
            host,
            "--grpc-port",
            &grpc_port,
            // Metrics on --http-address, a port of their own choosing.
            "--http-metrics-port",
            "0",
            // An entry is answered once a checkpoint covers it: publish
            // often (upstream: every 10 s, batches after 250 ms).
            "--checkpoint-interval",
            "200ms",
            "--batch-max-age",
            "50ms",
        ]
        .map(str::to_owned);
        let mut process = Process::spawn_exiting_with_stdin(
            "rekor",
            &binaries.join("rekor-server"),
            &args,
            &[],
            dir.join("rekor.log"),
        )?;
        wait_for(&mut process, &authority, "/healthz").await?;
        Ok(Self {
            process,
            url: format!("http://{authority}"),
            public_key,
            origin: host.to_owned(),
        })
    }
}

/// `der` as PEM, labelled `label`.
fn pem(label: &str, der: &[u8]) -> String {
    let base64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<String> = base64
        .as_bytes()
        .chunks(64)
        .map(|line| String::from_utf8_lossy(line).into_owned())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// `host:port` as (host, port).
fn split(authority: &str) -> (&str, &str) {
    authority.rsplit_once(':').unwrap_or((authority, ""))
}

/// Waits until `process` answers 200 to `GET path` on `authority`, and
/// returns the body.
async fn wait_for(process: &mut Process, authority: &str, path: &str) -> Result<String> {
    let started = Instant::now();
    loop {
        if let Some((200, body)) = probe::get(authority, path).await {
            return Ok(body);
        }
        if let Some(status) = process.exited() {
            return Err(process.not_ready(format!("exited: {status}")));
        }
        if started.elapsed() > READY {
            return Err(process.not_ready(format!("{path} did not answer within {READY:?}")));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// cosign with `args`, HOME and TUF_ROOT in `dir`; what it printed.
fn run_cosign(cosign: &Path, dir: &Path, args: &[impl AsRef<str>]) -> Result<String> {
    let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    let output = Command::new(cosign)
        .args(&args)
        .env("HOME", dir)
        .env("TUF_ROOT", dir.join("tuf"))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| Error::Spawn {
            name: "cosign",
            binary: cosign.to_owned(),
            source,
        })?;
    if !output.status.success() {
        return Err(Error::Tool(format!(
            "cosign {} failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The OIDC issuers: discovery and JWKS at `/<issuer>/...` for each of
/// [`ISSUERS`], served by a thread of its own (so that the blocking cosign
/// runs Fulcio verifies tokens during cannot starve it), with one ES256
/// signing key.
struct OidcIssuer {
    base: String,
    key: EcdsaKeyPair,
    rng: SystemRandom,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl OidcIssuer {
    fn start() -> Result<Self> {
        let rng = SystemRandom::new();
        let failed = |what: &str| Error::Tool(format!("the test OIDC issuer's key: {what}"));
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| failed("generating it"))?;
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|_| failed("reading it"))?;
        // An uncompressed point: 0x04, x, y.
        let point = key.public_key().as_ref();
        let jwks = json!({"keys": [{
            "kty": "EC",
            "crv": "P-256",
            "alg": "ES256",
            "use": "sig",
            "kid": KEY_ID,
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        }]});

        let io = |source| Error::Io {
            path: "127.0.0.1:0".into(),
            source,
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(io)?;
        listener.set_nonblocking(true).map_err(io)?;
        let base = format!("http://{}", listener.local_addr().map_err(io)?);
        let app = Router::new()
            .route("/{issuer}/.well-known/openid-configuration", get(discovery))
            .route("/{issuer}/jwks", get(keys))
            .with_state(Arc::new(Served {
                base: base.clone(),
                jwks,
            }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(io)?;
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("oidc-issuer".into())
            .spawn(move || {
                // Stopping drops the runtime, and every connection with it.
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::select! {
                        _ = axum::serve(listener, app) => {}
                        _ = stopped => {}
                    }
                });
            })
            .map_err(io)?;
        Ok(Self {
            base,
            key,
            rng,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The issuer URL of issuer path `path`.
    fn issuer(&self, path: &str) -> String {
        format!("{}/{path}", self.base)
    }

    /// An ES256 ID token from `issuer` with `claims` besides the standard ones.
    fn mint(&self, issuer: &str, claims: Value) -> Result<String> {
        if !ISSUERS.iter().any(|(path, _)| self.issuer(path) == issuer) {
            return Err(Error::Tool(format!(
                "{issuer} is not an issuer of this Sigstore"
            )));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut body = json!({
            "iss": issuer,
            "aud": AUDIENCE,
            "iat": now,
            "nbf": now,
            "exp": now + TOKEN_LIFETIME,
        });
        if let (Some(body), Value::Object(claims)) = (body.as_object_mut(), claims) {
            body.extend(claims);
        }
        let header = json!({"alg": "ES256", "typ": "JWT", "kid": KEY_ID});
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(body.to_string())
        );
        let signature = self
            .key
            .sign(&self.rng, signed.as_bytes())
            .map_err(|_| Error::Tool("signing an ID token".into()))?;
        Ok(format!(
            "{signed}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
    }
}

impl Drop for OidcIssuer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What the OIDC issuer's thread serves.
struct Served {
    /// `http://127.0.0.1:<port>`.
    base: String,
    /// The JSON Web Key Set of every issuer.
    jwks: Value,
}

/// Whether `issuer` is one of [`ISSUERS`]' paths.
fn known(issuer: &str) -> Result<(), StatusCode> {
    if ISSUERS.iter().any(|(path, _)| *path == issuer) {
        Ok(())
    } else {
        Err(StatusCode::NOT_FOUND)
    }
}

/// The signing keys of issuer `/<issuer>`.
async fn keys(
    State(served): State<Arc<Served>>,
    UrlPath(issuer): UrlPath<String>,
) -> Result<Json<Value>, StatusCode> {
    known(&issuer)?;
    Ok(Json(served.jwks.clone()))
}

/// The discovery document of issuer `/<issuer>`.
async fn discovery(
    State(served): State<Arc<Served>>,
    UrlPath(issuer): UrlPath<String>,
) -> Result<Json<Value>, StatusCode> {
    known(&issuer)?;
    let issuer = format!("{}/{issuer}", served.base);
    Ok(Json(json!({
        "issuer": issuer,
        "jwks_uri": format!("{issuer}/jwks"),
        "authorization_endpoint": format!("{issuer}/auth"),
        "token_endpoint": format!("{issuer}/token"),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    })))
}
