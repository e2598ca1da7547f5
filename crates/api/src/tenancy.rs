//! Which namespaces may use a cluster-scoped object another team made (a
//! ProviderModule and the cloud account behind its credentials, a
//! ClusterTemplate), as Cluster API AWS's identities say it: by name, by
//! label, or every namespace; and, when the object says nothing, none.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt as _};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The namespaces allowed to use the object: those `list` names and those
/// `selector` selects. `{}` (neither set) allows every namespace; leaving
/// `allowedNamespaces` out allows none.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.selector) || !has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))", "message": "selector.matchExpressions: In and NotIn take values, Exists and DoesNotExist take none"},
]))]
pub struct AllowedNamespaces {
    /// Namespaces by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 256),
        inner(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub list: Vec<String>,
    /// Namespaces by their labels, as a label selector selects (an empty
    /// selector selects every namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "selector_schema")]
    pub selector: Option<LabelSelector>,
}

impl AllowedNamespaces {
    /// The rule `{}`: every namespace.
    pub fn all() -> Self {
        Self::default()
    }

    /// The rule naming `namespaces`.
    pub fn named(namespaces: &[&str]) -> Self {
        Self {
            list: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            selector: None,
        }
    }

    fn allows(&self, namespace: &str, labels: Option<&BTreeMap<String, String>>) -> bool {
        if self.list.is_empty() && self.selector.is_none() {
            return true;
        }
        if self.list.iter().any(|n| n == namespace) {
            return true;
        }
        let Some(selector) = &self.selector else {
            return false;
        };
        // A selector the API server let through but that does not parse
        // selects nothing.
        let Ok(selector) = Selector::try_from(selector.clone()) else {
            return false;
        };
        let empty = BTreeMap::new();
        selector.matches(labels.unwrap_or(&empty))
    }
}

/// Whether `rule` (absent: none) lets `namespace`, labelled `labels` (not
/// known: only the list can allow it), use what it guards.
pub fn allows(
    rule: Option<&AllowedNamespaces>,
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    rule.is_some_and(|rule| rule.allows(namespace, labels))
}

/// A label selector with bounds the API server can cost: at most 64
/// labels and 16 expressions of at most 64 values, operators named.
fn selector_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "properties": {
            "matchLabels": {
                "type": "object",
                "maxProperties": 64,
                "additionalProperties": { "type": "string", "maxLength": 63 },
            },
            "matchExpressions": {
                "type": "array",
                "maxItems": 16,
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "properties": {
                        "key": { "type": "string", "minLength": 1, "maxLength": 317 },
                        "operator": { "type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist"] },
                        "values": {
                            "type": "array",
                            "maxItems": 64,
                            "items": { "type": "string", "maxLength": 63 },
                        },
                    },
                },
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn no_rule_allows_none_and_an_empty_rule_allows_all() {
        assert!(!allows(None, "team-a", None));
        assert!(allows(Some(&AllowedNamespaces::all()), "team-a", None));
    }

    #[test]
    fn a_namespace_is_allowed_by_name_or_by_its_labels() {
        let rule = AllowedNamespaces {
            list: vec!["team-a".into()],
            selector: Some(LabelSelector {
                match_labels: Some(labels(&[("tenant", "gold")])),
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: "frozen".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                }]),
            }),
        };
        assert!(allows(Some(&rule), "team-a", None));
        assert!(allows(
            Some(&rule),
            "team-b",
            Some(&labels(&[("tenant", "gold")]))
        ));
        let frozen = labels(&[("tenant", "gold"), ("frozen", "")]);
        assert!(!allows(Some(&rule), "team-b", Some(&frozen)));
        assert!(!allows(
            Some(&rule),
            "team-c",
            Some(&labels(&[("tenant", "free")]))
        ));
        assert!(!allows(Some(&rule), "team-c", None));
        let named = AllowedNamespaces::named(&["team-a"]);
        assert!(!allows(
            Some(&named),
            "team-b",
            Some(&labels(&[("tenant", "gold")]))
        ));
    }
}
