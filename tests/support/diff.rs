//! What changed between two versions of an object, path by path, for
//! people reading a trace.

use std::collections::BTreeMap;

use serde_json::Value;

/// Adds to `out` the paths below `path` where `after` differs from
/// `before`, with both values (shortened); paths ending in one of `noise`
/// are left out. Conditions are compared by type.
pub fn changes(path: &str, before: &Value, after: &Value, noise: &[&str], out: &mut Vec<String>) {
    if noise.iter().any(|n| path.ends_with(n)) {
        return;
    }
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (key, value) in a {
                changes(
                    &format!("{path}.{key}"),
                    b.get(key).unwrap_or(&Value::Null),
                    value,
                    noise,
                    out,
                );
            }
            for key in b.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!("{path}.{key} removed"));
            }
        }
        // Conditions by type, the way a reader compares them.
        (Value::Array(b), Value::Array(a))
            if a.iter().chain(b).all(|c| c.get("type").is_some()) =>
        {
            let by_type = |list: &Vec<Value>| -> BTreeMap<String, Value> {
                list.iter()
                    .map(|c| (c["type"].as_str().unwrap_or_default().to_owned(), c.clone()))
                    .collect()
            };
            let (b, a) = (by_type(b), by_type(a));
            for (type_, condition) in &a {
                changes(
                    &format!("{path}[{type_}]"),
                    b.get(type_).unwrap_or(&Value::Null),
                    condition,
                    noise,
                    out,
                );
            }
            for type_ in b.keys().filter(|t| !a.contains_key(*t)) {
                out.push(format!("{path}[{type_}] removed"));
            }
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
