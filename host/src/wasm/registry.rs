//! Loaded providers by name, replaced atomically: a call holds an `Arc` of
//! the version it started on, so a swap never disturbs calls in flight.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use super::bindings::{BootstrapProviderPre, InfrastructureProviderPre};
use super::limits::{Capabilities, Limits};
use super::load::World;
use super::state::CallState;
use super::types::ProviderInfo;

/// A provider ready to be called: compiled, checked, pre-instantiated. Immutable.
pub struct LoadedProvider {
    pub(crate) name: Arc<str>,
    /// `sha256:<hex>` of the component's bytes.
    pub digest: String,
    /// The world it implements.
    pub world: World,
    /// What the provider says of itself.
    pub info: ProviderInfo,
    /// The JSON Schema of its `spec.config`.
    pub config_schema: serde_json::Value,
    /// Bounds on each call.
    pub limits: Limits,
    pub(crate) capabilities: Arc<Capabilities>,
    pub(crate) pre: ProviderPre,
    /// How long loading took, from bytes to checked.
    pub load_time: Duration,
    /// Of which compiling (or deserialising from the cache).
    pub compile_time: Duration,
    /// Whether compilation was skipped thanks to the precompiled cache.
    pub from_cache: bool,
}

pub(crate) enum ProviderPre {
    Bootstrap(BootstrapProviderPre<CallState>),
    Infrastructure(InfrastructureProviderPre<CallState>),
}

impl LoadedProvider {
    /// The registry name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its capabilities.
    pub fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }
}

impl std::fmt::Debug for LoadedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedProvider")
            .field("name", &self.name)
            .field("digest", &self.digest)
            .field("world", &self.world)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// The providers in service, by name.
#[derive(Default)]
pub struct Registry {
    providers: RwLock<HashMap<String, Arc<LoadedProvider>>>,
}

impl Registry {
    /// The current version of `name`.
    pub fn get(&self, name: &str) -> Option<Arc<LoadedProvider>> {
        self.providers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// Puts `provider` in service under its name; returns the version it replaced.
    pub fn install(&self, provider: Arc<LoadedProvider>) -> Option<Arc<LoadedProvider>> {
        self.providers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(provider.name().to_owned(), provider)
    }

    /// Takes `name` out of service; calls in flight finish on it.
    pub fn remove(&self, name: &str) -> Option<Arc<LoadedProvider>> {
        self.providers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name)
    }
}
