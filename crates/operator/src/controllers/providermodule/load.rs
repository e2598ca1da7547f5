//! Loading a module: its component fetched, verified against its digest,
//! compiled or taken from the precompiled cache, checked, and swapped into
//! service unless the same code with the same bounds serves already; a
//! module that fails any step never replaces the working version.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt as _;

use super::oci::{self, Fetched, Origin};
use super::rollout;
use super::source::fetch;
use super::status::{failed, ready};
use crate::api::providermodule::ProviderModuleSpec;
use crate::api::{ProviderModule, Reason};
use crate::controllers::context::Context;
use crate::controllers::credentials::capabilities;
use crate::controllers::error::{Error, Retry};
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;
use crate::wasm::{self, HttpLimits, Limits, LoadedProvider, ProviderSource, ProviderSpec};

/// Fetches, verifies, compiles and checks the component, and puts it in
/// service unless the same code with the same bounds is in service already.
pub(super) async fn load(
    scope: &mut Scope<ProviderModule>,
    ctx: &Context,
) -> Result<Outcome, Error> {
    let module = scope.object.clone();
    let name = module.name_any();
    let spec = &module.spec;
    let limits = limits(spec, &ctx.settings.default_limits);
    let capabilities = capabilities(spec);
    let in_service = ctx.runtime.registry().get(&name);

    let fetched = match &spec.source.oci {
        Some(source) => oci::fetch(scope, ctx, source).await?,
        None => fetch(ctx, &name, spec).await.map(|bytes| Fetched {
            digest: wasm::digest_of(&bytes),
            source: ProviderSource::Bytes(bytes),
            origin: None,
        }),
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
