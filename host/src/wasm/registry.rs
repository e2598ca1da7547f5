//! Loaded providers by name, replaced atomically: a call holds an `Arc` of
//! the version it started on, so a swap never disturbs calls in flight.
//! Whoever waits for a provider to be in service can hear of each install.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use tokio::sync::broadcast;

use super::provider::LoadedProvider;

/// Installs a slow listener may fall behind by before it hears only that
/// it missed some.
const INSTALLS_KEPT: usize = 256;

/// The providers in service, by name.
pub struct Registry {
    providers: RwLock<HashMap<String, Arc<LoadedProvider>>>,
    installs: broadcast::Sender<Arc<str>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            providers: RwLock::default(),
            installs: broadcast::Sender::new(INSTALLS_KEPT),
        }
    }
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
        let name: Arc<str> = provider.name().into();
        let replaced = self
            .providers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(provider.name().to_owned(), provider);
        // No listener is fine.
        let _ = self.installs.send(name);
        replaced
    }

    /// The names of providers put in service from now on.
    pub fn installs(&self) -> broadcast::Receiver<Arc<str>> {
        self.installs.subscribe()
    }

    /// Takes `name` out of service; calls in flight finish on it.
    pub fn remove(&self, name: &str) -> Option<Arc<LoadedProvider>> {
        self.providers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name)
    }
}
