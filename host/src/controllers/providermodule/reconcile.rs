//! Loading a ProviderModule's component into service.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::{Api, Resource as _, ResourceExt as _};

use super::CONTROLLER;
use crate::api::conditions::{self, Desired};
use crate::api::providermodule::{
    FIELD_MANAGER, ModuleSource, ProviderModuleSpec, ProviderModuleStatus, ProviderWorld,
};
use crate::api::{ConditionType, ProviderModule, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::RESYNC;
use crate::controllers::write;
use crate::wasm::{self, Capabilities, Limits, LoadedProvider, ProviderSource, World};

/// Removed only after the module is taken out of service.
pub const FINALIZER: &str = "runtime.capwasm.dev/provider-module";

/// The `binaryData` key read when a ConfigMap source names none.
pub const DEFAULT_CONFIG_MAP_KEY: &str = "component.wasm";

pub async fn reconcile(module: Arc<ProviderModule>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile(CONTROLLER);
    let api: Api<ProviderModule> = Api::all(ctx.client.clone());
    let uid = module.uid().unwrap_or_default();
    let action = finalizer(&api, FINALIZER, module, |event| async {
        match event {
            Finalizer::Apply(module) => load(&module, &ctx).await,
            Finalizer::Cleanup(module) => {
                // Calls in flight finish on the version they hold.
                if ctx.runtime.registry().remove(&module.name_any()).is_some() {
                    tracing::info!(module = module.name_any(), "provider taken out of service");
                }
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))?;
    ctx.succeeded(&uid);
    Ok(action)
}

#[allow(clippy::needless_pass_by_value)] // kube-runtime's error_policy signature
pub fn error_policy(module: Arc<ProviderModule>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.error_action(CONTROLLER, &module.uid().unwrap_or_default(), error)
}

/// Fetches, verifies, compiles and checks the component, and puts it in
/// service unless the same code with the same bounds is in service already.
async fn load(module: &ProviderModule, ctx: &Context) -> Result<Action, Error> {
    let name = module.name_any();
    let spec = &module.spec;
    let limits = limits(spec, &ctx.settings.default_limits);
    let capabilities = capabilities(spec);
    let in_service = ctx.runtime.registry().get(&name);

    let bytes = match fetch(ctx, &spec.source).await {
        Ok(bytes) => bytes,
        Err(message) => {
            let failed = failed_status(module, in_service.as_deref(), Reason::FetchFailed, message);
            write_status(ctx, module, failed).await?;
            // A file may appear (a volume being mounted); ConfigMaps are watched.
            return Ok(Action::requeue(Duration::from_secs(30)));
        }
    };
    if let Some(current) = &in_service
        && current.digest == wasm::digest_of(&bytes)
        && current.limits == limits
        && *current.capabilities() == capabilities
        && world_matches(spec.world, current.world)
        && spec
            .sha256
            .as_deref()
            .is_none_or(|pinned| same_digest(pinned, &current.digest))
    {
        let ready = ready_status(
            module,
            current,
            module
                .status
                .as_ref()
                .and_then(|s| s.previous_digest.clone()),
        );
        write_status(ctx, module, ready).await?;
        return Ok(Action::requeue(RESYNC));
    }

    let runtime = ctx.runtime.clone();
    let (module_name, pinned) = (name.clone(), spec.sha256.clone());
    let loaded = tokio::task::spawn_blocking(move || {
        runtime.load_blocking(
            &module_name,
            ProviderSource::Bytes(bytes),
            pinned.as_deref(),
            limits,
            capabilities,
        )
    })
    .await
    .map_err(wasm::Error::from)
    .and_then(|loaded| loaded);

    let status = install(ctx, module, in_service.as_deref(), loaded).await;
    write_status(ctx, module, status).await?;
    Ok(Action::requeue(RESYNC))
}

/// Puts a loaded provider in service if it implements the module's world,
/// and says so; a failed load leaves the version in service alone.
async fn install(
    ctx: &Context,
    module: &ProviderModule,
    in_service: Option<&LoadedProvider>,
    loaded: Result<LoadedProvider, wasm::Error>,
) -> ProviderModuleStatus {
    let name = module.name_any();
    let spec = &module.spec;
    match loaded {
        Ok(loaded) if !world_matches(spec.world, loaded.world) => failed_status(
            module,
            in_service,
            Reason::ProviderWorldMismatch,
            format!(
                "the component implements the {} world, but spec.world is {}",
                loaded.world,
                world_name(spec.world)
            ),
        ),
        Ok(loaded) => {
            let loaded = Arc::new(loaded);
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
                ctx.publish(
                    &module.object_ref(&()),
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
            ready_status(module, &loaded, previous_digest)
        }
        Err(error) => {
            let reason = match &error {
                wasm::Error::DigestMismatch { .. } | wasm::Error::InvalidDigest(_) => {
                    Reason::DigestMismatch
                }
                wasm::Error::Read { .. } => Reason::FetchFailed,
                _ => Reason::ModuleInvalid,
            };
            failed_status(
                module,
                in_service,
                reason,
                crate::report::error_chain(&error),
            )
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
    }
}

fn capabilities(spec: &ProviderModuleSpec) -> Capabilities {
    Capabilities {
        allowed_hosts: spec
            .capabilities
            .as_ref()
            .map(|c| c.allowed_hosts.clone())
            .unwrap_or_default(),
    }
}

fn world_matches(wanted: ProviderWorld, loaded: World) -> bool {
    matches!(
        (wanted, loaded),
        (ProviderWorld::Bootstrap, World::Bootstrap)
            | (ProviderWorld::Infrastructure, World::Infrastructure)
    )
}

fn world_name(world: ProviderWorld) -> &'static str {
    match world {
        ProviderWorld::Bootstrap => World::Bootstrap.as_str(),
        ProviderWorld::Infrastructure => World::Infrastructure.as_str(),
    }
}

fn same_digest(pinned: &str, digest: &str) -> bool {
    let strip = |d: &str| d.strip_prefix("sha256:").unwrap_or(d).to_ascii_lowercase();
    strip(pinned) == strip(digest)
}

fn now() -> Time {
    Time(Timestamp::now())
}

fn ready_status(
    module: &ProviderModule,
    loaded: &LoadedProvider,
    previous_digest: Option<String>,
) -> ProviderModuleStatus {
    let old = module.status.clone().unwrap_or_default();
    let same_code = old.active_digest.as_deref() == Some(loaded.digest.as_str());
    let mut status = ProviderModuleStatus {
        phase: Some("Ready".into()),
        message: Some(format!(
            "serving {} {} ({})",
            loaded.info.name, loaded.info.version, loaded.digest
        )),
        active_digest: Some(loaded.digest.clone()),
        previous_digest,
        provider_name: Some(loaded.info.name.clone()),
        version: Some(loaded.info.version.clone()),
        // Figures of the load that put this code in service; a reconcile
        // that finds it in service already keeps them.
        load_time_millis: if same_code {
            old.load_time_millis
        } else {
            Some(loaded.load_time.as_millis() as u64)
        },
        from_cache: if same_code {
            old.from_cache
        } else {
            Some(loaded.from_cache)
        },
        loaded_at: if same_code {
            old.loaded_at
        } else {
            Some(now())
        },
        conditions: old.conditions,
        observed_generation: module.metadata.generation,
    };
    let message = status.message.clone().unwrap_or_default();
    conditions::set(
        &mut status.conditions,
        Desired::holds(ConditionType::Ready, Reason::Loaded, message),
        module.metadata.generation,
        &now(),
    );
    status
}

fn failed_status(
    module: &ProviderModule,
    in_service: Option<&LoadedProvider>,
    reason: Reason,
    message: String,
) -> ProviderModuleStatus {
    let mut status = module.status.clone().unwrap_or_default();
    let message = match in_service {
        Some(current) => format!("{message}; {} stays in service", current.digest),
        None => message,
    };
    status.phase = Some("Failed".into());
    status.message = Some(message.clone());
    status.active_digest = in_service.map(|p| p.digest.clone());
    conditions::set(
        &mut status.conditions,
        Desired::fails(ConditionType::Ready, reason, message),
        module.metadata.generation,
        &now(),
    );
    status
}

async fn write_status(
    ctx: &Context,
    module: &ProviderModule,
    status: ProviderModuleStatus,
) -> Result<(), Error> {
    let before = module.status.clone().unwrap_or_default();
    if before == status {
        return Ok(());
    }
    write::status(ctx, CONTROLLER, FIELD_MANAGER, module, &status).await?;
    ctx.announce(
        &module.object_ref(&()),
        &before.conditions,
        &status.conditions,
    )
    .await;
    Ok(())
}
