//! Errors of loading a provider and of calling one.

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use super::memory::MemoryBound;
use super::types::ProviderError;

/// Why a provider could not be loaded. The working version, if any, stays.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The component file could not be read.
    #[error("cannot read component {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The expected digest was not a sha256 hex string.
    #[error("expected digest {0:?} is not `sha256:<64 hex digits>` or 64 hex digits")]
    InvalidDigest(String),
    /// The bytes do not have the expected digest.
    #[error("digest mismatch: expected sha256:{expected}, got sha256:{actual}")]
    DigestMismatch {
        /// What the ProviderModule pins.
        expected: String,
        /// What the bytes hash to.
        actual: String,
    },
    /// The precompiled cache holds no compilation of the component.
    #[error("no precompiled sha256:{0} is cached")]
    NotPrecompiled(String),
    /// The bytes are not a WebAssembly component (a core module, or not Wasm).
    #[error("not a WebAssembly component")]
    NotAComponent,
    /// Compiling the component failed.
    #[error("compiling the component failed")]
    Compile(#[source] wasmtime::Error),
    /// The component exports no capwasm world.
    #[error("the component implements no capwasm provider world (exports: {exports})")]
    UnknownWorld {
        /// What it does export.
        exports: String,
    },
    /// The component was built for a WIT package version this host does not support.
    #[error("the component implements {found}; this host supports {supported}")]
    UnsupportedVersion {
        /// The package version the component exports.
        found: String,
        /// The one this host implements.
        supported: &'static str,
    },
    /// The component imports an interface its world does not grant.
    #[error(
        "the component imports {import}, which the {world} world does not grant (it may import: {granted})"
    )]
    ImportNotGranted {
        /// The import, as the component names it.
        import: String,
        /// The component's world.
        world: &'static str,
        /// What the world grants, without versions.
        granted: String,
    },
    /// The component's imports or exports do not match its world.
    #[error("the component does not match the {world} world")]
    Link {
        /// The world it was checked against.
        world: &'static str,
        /// What does not match.
        #[source]
        source: wasmtime::Error,
    },
    /// The check call after loading failed.
    #[error("the component failed its check call")]
    Check(#[source] Box<CallError>),
    /// The config schema the component exports cannot be used.
    #[error("the component's config schema cannot be used")]
    InvalidSchema(#[source] super::schema::SchemaError),
    /// The precompiled cache could not be written (loading still succeeded without it).
    #[error("cannot write the precompiled cache at {path}")]
    Cache {
        /// The cache file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The provider asks for more memory than the engine's instance slots hold.
    #[error("memory limit {asked} bytes is above this host's maximum of {max} bytes")]
    MemoryLimitTooHigh {
        /// What the provider's limits ask for.
        asked: usize,
        /// The operator's maximum.
        max: usize,
    },
    /// Creating the engine failed.
    #[error("creating the WebAssembly engine failed")]
    Engine(#[source] wasmtime::Error),
    /// A blocking task was cancelled or panicked.
    #[error("the loading task did not complete")]
    Join(#[from] tokio::task::JoinError),
}

/// Why a call into a provider did not return the guest's own answer, or the
/// guest's own typed error. Every variant but `Provider` is the host's
/// verdict; all of them fail only the call they happened in.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No provider of that name is loaded.
    #[error("provider {0:?} is not loaded")]
    NotLoaded(String),
    /// The provider implements a world without this export.
    #[error("provider {provider:?} implements the {world} world, which has no {export}")]
    WrongWorld {
        /// The provider.
        provider: String,
        /// Its world.
        world: &'static str,
        /// The export asked for.
        export: &'static str,
    },
    /// The guest trapped (a panic, an out-of-bounds access, stack exhaustion).
    #[error("provider {provider:?} ({digest}) trapped in {export}: {trap}{last_words}", last_words = last_words_suffix(.last_words))]
    Trapped {
        /// The provider.
        provider: String,
        /// The digest of the code that ran.
        digest: String,
        /// The export called.
        export: &'static str,
        /// The trap, as wasmtime describes it.
        trap: String,
        /// What the guest said before it died: its stderr, then the panic
        /// message it sent through `log` (either way, its panic message).
        last_words: String,
    },
    /// The provider's calls about one tenant's objects kept running into
    /// their deadline: those calls are refused for a while (see
    /// `fairness`); the other tenants' calls are made.
    #[error(
        "provider {provider:?} is throttled for {} until {}: {deadlines} of them in a row ran into their deadline",
        Whose(namespace),
        Wall(*ends)
    )]
    Throttled {
        /// The provider.
        provider: String,
        /// The namespace whose objects' calls are refused (empty: calls
        /// about no object).
        namespace: String,
        /// Those calls in a row that ran into their deadline.
        deadlines: u32,
        /// How long its calls are still refused.
        remaining: Duration,
        /// When the throttle ends, by the wall clock (what people read:
        /// unlike `remaining`, the same on every refusal).
        ends: SystemTime,
    },
    /// No turn of the provider (or no instance slot) came free within the
    /// runtime's patience: the call did not start, and may be made again.
    #[error(
        "provider {provider:?} is busy: {export} found none of its turns free (waited {waited:?})"
    )]
    Busy {
        /// The provider.
        provider: String,
        /// The export asked for.
        export: &'static str,
        /// How long it waited.
        waited: Duration,
    },
    /// The call ran past its deadline and was interrupted.
    #[error("provider {provider:?} ({digest}) exceeded its {deadline:?} deadline in {export}")]
    DeadlineExceeded {
        /// The provider.
        provider: String,
        /// The digest of the code that ran.
        digest: String,
        /// The export called.
        export: &'static str,
        /// The deadline.
        deadline: Duration,
    },
    /// The guest tried to grow its memory past its cap, or past what the
    /// budget all guests share could ever give it.
    #[error("provider {provider:?} ({digest}) exceeded {bound} in {export}")]
    MemoryLimit {
        /// The provider.
        provider: String,
        /// The digest of the code that ran.
        digest: String,
        /// The export called.
        export: &'static str,
        /// The bound it ran into.
        bound: MemoryBound,
    },
    /// The guest returned (or passed to the host) more than it may,
    /// counted as the host holds it: elements at their size, bytes in full.
    #[error(
        "provider {provider:?} ({digest}) returned more from {export} than its {limit_bytes}-byte output limit"
    )]
    OutputTooLarge {
        /// The provider.
        provider: String,
        /// The digest of the code that ran.
        digest: String,
        /// The export called.
        export: &'static str,
        /// The cap.
        limit_bytes: usize,
    },
    /// The guest returned a result that breaks the contract.
    #[error("provider {provider:?} ({digest}) returned from {export} an invalid result")]
    InvalidResult {
        /// The provider.
        provider: String,
        /// The digest of the code that ran.
        digest: String,
        /// The export called.
        export: &'static str,
        /// The rule broken, and where.
        #[source]
        violation: super::checks::Violation,
    },
    /// A fresh instance could not be made (the instance pool is full, say).
    #[error("cannot instantiate provider {provider:?} ({digest})")]
    Instantiate {
        /// The provider.
        provider: String,
        /// The digest of the code.
        digest: String,
        /// The cause.
        #[source]
        source: wasmtime::Error,
    },
    /// The guest answered with its own typed error.
    #[error("provider {provider:?} ({digest}) returned an error from {export}: {error}", error = describe(.error))]
    Provider {
        /// The provider.
        provider: String,
        /// The digest of the code that ran.
        digest: String,
        /// The export called.
        export: &'static str,
        /// The guest's error.
        error: ProviderError,
    },
    /// The guest's call failed after a host it may reach turned down the
    /// credentials the host authenticated its request with.
    #[error(
        "provider {provider:?} failed in {export} after {host} refused the credentials of ProviderModule {provider:?} (HTTP {status}): {error}"
    )]
    CredentialsRejected {
        /// The provider.
        provider: String,
        /// The export called.
        export: &'static str,
        /// The host that refused them.
        host: String,
        /// Its answer's status (401 or 403).
        status: u16,
        /// The guest's own error.
        error: ProviderError,
    },
    /// The runtime stopped (the operator is shutting down) before the call ended.
    #[error("the call of {export} of provider {provider:?} was abandoned: the runtime is stopping")]
    Abandoned {
        /// The provider.
        provider: String,
        /// The export called.
        export: &'static str,
    },
}

impl CallError {
    /// Whether the code broke (trapped, ran out of time or memory, said
    /// too much, or answered what the contract refuses) rather than
    /// answered: what a canary is judged by.
    pub fn broke(&self) -> bool {
        matches!(
            self,
            Self::Trapped { .. }
                | Self::DeadlineExceeded { .. }
                | Self::MemoryLimit { .. }
                | Self::OutputTooLarge { .. }
                | Self::InvalidResult { .. }
                | Self::Instantiate { .. }
        )
    }

    /// The closed set of outcome labels for metrics and spans.
    pub fn outcome(&self) -> &'static str {
        match self {
            Self::NotLoaded(_) | Self::WrongWorld { .. } => "not_loaded",
            Self::Trapped { .. } => "trap",
            Self::DeadlineExceeded { .. } => "timeout",
            Self::Throttled { .. } => "throttled",
            Self::Busy { .. } => "busy",
            Self::MemoryLimit { .. } => "memory_limit",
            Self::OutputTooLarge { .. } => "output_too_large",
            Self::InvalidResult { .. } => "invalid_result",
            Self::Instantiate { .. } => "instantiate",
            Self::Abandoned { .. } => "abandoned",
            Self::CredentialsRejected { .. } => "credentials_rejected",
            Self::Provider { error, .. } => match error {
                ProviderError::RetryAfter(_) => "retry_after",
                ProviderError::Terminal(_) => "terminal",
                ProviderError::InvalidConfig(_) => "invalid_config",
            },
        }
    }
}

fn last_words_suffix(last_words: &str) -> String {
    if last_words.is_empty() {
        String::new()
    } else {
        // One line in logs, conditions and Events.
        format!(" (guest said: {})", last_words.replace('\n', " | "))
    }
}

fn describe(error: &ProviderError) -> String {
    match error {
        ProviderError::RetryAfter(e) => format!("retry after {}s: {}", e.seconds, e.message),
        ProviderError::Terminal(e) => format!("{}: {}", e.reason, e.message),
        ProviderError::InvalidConfig(e) => format!("invalid config at {}: {}", e.path, e.message),
    }
}

/// The calls of a tenant, for people: `calls about namespace "a"`, or
/// `calls about no object` for the empty one.
#[derive(Clone, Copy, Debug)]
pub struct Whose<'a>(pub &'a str);

impl fmt::Display for Whose<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("calls about no object")
        } else {
            write!(f, "calls about namespace {:?}", self.0)
        }
    }
}

/// A wall-clock time for people, to the second (`2026-01-02T03:04:05Z`).
#[derive(Clone, Copy, Debug)]
pub struct Wall(pub SystemTime);

impl fmt::Display for Wall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use jiff::{Timestamp, Unit};
        match Timestamp::try_from(self.0).and_then(|t| t.round(Unit::Second)) {
            Ok(time) => write!(f, "{time}"),
            Err(_) => write!(f, "{:?}", self.0),
        }
    }
}
