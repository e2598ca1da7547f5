//! Loaded providers by name, replaced atomically: a call holds an `Arc` of
//! the version it started on, so a swap never disturbs calls in flight.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use super::provider::LoadedProvider;

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
