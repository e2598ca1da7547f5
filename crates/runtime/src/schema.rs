//! The config schema a component exports, bounded and compiled once when it
//! loads. The host validates every object's `spec.config` against it, so
//! what the schema can make that cost is bounded here: its size, its depth
//! and its size with every `$ref` inlined (nested combinators through
//! shared definitions grow exponentially), no reference outside the
//! document, and patterns on a linear-time regex engine. A schema outside
//! these bounds refuses the module at load, never each call.

use std::collections::HashMap;
use std::sync::Arc;

use jsonschema::{PatternOptions, Validator};
use serde_json::{Map, Value};

use super::bounds;

/// Keywords whose value is a list of subschemas applied to one instance.
const COMBINATORS: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];

/// Why a component's config schema cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The text is not a JSON object.
    #[error("the config schema is not a JSON object")]
    NotAnObject(#[source] serde_json::Error),
    /// The text is over [`bounds::SCHEMA_MAX_BYTES`].
    #[error("the config schema is {bytes} bytes, over the limit of {limit}")]
    TooLarge {
        /// Its size.
        bytes: usize,
        /// The bound.
        limit: usize,
    },
    /// Nesting, `$ref`s inlined, is over [`bounds::SCHEMA_MAX_DEPTH`].
    #[error("the config schema nests deeper than {limit} levels (with $refs inlined) at {at}")]
    TooDeep {
        /// Where (a JSON Pointer into the schema).
        at: String,
        /// The bound.
        limit: usize,
    },
    /// With its `$ref`s inlined, the schema is over [`bounds::SCHEMA_MAX_EXPANDED_NODES`].
    #[error("the config schema has over {limit} values with its $refs inlined at each use")]
    TooManyNodes {
        /// The bound.
        limit: u64,
    },
    /// A combinator lists more subschemas than [`bounds::SCHEMA_MAX_FAN_OUT`].
    #[error("{keyword} at {at} lists {count} subschemas, over the limit of {limit}")]
    FanOut {
        /// The keyword.
        keyword: &'static str,
        /// Where.
        at: String,
        /// How many it lists.
        count: usize,
        /// The bound.
        limit: usize,
    },
    /// A reference the host will not follow: outside the document, or by
    /// a keyword whose target depends on the path taken.
    #[error("{keyword} {reference:?} at {at} is not a reference into this document (`#` or `#/…`)")]
    NotLocal {
        /// `$ref`, `$dynamicRef`, `$recursiveRef` or `$id`.
        keyword: &'static str,
        /// Its value.
        reference: String,
        /// Where.
        at: String,
    },
    /// A `$ref` whose target does not exist.
    #[error("$ref {reference:?} at {at} points at nothing in the schema")]
    Dangling {
        /// Its value.
        reference: String,
        /// Where.
        at: String,
    },
    /// A `$ref` that leads back to itself.
    #[error("$ref {reference:?} at {at} leads back to itself; recursive schemas are not accepted")]
    Cycle {
        /// Its value.
        reference: String,
        /// Where.
        at: String,
    },
    /// The JSON Schema implementation refused it.
    #[error("the config schema is not a valid JSON Schema: {0}")]
    Invalid(String),
}

/// Where and why a config does not satisfy its schema. Values are masked:
/// configs may hold secrets (join tokens, say).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// JSON path of the offending value (`$.token`, `$.caCertHashes[1]`, `$`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "spec.config at {}: {}", self.path, self.message)
    }
}

/// A provider's config schema: its JSON, and the validator compiled from it.
#[derive(Clone)]
pub struct ConfigSchema {
    json: Value,
    validator: Arc<Validator>,
}

impl std::fmt::Debug for ConfigSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigSchema")
            .field("json", &self.json)
            .finish_non_exhaustive()
    }
}

impl ConfigSchema {
    /// Parses, bounds and compiles the schema text a component returned.
    pub fn compile(text: &str) -> Result<Self, SchemaError> {
        if text.len() > bounds::SCHEMA_MAX_BYTES {
            return Err(SchemaError::TooLarge {
                bytes: text.len(),
                limit: bounds::SCHEMA_MAX_BYTES,
            });
        }
        let json = serde_json::from_str::<Map<String, Value>>(text)
            .map(Value::Object)
            .map_err(SchemaError::NotAnObject)?;
        Expansion::new(&json).measure()?;
        let pattern_bound = bounds::SCHEMA_MAX_PATTERN_BYTES;
        let validator = jsonschema::options()
            .with_pattern_options(
                PatternOptions::regex()
                    .size_limit(pattern_bound)
                    .dfa_size_limit(pattern_bound),
            )
            .build(&json)
            .map_err(|e| SchemaError::Invalid(e.masked().to_string()))?;
        Ok(Self {
            json,
            validator: Arc::new(validator),
        })
    }

    /// The schema as the component exported it.
    pub fn json(&self) -> &Value {
        &self.json
    }

    /// Checks `config` against the schema. Its cost is bounded by the
    /// schema's bounds times the config's size; callers that must not
    /// wait on it run it off their async runtime.
    pub fn check(&self, config: &Value) -> Result<(), Mismatch> {
        self.validator.validate(config).map_err(|error| Mismatch {
            path: json_path(error.instance_path().as_str()),
            message: error.masked().to_string(),
        })
    }
}

/// Measures a schema as its validator will walk it: every `$ref` followed,
/// each target measured once and counted at each use.
struct Expansion<'a> {
    root: &'a Value,
    /// Measured `$ref` targets: (values, depth).
    measured: HashMap<String, (u64, usize)>,
    /// `$ref` targets being measured (a cycle if met again).
    open: Vec<String>,
}

impl<'a> Expansion<'a> {
    fn new(root: &'a Value) -> Self {
        Self {
            root,
            measured: HashMap::new(),
            open: Vec::new(),
        }
    }

    fn measure(&mut self) -> Result<(), SchemaError> {
        let (nodes, _) = self.node(self.root, "", 0)?;
        if nodes > bounds::SCHEMA_MAX_EXPANDED_NODES {
            return Err(SchemaError::TooManyNodes {
                limit: bounds::SCHEMA_MAX_EXPANDED_NODES,
            });
        }
        Ok(())
    }

    /// (values, depth) of `value` at `at`, found `level` levels deep.
    fn node(&mut self, value: &Value, at: &str, level: usize) -> Result<(u64, usize), SchemaError> {
        if level > bounds::SCHEMA_MAX_DEPTH {
            return Err(SchemaError::TooDeep {
                at: pointer_text(at),
                limit: bounds::SCHEMA_MAX_DEPTH,
            });
        }
        let mut nodes: u64 = 1;
        let mut depth = 0;
        let mut add = |(n, d): (u64, usize)| -> Result<(), SchemaError> {
            nodes = nodes.saturating_add(n);
            depth = depth.max(d + 1);
            if nodes > bounds::SCHEMA_MAX_EXPANDED_NODES {
                return Err(SchemaError::TooManyNodes {
                    limit: bounds::SCHEMA_MAX_EXPANDED_NODES,
                });
            }
            Ok(())
        };
        match value {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    add(self.node(item, &format!("{at}/{i}"), level + 1)?)?;
                }
            }
            Value::Object(map) => {
                check_keywords(map, at)?;
                for keyword in COMBINATORS {
                    if let Some(Value::Array(list)) = map.get(keyword)
                        && list.len() > bounds::SCHEMA_MAX_FAN_OUT
                    {
                        return Err(SchemaError::FanOut {
                            keyword,
                            at: pointer_text(at),
                            count: list.len(),
                            limit: bounds::SCHEMA_MAX_FAN_OUT,
                        });
                    }
                }
                if let Some(Value::String(reference)) = map.get("$ref") {
                    add(self.reference(reference, at, level)?)?;
                }
                for (key, child) in map {
                    let child_at = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
                    add(self.node(child, &child_at, level + 1)?)?;
                }
            }
            _ => {}
        }
        Ok((nodes, depth))
    }

    /// (values, depth) of a `$ref`'s target, measured once.
    fn reference(
        &mut self,
        reference: &str,
        at: &str,
        level: usize,
    ) -> Result<(u64, usize), SchemaError> {
        if let Some(measured) = self.measured.get(reference) {
            // As measured the first time: the target one level below.
            if level + 1 + measured.1 > bounds::SCHEMA_MAX_DEPTH {
                return Err(SchemaError::TooDeep {
                    at: pointer_text(at),
                    limit: bounds::SCHEMA_MAX_DEPTH,
                });
            }
            return Ok(*measured);
        }
        if self.open.iter().any(|open| open == reference) {
            return Err(SchemaError::Cycle {
                reference: reference.to_owned(),
                at: pointer_text(at),
            });
        }
        let pointer = percent_decoded(&reference[1..]);
        let Some(target) = self.root.pointer(&pointer) else {
            return Err(SchemaError::Dangling {
                reference: reference.to_owned(),
                at: pointer_text(at),
            });
        };
        self.open.push(reference.to_owned());
        let measured = self.node(target, &pointer, level + 1);
        self.open.pop();
        let measured = measured?;
        self.measured.insert(reference.to_owned(), measured);
        Ok(measured)
    }
}

/// Refuses what the host will not resolve: references out of the
/// document, dynamic references, and `$id`s below the root (they
/// would move the base that `#/…` references resolve against).
fn check_keywords(map: &Map<String, Value>, at: &str) -> Result<(), SchemaError> {
    let not_local = |keyword, reference: &Value| SchemaError::NotLocal {
        keyword,
        reference: reference.as_str().unwrap_or_default().to_owned(),
        at: pointer_text(at),
    };
    // Only strings: `{"properties": {"$ref": {…}}}` names a property.
    if let Some(reference) = map.get("$ref").filter(|r| r.is_string())
        && !reference.as_str().is_some_and(is_local)
    {
        return Err(not_local("$ref", reference));
    }
    for keyword in ["$dynamicRef", "$recursiveRef"] {
        if let Some(reference) = map.get(keyword).filter(|r| r.is_string()) {
            return Err(not_local(keyword, reference));
        }
    }
    if !at.is_empty()
        && let Some(id) = map.get("$id")
        && id.is_string()
    {
        return Err(not_local("$id", id));
    }
    Ok(())
}

/// `#` or `#/…`: a JSON Pointer into this document.
fn is_local(reference: &str) -> bool {
    reference == "#" || reference.starts_with("#/")
}

/// `%25` and the like in a reference's fragment, as URI fragments allow.
fn percent_decoded(fragment: &str) -> String {
    let bytes = fragment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(&h), Some(&l)) = (bytes.get(i + 1), bytes.get(i + 2))
            && let (Some(h), Some(l)) = (hex(h), hex(l))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A JSON Pointer into the schema as messages show it (`#/properties/a`).
fn pointer_text(pointer: &str) -> String {
    format!("#{pointer}")
}

/// A JSON Pointer (`/caCertHashes/1`) as the JSON path providers report (`$.caCertHashes[1]`).
fn json_path(pointer: &str) -> String {
    let mut path = String::from("$");
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            path.push('[');
            path.push_str(&segment);
            path.push(']');
        } else {
            path.push('.');
            path.push_str(&segment);
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn compile(schema: &Value) -> Result<ConfigSchema, SchemaError> {
        ConfigSchema::compile(&schema.to_string())
    }

    /// `{"not": {"not": … {} … }}`: each `not` one level deeper.
    fn nested_nots(levels: usize) -> Value {
        nested_nots_around(levels, json!({}))
    }

    /// `inner` under `levels` nested `not`s.
    fn nested_nots_around(levels: usize, inner: Value) -> Value {
        (0..levels).fold(inner, |inner, _| json!({ "not": inner }))
    }

    #[test]
    fn the_size_bound_is_the_schema_text() {
        // `{"description":"…"}` is 18 bytes around the string.
        let at_bound = json!({"description": "x".repeat(bounds::SCHEMA_MAX_BYTES - 18)});
        assert_eq!(at_bound.to_string().len(), bounds::SCHEMA_MAX_BYTES);
        assert!(compile(&at_bound).is_ok());
        let over = json!({"description": "x".repeat(bounds::SCHEMA_MAX_BYTES - 17)});
        assert!(matches!(
            compile(&over),
            Err(SchemaError::TooLarge { bytes, .. }) if bytes == bounds::SCHEMA_MAX_BYTES + 1
        ));
    }

    #[test]
    fn nesting_is_bounded_with_references_inlined() {
        assert!(compile(&nested_nots(bounds::SCHEMA_MAX_DEPTH)).is_ok());
        assert!(matches!(
            compile(&nested_nots(bounds::SCHEMA_MAX_DEPTH + 1)),
            Err(SchemaError::TooDeep { .. })
        ));
        // Shallow text, deep once `$ref` is followed: a chain of definitions.
        let chain = |links: usize| {
            let mut defs = serde_json::Map::new();
            for i in 0..links {
                defs.insert(
                    format!("d{i}"),
                    json!({"$ref": format!("#/$defs/d{}", i + 1)}),
                );
            }
            defs.insert(format!("d{links}"), json!({"type": "string"}));
            json!({"$ref": "#/$defs/d0", "$defs": defs})
        };
        assert!(compile(&chain(10)).is_ok());
        assert!(matches!(
            compile(&chain(bounds::SCHEMA_MAX_DEPTH)),
            Err(SchemaError::TooDeep { .. })
        ));
    }

    #[test]
    fn a_reference_measured_once_is_bounded_alike_at_each_use() {
        // One definition, used shallow and then `deep` levels further down.
        let schema = |shallow: bool, deep: usize| {
            let reference = json!({"$ref": "#/$defs/leaf"});
            let mut uses = vec![nested_nots_around(deep, reference.clone())];
            if shallow {
                uses.insert(0, reference);
            }
            json!({"$defs": {"leaf": {"type": "string"}}, "anyOf": uses})
        };
        // The deepest use alone that still fits...
        let limit = (0..=bounds::SCHEMA_MAX_DEPTH)
            .find(|&deep| compile(&schema(false, deep + 1)).is_err())
            .expect("some depth crosses the bound");
        assert!(compile(&schema(false, limit)).is_ok());
        // ...fits, and one level more does not, when the target was
        // measured first at a shallow use.
        assert!(compile(&schema(true, limit)).is_ok());
        assert!(matches!(
            compile(&schema(true, limit + 1)),
            Err(SchemaError::TooDeep { .. })
        ));
    }

    #[test]
    fn the_expanded_size_is_bounded_at_each_use_of_a_reference() {
        // Root object, the enum array and its members.
        let values = |members: u64| json!({"enum": vec![0; usize::try_from(members).unwrap_or(0)]});
        assert!(compile(&values(bounds::SCHEMA_MAX_EXPANDED_NODES - 2)).is_ok());
        assert!(matches!(
            compile(&values(bounds::SCHEMA_MAX_EXPANDED_NODES - 1)),
            Err(SchemaError::TooManyNodes { .. })
        ));
        // The schema bomb: each level refers twice to the next, so 18
        // definitions expand to 2^18 subschemas (more than the bound).
        let mut defs = serde_json::Map::new();
        for i in 0..18 {
            let next = format!("#/$defs/l{}", i + 1);
            defs.insert(
                format!("l{i}"),
                json!({"anyOf": [{"$ref": next}, {"$ref": next}]}),
            );
        }
        defs.insert("l18".into(), json!({"type": "string"}));
        let bomb = json!({"$ref": "#/$defs/l0", "$defs": defs});
        assert!(matches!(
            compile(&bomb),
            Err(SchemaError::TooManyNodes { .. })
        ));
    }

    #[test]
    fn a_combinator_lists_at_most_the_fan_out_bound() {
        let any_of = |n: usize| json!({"anyOf": vec![json!({"type": "string"}); n]});
        assert!(compile(&any_of(bounds::SCHEMA_MAX_FAN_OUT)).is_ok());
        let refused = compile(&any_of(bounds::SCHEMA_MAX_FAN_OUT + 1));
        assert!(
            matches!(refused, Err(SchemaError::FanOut { keyword: "anyOf", count, .. }) if count == bounds::SCHEMA_MAX_FAN_OUT + 1),
            "{refused:?}"
        );
    }

    #[test]
    fn references_stay_inside_the_document_and_lead_somewhere_once() {
        let refused = |schema: Value| compile(&schema).err().map(|e| e.to_string());
        let remote = refused(json!({"$ref": "https://example.com/schema.json"}));
        assert!(remote.is_some_and(|e| e.contains("https://example.com/schema.json")));
        let relative = refused(json!({"properties": {"a": {"$ref": "other.json#/x"}}}));
        assert!(relative.is_some_and(|e| e.contains("#/properties/a")));
        assert!(matches!(
            compile(&json!({"$dynamicRef": "#meta"})),
            Err(SchemaError::NotLocal {
                keyword: "$dynamicRef",
                ..
            })
        ));
        assert!(matches!(
            compile(&json!({"properties": {"a": {"$id": "https://example.com/a"}}})),
            Err(SchemaError::NotLocal { keyword: "$id", .. })
        ));
        assert!(matches!(
            compile(&json!({"$ref": "#/$defs/missing"})),
            Err(SchemaError::Dangling { .. })
        ));
        assert!(matches!(
            compile(
                &json!({"$defs": {"a": {"items": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"})
            ),
            Err(SchemaError::Cycle { .. })
        ));
        // What stays: a root `$id`, local references used twice, and a
        // property that happens to be named `$ref`.
        let fine = json!({
            "$id": "https://capwasm.dev/schemas/example",
            "$defs": {"name": {"type": "string", "maxLength": 63}},
            "properties": {
                "a": {"$ref": "#/$defs/name"},
                "b": {"$ref": "#/$defs/name"},
                "$ref": {"type": "integer"}
            }
        });
        let schema = compile(&fine).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            schema
                .check(&json!({"a": "x", "b": "y", "$ref": 1}))
                .is_ok()
        );
        let mismatch = schema.check(&json!({"b": 5})).err();
        assert_eq!(mismatch.map(|m| m.path), Some("$.b".to_owned()));
    }

    #[test]
    fn patterns_run_on_a_linear_time_engine() {
        // Backtracking-only syntax does not compile; nested quantifiers do,
        // and cost linear time.
        assert!(matches!(
            compile(&json!({"pattern": "^(a)\\1$"})),
            Err(SchemaError::Invalid(_))
        ));
        let schema = compile(&json!({"pattern": "^(a+)+$"})).unwrap_or_else(|e| panic!("{e}"));
        let evil = format!("{}!", "a".repeat(10_000));
        assert!(schema.check(&json!(evil)).is_err());
    }

    #[test]
    fn json_path_turns_pointers_into_provider_style_paths() {
        assert_eq!(json_path(""), "$");
        assert_eq!(json_path("/token"), "$.token");
        assert_eq!(json_path("/caCertHashes/1"), "$.caCertHashes[1]");
        assert_eq!(json_path("/nodeLabels/a~1b"), "$.nodeLabels.a/b");
    }
}
