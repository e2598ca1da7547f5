//! What changed between two versions of an object, path by path, for
//! people reading a trace.

use std::collections::BTreeMap;

use serde_json::Value;

/// Adds to `out` the paths below `path` where `after` differs from
/// `before`, with both values (shortened); paths ending in one of `noise`
/// are left out. Conditions are compared by type.
pub fn changes<'a>(
    path: &str,
    before: &'a Value,
    after: &'a Value,
    noise: &[&str],
    out: &mut Vec<String>,
) {
    if noise.iter().any(|n| path.ends_with(n)) {
        return;
    }
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let entries = |map: &'a serde_json::Map<String, Value>| -> Entries<'a> {
                map.iter().map(|(k, v)| (k.as_str(), v)).collect()
            };
            entries_changed(
                &entries(b),
                &entries(a),
                |key| format!("{path}.{key}"),
                noise,
                out,
            );
        }
        // Conditions by type, the way a reader compares them.
        (Value::Array(b), Value::Array(a))
            if a.iter().chain(b).all(|c| c.get("type").is_some()) =>
        {
            let by_type = |list: &'a [Value]| -> Entries<'a> {
                list.iter()
                    .map(|c| (c["type"].as_str().unwrap_or_default(), c))
                    .collect()
            };
            entries_changed(
                &by_type(b),
                &by_type(a),
                |type_| format!("{path}[{type_}]"),
                noise,
                out,
            );
        }
        (b, a) if b != a => {
            let short = |v: &Value| {
                let text = v.to_string();
                if text.chars().count() > 60 {
                    format!("{}…", text.chars().take(60).collect::<String>())
                } else {
                    text
                }
            };
            out.push(format!("{path}: {} → {}", short(b), short(a)));
        }
        _ => {}
    }
}

/// Values by key (an object's) or by type (conditions').
type Entries<'a> = BTreeMap<&'a str, &'a Value>;

/// [`changes`] of each entry of `after` against `before`'s of the same
/// key, at the path `at` names it; entries only `before` has are removed.
fn entries_changed(
    before: &Entries<'_>,
    after: &Entries<'_>,
    at: impl Fn(&str) -> String,
    noise: &[&str],
    out: &mut Vec<String>,
) {
    for (key, value) in after {
        changes(
            &at(key),
            before.get(key).copied().unwrap_or(&Value::Null),
            value,
            noise,
            out,
        );
    }
    for key in before.keys().filter(|k| !after.contains_key(*k)) {
        out.push(format!("{} removed", at(key)));
    }
}
