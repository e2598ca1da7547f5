//! A fixture's `expect`: the outcome `capwasm provider conformance` holds
//! a call to — its result, exactly, or the provider's typed error with the
//! fields the operator acts on (a terminal error's reason, an invalid
//! config's JSON path). Messages are free text and not compared.
//!
//! ```json
//! "expect": {"result": {"format": "cloud-config", "value": "..."}}
//! "expect": {"error": "retry-after"}
//! "expect": {"error": "terminal", "reason": "InvalidKubernetesVersion"}
//! "expect": {"error": "invalid-config", "path": "$.token"}
//! ```

use serde::Deserialize;
use serde_json::Value;

/// What a call must come to.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "Fields")]
pub enum Expect {
    /// This result, as `capwasm provider test` prints it.
    Result(Value),
    /// The provider's `retry-after`, with any delay.
    RetryAfter,
    /// The provider's `terminal` with this reason.
    Terminal(String),
    /// `invalid-config` at this JSON path, from the provider or its schema.
    InvalidConfig(String),
}

/// What a call came to, in the terms of [`Expect`].
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// A result.
    Result(Value),
    /// `retry-after`.
    RetryAfter,
    /// `terminal` with its reason.
    Terminal(String),
    /// `invalid-config` at its path.
    InvalidConfig(String),
    /// Anything else (a trap, a deadline), as `capwasm provider test` says it.
    Other(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fields {
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<ErrorCase>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    path: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum ErrorCase {
    RetryAfter,
    Terminal,
    InvalidConfig,
}

impl TryFrom<Fields> for Expect {
    type Error = String;

    fn try_from(fields: Fields) -> Result<Self, String> {
        match fields {
            Fields {
                result: Some(result),
                error: None,
                reason: None,
                path: None,
            } => Ok(Self::Result(result)),
            Fields {
                result: None,
                error: Some(case),
                reason,
                path,
            } => match (case, reason, path) {
                (ErrorCase::RetryAfter, None, None) => Ok(Self::RetryAfter),
                (ErrorCase::Terminal, Some(reason), None) => Ok(Self::Terminal(reason)),
                (ErrorCase::InvalidConfig, None, Some(path)) => Ok(Self::InvalidConfig(path)),
                (ErrorCase::RetryAfter, ..) => Err("retry-after takes no reason or path".into()),
                (ErrorCase::Terminal, ..) => Err("terminal takes a reason and no path".into()),
                (ErrorCase::InvalidConfig, ..) => {
                    Err("invalid-config takes a path and no reason".into())
                }
            },
            _ => Err("expect either a result or an error, not both or neither".into()),
        }
    }
}

impl Expect {
    /// Whether `observed` is what was expected; if not, how it differs.
    pub fn check(&self, observed: &Observed) -> Result<(), String> {
        match (self, observed) {
            (Self::Result(expected), Observed::Result(actual)) => {
                match first_difference(expected, actual) {
                    None => Ok(()),
                    Some((path, expected, actual)) => Err(format!(
                        "the result differs at {path}: expected {}, got {}",
                        short(&expected),
                        short(&actual)
                    )),
                }
            }
            (Self::RetryAfter, Observed::RetryAfter) => Ok(()),
            (Self::Terminal(expected), Observed::Terminal(actual))
            | (Self::InvalidConfig(expected), Observed::InvalidConfig(actual))
                if expected == actual =>
            {
                Ok(())
            }
            (expected, actual) => Err(format!(
                "expected {}, got {}",
                expected.describe(),
                actual.describe()
            )),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Result(_) => "a result".into(),
            Self::RetryAfter => "retry-after".into(),
            Self::Terminal(reason) => format!("terminal ({reason})"),
            Self::InvalidConfig(path) => format!("invalid-config at {path}"),
        }
    }
}

impl Observed {
    fn describe(&self) -> String {
        match self {
            Self::Result(value) => format!("the result {}", short(value)),
            Self::RetryAfter => "retry-after".into(),
            Self::Terminal(reason) => format!("terminal ({reason})"),
            Self::InvalidConfig(path) => format!("invalid-config at {path}"),
            Self::Other(line) => line.clone(),
        }
    }
}

/// The first place two documents differ: its JSON path and both values
/// there. Strings differ at their first differing character, shown with
/// some context.
fn first_difference(expected: &Value, actual: &Value) -> Option<(String, Value, Value)> {
    fn walk(path: String, expected: &Value, actual: &Value) -> Option<(String, Value, Value)> {
        match (expected, actual) {
            (Value::Object(e), Value::Object(a)) => {
                for (key, value) in e {
                    let inner = format!("{path}.{key}");
                    match a.get(key) {
                        Some(other) => {
                            if let Some(found) = walk(inner, value, other) {
                                return Some(found);
                            }
                        }
                        None => return Some((inner, value.clone(), Value::Null)),
                    }
                }
                a.keys()
                    .find(|key| !e.contains_key(*key))
                    .map(|key| (format!("{path}.{key}"), Value::Null, a[key].clone()))
            }
            (Value::Array(e), Value::Array(a)) if e.len() == a.len() => e
                .iter()
                .zip(a)
                .enumerate()
                .find_map(|(i, (e, a))| walk(format!("{path}[{i}]"), e, a)),
            (Value::String(e), Value::String(a)) if e != a => {
                let at = e
                    .char_indices()
                    .zip(a.chars())
                    .find(|((_, x), y)| x != y)
                    .map_or(e.len().min(a.len()), |((i, _), _)| i);
                let from = at.saturating_sub(20);
                let excerpt = |s: &str| {
                    let start = s
                        .char_indices()
                        .map(|(i, _)| i)
                        .take_while(|&i| i <= from)
                        .last()
                        .unwrap_or(0);
                    Value::String(s[start..].chars().take(60).collect())
                };
                Some((format!("{path} (character {at})"), excerpt(e), excerpt(a)))
            }
            (e, a) if e != a => Some((path, e.clone(), a.clone())),
            _ => None,
        }
    }
    walk("$".into(), expected, actual)
}

/// A value as JSON, cut to a line.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 120 {
        format!("{}…", text.chars().take(120).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn expect(value: Value) -> Result<Expect, String> {
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    #[test]
    fn expect_reads_each_outcome_and_refuses_mixtures() {
        assert_eq!(
            expect(json!({"result": true})),
            Ok(Expect::Result(json!(true)))
        );
        assert_eq!(
            expect(json!({"error": "terminal", "reason": "R"})),
            Ok(Expect::Terminal("R".into()))
        );
        assert_eq!(
            expect(json!({"error": "invalid-config", "path": "$.a"})),
            Ok(Expect::InvalidConfig("$.a".into()))
        );
        assert!(expect(json!({"result": 1, "error": "retry-after"})).is_err());
        assert!(expect(json!({"error": "terminal"})).is_err());
        assert!(expect(json!({"error": "retry-after", "path": "$"})).is_err());
        assert!(expect(json!({"error": "timeout"})).is_err());
        assert!(expect(json!({})).is_err());
    }

    #[test]
    fn check_compares_typed_errors_by_their_fields() {
        let terminal = Expect::Terminal("Quota".into());
        assert_eq!(terminal.check(&Observed::Terminal("Quota".into())), Ok(()));
        assert_eq!(
            terminal.check(&Observed::Terminal("Other".into())),
            Err("expected terminal (Quota), got terminal (Other)".into())
        );
        assert_eq!(
            Expect::RetryAfter.check(&Observed::Other("trap in bootstrap.generate: x".into())),
            Err("expected retry-after, got trap in bootstrap.generate: x".into())
        );
    }

    #[test]
    fn check_names_where_a_result_differs() {
        let expected = Expect::Result(json!({"format": "cloud-config", "value": "abc\nline two"}));
        assert_eq!(
            expected.check(&Observed::Result(
                json!({"format": "cloud-config", "value": "abc\nline 2"})
            )),
            Err(
                "the result differs at $.value (character 9): expected \"abc\\nline two\", got \"abc\\nline 2\""
                    .into()
            )
        );
        assert_eq!(
            expected.check(&Observed::Result(json!({"format": "cloud-config"}))),
            Err("the result differs at $.value: expected \"abc\\nline two\", got null".into())
        );
        assert!(
            expected
                .check(&Observed::Result(
                    json!({"format": "cloud-config", "value": "abc\nline two"})
                ))
                .is_ok()
        );
    }
}
