//! What one webhook request may cost. The body is capped at the API
//! server's own limit; JSON is counted before anything is built from it,
//! because a tree of `serde_json::Value`s costs ~16 times the text of small
//! values (`[0,0,…]`: 32 bytes for every 2), and more while a list grows.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The longest request body: the API server refuses longer request bodies
/// itself, so none of the reviews it sends is longer.
pub const MAX_BODY: usize = 3 << 20;

/// The most JSON values (keys included) one object may hold before it is
/// built: a MachinePool of 5,000 replicas (Kubernetes' largest cluster)
/// holds ~60,000, and 100,000 bound its tree to ~5 MiB however small the
/// values are (a conversion holds about three such trees at once).
pub const MAX_VALUES: usize = 100_000;

/// Why a document was not built.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// It holds more values than [`MAX_VALUES`].
    #[error("it holds more than {MAX_VALUES} JSON values")]
    TooManyValues,
    /// It is not JSON of the expected shape.
    #[error("it is not JSON of the expected shape")]
    Json(#[source] serde_json::Error),
}

/// `T` from `json`, once a pass that builds nothing has counted at most
/// [`MAX_VALUES`] values in it.
pub fn parse<'a, T: Deserialize<'a>>(json: &'a [u8]) -> Result<T, ParseError> {
    count(json, MAX_VALUES)?;
    serde_json::from_slice(json).map_err(ParseError::Json)
}

/// Counts the values of `json` (keys included), stopping past `limit`.
fn count(json: &[u8], limit: usize) -> Result<usize, ParseError> {
    let mut budget = Budget {
        left: limit,
        exceeded: false,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let counted = Count {
        budget: &mut budget,
    }
    .deserialize(&mut deserializer)
    .and_then(|()| deserializer.end());
    match counted {
        Ok(()) => Ok(limit - budget.left),
        Err(_) if budget.exceeded => Err(ParseError::TooManyValues),
        Err(e) => Err(ParseError::Json(e)),
    }
}

/// The values still allowed, and whether one more was met.
struct Budget {
    left: usize,
    exceeded: bool,
}

/// One value and everything in it, counted against the budget; strings are
/// seen borrowed (or in serde_json's one scratch buffer), never kept.
struct Count<'a> {
    budget: &'a mut Budget,
}

impl Count<'_> {
    fn tick<E: de::Error>(&mut self) -> Result<(), E> {
        if let Some(left) = self.budget.left.checked_sub(1) {
            self.budget.left = left;
            Ok(())
        } else {
            self.budget.exceeded = true;
            Err(E::custom(format_args!(
                "more than {MAX_VALUES} JSON values"
            )))
        }
    }

    fn inner(&mut self) -> Count<'_> {
        Count {
            budget: &mut *self.budget,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(mut self, _: bool) -> Result<(), E> {
        self.tick()
    }

    fn visit_i64<E: de::Error>(mut self, _: i64) -> Result<(), E> {
        self.tick()
    }

    fn visit_u64<E: de::Error>(mut self, _: u64) -> Result<(), E> {
        self.tick()
    }

    fn visit_f64<E: de::Error>(mut self, _: f64) -> Result<(), E> {
        self.tick()
    }

    fn visit_str<E: de::Error>(mut self, _: &str) -> Result<(), E> {
        self.tick()
    }

    fn visit_unit<E: de::Error>(mut self) -> Result<(), E> {
        self.tick()
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        self.tick()?;
        while seq.next_element_seed(self.inner())?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        self.tick()?;
        while map.next_key::<IgnoredAny>()?.is_some() {
            // A key costs a String once built.
            self.tick()?;
            map.next_value_seed(self.inner())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// `[0,0,…]` with `values` values in all (the array's own included).
    fn zeros(values: usize) -> String {
        let mut json = String::from("[");
        for i in 1..values {
            json.push_str(if i == 1 { "0" } else { ",0" });
        }
        json.push(']');
        json
    }

    #[test]
    fn count_is_every_value_keys_included() {
        let json = br#"{"a": [1, "x", null, true, {"b": 2.5}], "c": {}}"#;
        // The object, a, the array, 5 items, b and its value, c and its value.
        assert_eq!(count(json, MAX_VALUES).unwrap(), 12);
    }

    #[test]
    fn a_document_of_the_bound_is_built() {
        let json = zeros(MAX_VALUES);
        let value: Value = parse(json.as_bytes()).unwrap();
        assert_eq!(value.as_array().map(Vec::len), Some(MAX_VALUES - 1));
    }

    #[test]
    fn a_document_of_one_value_more_than_the_bound_is_refused_unbuilt() {
        let json = zeros(MAX_VALUES + 1);
        assert!(matches!(
            parse::<Value>(json.as_bytes()),
            Err(ParseError::TooManyValues)
        ));
        // Whatever it would have been built as.
        assert!(matches!(
            parse::<IgnoredAny>(json.as_bytes()),
            Err(ParseError::TooManyValues)
        ));
    }

    #[test]
    fn a_document_nested_past_serde_jsons_recursion_limit_is_refused() {
        let json = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(matches!(
            parse::<Value>(json.as_bytes()),
            Err(ParseError::Json(e)) if e.to_string().contains("recursion limit")
        ));
    }

    #[test]
    fn text_after_the_document_is_refused() {
        assert!(matches!(parse::<Value>(b"{} {}"), Err(ParseError::Json(_))));
    }
}
