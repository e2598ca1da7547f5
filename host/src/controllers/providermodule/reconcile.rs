//! The ProviderModule as the frame reconciles it: its component loaded
//! (fetched, verified against its digest, compiled or taken from the
//! precompiled cache, checked) and swapped into service; on deletion, taken
//! out of service before the finalizer goes.

use crate::controllers::shard::{Role, Shard};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt as _};

use super::oci::{self, Fetched, Origin};
use super::rollout;
use super::{CONTROLLER, FETCH_RETRY};
use crate::api::conditions::Desired;
use crate::api::providermodule::{FIELD_MANAGER, ModuleSource, PHASE_READY, ProviderModuleSpec};
use crate::api::{ConditionType, ProviderModule, Reason};
use crate::controllers::context::Context;
use crate::controllers::credentials::{self, CREDENTIALS_POLL, capabilities};
use crate::controllers::error::Error;
use crate::controllers::error::Retry;
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::reconciler::{Phase, Reconciler, Scope};
use crate::phases;
use crate::wasm::{self, HttpLimits, Limits, LoadedProvider, ProviderSource, ProviderSpec};

/// Removed only after the module is taken out of service.
pub const FINALIZER: &str = "runtime.capwasm.dev/provider-module";

/// The `binaryData` key read when a ConfigMap source names none.
pub const DEFAULT_CONFIG_MAP_KEY: &str = "component.wasm";

impl Reconciler for ProviderModule {
    type Found = ();
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = FIELD_MANAGER;
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    const SUMMARY: ConditionType = ConditionType::Ready;
    const PHASES: &'static [Phase<Self>] =
        phases![ProviderModule: load, check_credentials, throttle];
    const DELETE_PHASES: &'static [Phase<Self>] = phases![ProviderModule: unload];

    fn role(&self, shard: Shard) -> Role {
        shard.role_shared()
    }

    fn summarize(_: &mut Scope<Self>, _: &Context, _: &[Result<Outcome, Error>]) {}
}

/// Whether the credentials Secret holds every key `requestAuth` reads, as
/// `CredentialsReady` (only for modules with rules): a missing key is named
/// here, before any call needs it.
async fn check_credentials(
    scope: &mut Scope<ProviderModule>,
    ctx: &Context,
) -> Result<Outcome, Error> {
    let spec = &scope.object.spec;
    if spec
        .capabilities
        .as_ref()
        .is_none_or(|c| c.request_auth.is_empty())
    {
        return Ok(Outcome::Continue);
    }
    let name = scope.object.name_any();
    match credentials::read(ctx, &name, spec).await? {
        Ok(_) => {
            scope.set(Desired::holds(
                ConditionType::CredentialsReady,
                Reason::Ready,
                "the credentials Secret holds every key requestAuth reads",
            ));
            Ok(Outcome::Continue)
        }
        Err(wait) => {
            scope.set(Desired::fails(
                ConditionType::CredentialsReady,
                wait.reason,
                wait.message,
            ));
            Ok(Outcome::RequeueAfter(CREDENTIALS_POLL))
        }
    }
}

/// Whether the module's calls are refused for a while, as `Throttled`
/// (only once it has been throttled): they kept running into their
/// deadline, so its objects back off instead of burning the cores the
/// others need. Looked at again when the throttle ends.
async fn throttle(scope: &mut Scope<ProviderModule>, ctx: &Context) -> Result<Outcome, Error> {
    let name = scope.object.name_any();
    if let Some(throttled) = ctx.runtime.throttled(&name) {
        scope.set(Desired::holds(
            ConditionType::Throttled,
            Reason::ProviderThrottled,
            format!(
                "{} calls in a row of {} ran into their deadline: its calls are refused, and its objects wait, for another {}s",
                throttled.deadlines,
                throttled.digest,
                throttled.remaining.as_secs().max(1)
            ),
        ));
        return Ok(Outcome::RequeueAfter(throttled.remaining));
    }
    let was = scope
        .status
        .conditions
        .iter()
        .any(|c| c.type_ == ConditionType::Throttled.as_str());
    if was {
        scope.set(Desired::fails(
            ConditionType::Throttled,
            Reason::NotThrottled,
            "its calls are served",
        ));
    }
    Ok(Outcome::Continue)
}

/// Takes the module out of service; calls in flight finish on the version they hold.
async fn unload(scope: &mut Scope<ProviderModule>, ctx: &Context) -> Result<Outcome, Error> {
    let name = scope.object.name_any();
    if ctx.runtime.registry().remove(&name).is_some() {
        tracing::info!(module = name, "provider taken out of service");
    }
    Ok(Outcome::Continue)
}

/// Fetches, verifies, compiles and checks the component, and puts it in
/// service unless the same code with the same bounds is in service already.
async fn load(scope: &mut Scope<ProviderModule>, ctx: &Context) -> Result<Outcome, Error> {
    let module = scope.object.clone();
    let name = module.name_any();
    let spec = &module.spec;
    let limits = limits(spec, &ctx.settings.default_limits);
    let capabilities = capabilities(spec);
    let in_service = ctx.runtime.registry().get(&name);

    let fetched = match &spec.source.oci {
        Some(source) => oci::fetch(scope, ctx, source).await?,
        None => fetch(ctx, &spec.source)
            .await
            .map(|bytes| Fetched {
                digest: wasm::digest_of(&bytes),
                source: ProviderSource::Bytes(bytes),
                origin: None,
            })
            .map_err(|message| Wait::after(Reason::FetchFailed, message, FETCH_RETRY)),
    };
    let fetched = match fetched {
        Ok(fetched) => fetched,
        Err(wait) => {
            failed(scope, in_service.as_deref(), wait.reason, wait.message);
            return Ok(match wait.retry {
                Retry::After(after) => Outcome::RequeueAfter(after),
                Retry::OnChange | Retry::Backoff => Outcome::Continue,
            });
        }
    };
    let Fetched {
        source,
        digest,
        origin,
    } = fetched;
    let next = origin
        .as_ref()
        .and_then(|o| o.refresh)
        .map_or(Outcome::Continue, Outcome::RequeueAfter);
    rollout::settle(scope, ctx, &name);
    if let Some(why) = rollout::refused(scope, &digest) {
        failed(scope, in_service.as_deref(), Reason::RolledBack, why);
        return Ok(next);
    }
    if let Some(current) = &in_service
        && rollout::serving(scope, ctx, &name, &digest)
    {
        let previous = scope.status.previous_digest.clone();
        ready(scope, current, previous, None);
        return Ok(Outcome::RequeueAfter(rollout::CANARY_REFRESH));
    }
    if let Some(current) = &in_service
        && current.digest == digest
        && current.limits == limits
        && *current.capabilities() == capabilities
        && spec.world == current.world
        && spec
            .sha256
            .as_deref()
            .is_none_or(|pinned| same_digest(pinned, &current.digest))
    {
        let previous = match rollout::promoted(scope, ctx, current).await {
            Some(replaced) => Some(replaced),
            None => scope.status.previous_digest.clone(),
        };
        ready(scope, current, previous, origin.as_ref());
        if let Some(origin) = &origin {
            oci::remember(ctx, origin);
        }
        return Ok(next);
    }
    let loaded = ctx
        .runtime
        .load(ProviderSpec {
            name: String::from(&name),
            source,
            sha256: spec.sha256.clone(),
            limits,
            capabilities,
        })
        .await;
    install(ctx, scope, in_service.as_deref(), loaded, origin.as_ref()).await;
    Ok(next)
}

/// Puts a loaded provider in service if it implements the module's world,
/// and says so; a failed load leaves the version in service alone.
async fn install(
    ctx: &Context,
    scope: &mut Scope<ProviderModule>,
    in_service: Option<&LoadedProvider>,
    loaded: Result<LoadedProvider, wasm::Error>,
    origin: Option<&Origin>,
) {
    let module = scope.object.clone();
    let name = module.name_any();
    let spec = &module.spec;
    match loaded {
        Ok(loaded) if spec.world != loaded.world => failed(
            scope,
            in_service,
            Reason::ProviderWorldMismatch,
            format!(
                "the component implements the {} world, but spec.world is {}",
                loaded.world, spec.world
            ),
        ),
        Ok(loaded) => {
            let loaded = Arc::new(loaded);
            if let (Some(policy), Some(stable)) = (rollout::policy(spec), in_service) {
                rollout::start(scope, ctx, loaded, stable, policy).await;
                let previous = scope.status.previous_digest.clone();
                ready(scope, stable, previous, None);
                return;
            }
            // Installed for every object: a canary there was is gone.
            scope.status.canary = None;
            let previous = ctx.runtime.registry().install(loaded.clone());
            let previous_digest = match &previous {
                Some(p) if p.digest != loaded.digest => Some(p.digest.clone()),
                _ => module
                    .status
                    .as_ref()
                    .and_then(|s| s.previous_digest.clone()),
            };
            tracing::info!(
                module = name,
                digest = loaded.digest,
                version = loaded.info.version,
                load_ms = loaded.load_time.as_millis(),
                from_cache = loaded.from_cache,
                "provider in service"
            );
            if previous.is_some() {
                scope
                    .publish(
                        ctx,
                        Reason::Swapped,
                        format!(
                            "{} {} ({}) replaced {}",
                            loaded.info.name,
                            loaded.info.version,
                            loaded.digest,
                            previous_digest.as_deref().unwrap_or("the same code")
                        ),
                    )
                    .await;
            }
            ready(scope, &loaded, previous_digest, origin);
            if let Some(origin) = origin {
                oci::remember(ctx, origin);
            }
        }
        Err(error) => {
            let reason = match &error {
                wasm::Error::DigestMismatch { .. } | wasm::Error::InvalidDigest(_) => {
                    Reason::DigestMismatch
                }
                wasm::Error::Read { .. } | wasm::Error::NotPrecompiled(_) => Reason::FetchFailed,
                _ => Reason::ModuleInvalid,
            };
            failed(
                scope,
                in_service,
                reason,
                crate::report::error_chain(&error),
            );
        }
    }
}

/// The component's bytes, or why they cannot be had.
async fn fetch(ctx: &Context, source: &ModuleSource) -> Result<Vec<u8>, String> {
    if let Some(source) = &source.config_map {
        let key = source.key.as_deref().unwrap_or(DEFAULT_CONFIG_MAP_KEY);
        let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &source.namespace);
        let config_map = api
            .get_opt(&source.name)
            .await
            .map_err(|e| {
                format!(
                    "cannot read ConfigMap {}/{}: {}",
                    source.namespace,
                    source.name,
                    crate::report::error_chain(&e)
                )
            })?
            .ok_or_else(|| {
                format!(
                    "ConfigMap {}/{} does not exist",
                    source.namespace, source.name
                )
            })?;
        return config_map
            .binary_data
            .and_then(|mut data| data.remove(key))
            .map(|bytes| bytes.0)
            .ok_or_else(|| {
                format!(
                    "ConfigMap {}/{} has no binaryData key {key:?}",
                    source.namespace, source.name
                )
            });
    }
    if let Some(file) = &source.file {
        let path = file.path.clone();
        return tokio::task::spawn_blocking(move || {
            std::fs::read(&path).map_err(|e| format!("cannot read {path}: {e}"))
        })
        .await
        .map_err(|e| format!("reading the component did not complete: {e}"))?;
    }
    Err("spec.source names neither a configMap nor a file".into())
}

fn limits(spec: &ProviderModuleSpec, defaults: &Limits) -> Limits {
    let set = spec.limits.clone().unwrap_or_default();
    let kib = |value: Option<u32>, default: u64| value.map_or(default, |kib| u64::from(kib) << 10);
    let http = &defaults.http;
    Limits {
        memory_bytes: set
            .memory_mib
            .map_or(defaults.memory_bytes, |mib| (mib as usize) << 20),
        deadline: set
            .timeout_millis
            .map_or(defaults.deadline, |ms| Duration::from_millis(u64::from(ms))),
        max_output_bytes: set
            .max_output_kib
            .map_or(defaults.max_output_bytes, |kib| (kib as usize) << 10),
        max_log_lines: set.max_log_lines.unwrap_or(defaults.max_log_lines),
        http: HttpLimits {
            requests_per_call: set.http_requests_per_call.unwrap_or(http.requests_per_call),
            in_flight_per_call: set
                .http_in_flight_per_call
                .unwrap_or(http.in_flight_per_call),
            in_flight_per_provider: set
                .http_in_flight_per_provider
                .unwrap_or(http.in_flight_per_provider),
            max_request_body_bytes: kib(set.http_max_request_body_kib, http.max_request_body_bytes),
            max_response_body_bytes: kib(
                set.http_max_response_body_kib,
                http.max_response_body_bytes,
            ),
        },
    }
}

fn same_digest(pinned: &str, digest: &str) -> bool {
    let strip = |d: &str| d.strip_prefix("sha256:").unwrap_or(d).to_ascii_lowercase();
    strip(pinned) == strip(digest)
}

/// The module's status for `loaded` in service.
fn ready(
    scope: &mut Scope<ProviderModule>,
    loaded: &LoadedProvider,
    previous_digest: Option<String>,
    origin: Option<&Origin>,
) {
    let mut message = format!(
        "serving {} {} ({})",
        loaded.info.name, loaded.info.version, loaded.digest
    );
    if let Some(origin) = origin {
        message.push_str(" from ");
        message.push_str(&origin.image);
        if let Some(key) = &origin.signed_by {
            message.push_str(", signed by ");
            message.push_str(key);
        }
        if let Some(offline) = &origin.offline {
            message.push_str("; ");
            message.push_str(offline);
        }
    }
    if let Some(canary) = &scope.status.canary {
        let _ = write!(
            message,
            "; canary {} serves {}% of objects ({} calls, {} broke)",
            canary.digest, canary.percent, canary.calls, canary.failures
        );
    }
    let now = scope.now.clone();
    let status = &mut scope.status;
    // Figures of the load that put this code in service; a reconcile that
    // finds it in service already keeps them.
    if status.active_digest.as_deref() != Some(loaded.digest.as_str()) {
        status.load_time_millis = Some(loaded.load_time.as_millis() as u64);
        status.from_cache = Some(loaded.from_cache);
        status.loaded_at = Some(now);
    }
    status.phase = Some(PHASE_READY.into());
    status.message = Some(message.clone());
    status.active_digest = Some(loaded.digest.clone());
    status.previous_digest = previous_digest;
    // A canary's reconcile names no origin: the stable version's stays.
    if origin.is_some() || scope.object.spec.source.oci.is_none() {
        status.image = origin.map(|o| o.image.clone());
        status.signed_by = origin.and_then(|o| o.signed_by.clone());
    }
    status.provider_name = Some(loaded.info.name.clone());
    status.version = Some(loaded.info.version.clone());
    scope.set(Desired::holds(
        ConditionType::Ready,
        Reason::Loaded,
        message,
    ));
}

/// The module's status when loading failed: the version in service, if
/// any, stays.
fn failed(
    scope: &mut Scope<ProviderModule>,
    in_service: Option<&LoadedProvider>,
    reason: Reason,
    message: String,
) {
    let message = match in_service {
        Some(current) => format!("{message}; {} stays in service", current.digest),
        None => message,
    };
    scope.status.phase = Some("Failed".into());
    scope.status.message = Some(message.clone());
    scope.status.active_digest = in_service.map(|p| p.digest.clone());
    scope.set(Desired::fails(ConditionType::Ready, reason, message));
}
