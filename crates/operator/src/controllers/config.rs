//! Checking an object's `spec.config` against its provider's schema before
//! any call. The schema is the guest's, so the check runs on a blocking
//! thread, one at a time per half a core, and the reconcile waits for it
//! only up to a budget; a check that takes longer goes on and leaves its
//! verdict for the next look. Verdicts are kept by provider digest and
//! config, so each config is checked once per version of its provider.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest as _, Sha256};
use tokio::sync::{Semaphore, watch};

use crate::wasm::LoadedProvider;
use crate::wasm::schema::{ConfigSchema, Mismatch};

pub use crate::wasm::bounds::{
    CONFIG_CHECK_BUDGET as CHECK_BUDGET, CONFIG_MAX_BYTES as MAX_CONFIG_BYTES,
};
/// Verdicts kept before the finished ones are dropped.
const MAX_VERDICTS: usize = 4096;

/// Why a config is not accepted, or not yet.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The config does not satisfy the schema.
    #[error("{0}")]
    Invalid(Mismatch),
    /// The config is over [`MAX_CONFIG_BYTES`].
    #[error("spec.config is {bytes} bytes of JSON, over the limit of {limit}")]
    TooLarge {
        /// Its size.
        bytes: usize,
        /// The bound.
        limit: usize,
    },
    /// The check did not finish within its budget; it goes on.
    #[error(
        "checking spec.config against provider {provider:?}'s schema did not finish within {budget:?}; the verdict is kept when it does"
    )]
    TimedOut {
        /// The provider.
        provider: String,
        /// The budget.
        budget: Duration,
    },
    /// The check stopped without a verdict (the validator panicked).
    #[error("checking spec.config against provider {provider:?}'s schema failed")]
    Failed {
        /// The provider.
        provider: String,
    },
}

type Verdict = Result<(), ConfigError>;

/// Config verdicts by provider digest and config, each computed once.
pub struct ConfigSchemas {
    verdicts: Mutex<HashMap<[u8; 32], watch::Receiver<Option<Verdict>>>>,
    permits: Arc<Semaphore>,
    budget: Duration,
}

impl Default for ConfigSchemas {
    fn default() -> Self {
        Self::new(CHECK_BUDGET)
    }
}

impl ConfigSchemas {
    /// Checks that wait for a verdict at most `budget`.
    pub fn new(budget: Duration) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            verdicts: Mutex::default(),
            permits: Arc::new(Semaphore::new(cores.div_ceil(2))),
            budget,
        }
    }

    /// Checks `config` (absent: `{}`) against `provider`'s schema, and
    /// returns it as the JSON text a call hands the provider.
    pub async fn check(
        &self,
        provider: &LoadedProvider,
        config: Option<&Value>,
    ) -> Result<String, ConfigError> {
        let schema = &provider.config_schema;
        self.check_against(provider.name(), &provider.digest, schema, config)
            .await
    }

    /// Checks `config` against the `schema` of the provider `name` at `digest`.
    async fn check_against(
        &self,
        name: &str,
        digest: &str,
        schema: &ConfigSchema,
        config: Option<&Value>,
    ) -> Result<String, ConfigError> {
        let empty = Value::Object(serde_json::Map::new());
        let config = config.unwrap_or(&empty);
        let text = config.to_string();
        if text.len() > MAX_CONFIG_BYTES {
            return Err(ConfigError::TooLarge {
                bytes: text.len(),
                limit: MAX_CONFIG_BYTES,
            });
        }
        let key: [u8; 32] = Sha256::new()
            .chain_update(digest.as_bytes())
            .chain_update([0])
            .chain_update(text.as_bytes())
            .finalize()
            .into();
        let mut verdict = self.verdict(key, schema, config);
        let name = name.to_owned();
        let verdict =
            match tokio::time::timeout(self.budget, verdict.wait_for(Option::is_some)).await {
                Ok(Ok(done)) => done
                    .clone()
                    .unwrap_or(Err(ConfigError::Failed { provider: name })),
                Ok(Err(_)) => {
                    self.forget(&key);
                    Err(ConfigError::Failed { provider: name })
                }
                Err(_) => Err(ConfigError::TimedOut {
                    provider: name,
                    budget: self.budget,
                }),
            };
        verdict.map(|()| text)
    }

    /// The verdict on `key`, started now if no check has started it.
    fn verdict(
        &self,
        key: [u8; 32],
        schema: &ConfigSchema,
        config: &Value,
    ) -> watch::Receiver<Option<Verdict>> {
        let mut verdicts = self.verdicts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(verdict) = verdicts.get(&key) {
            return verdict.clone();
        }
        if verdicts.len() >= MAX_VERDICTS {
            verdicts.retain(|_, verdict| verdict.borrow().is_none());
        }
        let (done, verdict) = watch::channel(None);
        verdicts.insert(key, verdict.clone());
        let (schema, config) = (schema.clone(), config.clone());
        let permits = self.permits.clone();
        tokio::spawn(async move {
            // A closed semaphore never happens; without a permit, no check.
            let Ok(permit) = permits.acquire_owned().await else {
                return;
            };
            let checked = tokio::task::spawn_blocking(move || {
                let verdict = schema.check(&config).map_err(ConfigError::Invalid);
                drop(permit);
                verdict
            })
            .await;
            // A panic leaves no verdict: the sender drops, and waiters fail.
            if let Ok(verdict) = checked {
                done.send_replace(Some(verdict));
            }
        });
        verdict
    }

    #[cfg(test)]
    fn kept(&self) -> usize {
        let verdicts = self.verdicts.lock().unwrap_or_else(PoisonError::into_inner);
        verdicts.len()
    }

    fn forget(&self, key: &[u8; 32]) {
        let mut verdicts = self.verdicts.lock().unwrap_or_else(PoisonError::into_inner);
        verdicts.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(json: &Value) -> ConfigSchema {
        ConfigSchema::compile(&json.to_string()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[tokio::test]
    async fn a_config_at_the_size_bound_is_checked_and_one_byte_more_is_refused() {
        let strict = schema(&json!({"type": "object"}));
        let checks = ConfigSchemas::default();
        // `{"a":"…"}` is 8 bytes around the string.
        let at_bound = json!({"a": "x".repeat(MAX_CONFIG_BYTES - 8)});
        assert_eq!(at_bound.to_string().len(), MAX_CONFIG_BYTES);
        let check = checks.check_against("p", "sha256:1", &strict, Some(&at_bound));
        assert_eq!(check.await, Ok(at_bound.to_string()));
        let over = json!({"a": "x".repeat(MAX_CONFIG_BYTES - 7)});
        let check = checks.check_against("p", "sha256:1", &strict, Some(&over));
        assert_eq!(
            check.await,
            Err(ConfigError::TooLarge {
                bytes: MAX_CONFIG_BYTES + 1,
                limit: MAX_CONFIG_BYTES
            })
        );
    }

    #[tokio::test]
    async fn a_mismatch_names_the_path_and_an_absent_config_is_an_empty_object() {
        let strict = schema(&json!({
            "type": "object",
            "required": ["token"],
            "properties": {"token": {"type": "string"}}
        }));
        let checks = ConfigSchemas::default();
        let Err(ConfigError::Invalid(mismatch)) =
            checks.check_against("p", "sha256:1", &strict, None).await
        else {
            panic!("an empty config lacks the required token");
        };
        assert_eq!(mismatch.path, "$");
        let wrong = json!({"token": 7});
        let Err(ConfigError::Invalid(mismatch)) = checks
            .check_against("p", "sha256:1", &strict, Some(&wrong))
            .await
        else {
            panic!("a number is not a string");
        };
        assert_eq!(mismatch.path, "$.token");
        assert!(
            !mismatch.message.contains('7'),
            "values are masked: {mismatch}"
        );
    }

    #[tokio::test]
    async fn a_check_over_its_budget_is_a_timeout_and_its_verdict_is_kept_for_the_next_look() {
        // Every key of a large object matching only the last of many
        // branches: far over a microsecond, far under a second.
        let branches: Vec<Value> = (0..60)
            .map(|i| json!({"type": "string", "pattern": format!("^v{i}-[a-z]+$")}))
            .collect();
        let wide = schema(&json!({"additionalProperties": {"anyOf": branches}}));
        let config: serde_json::Map<String, Value> = (0..5_000)
            .map(|i| (format!("k{i}"), json!("v59-match")))
            .collect();
        let config = Value::Object(config);
        let checks = ConfigSchemas::new(Duration::from_micros(1));
        let first = checks
            .check_against("wide", "sha256:2", &wide, Some(&config))
            .await;
        assert!(
            matches!(first, Err(ConfigError::TimedOut { ref provider, .. }) if provider == "wide"),
            "{first:?}"
        );
        // The check went on: its verdict arrives without a second check.
        assert_eq!(checks.kept(), 1);
        let patient = ConfigSchemas {
            budget: Duration::from_secs(60),
            ..checks
        };
        let later = patient
            .check_against("wide", "sha256:2", &wide, Some(&config))
            .await;
        assert_eq!(later, Ok(config.to_string()));
        assert_eq!(patient.kept(), 1);
    }
}
