//! Which template changes are safe, azimuth's rule: no downgrade, at most
//! one minor version up at a time, and never more than one minor version
//! above the oldest kubelet still running.

use capwasm_provider_sdk::platform::{ValidateRequest, Verdict};
use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::ProviderError;
use serde_json::Value;

use crate::document::{at, parse, text};

/// A Kubernetes version, `vMAJOR.MINOR.PATCH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(u64, u64, u64);

impl Version {
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.strip_prefix('v').unwrap_or(text).splitn(3, '.');
        let mut next = || parts.next()?.parse().ok();
        Some(Self(next()?, next()?, next()?))
    }

    fn minor_above(self, other: Self) -> Option<u64> {
        (self.0 == other.0).then(|| self.1.saturating_sub(other.1))
    }
}

impl core::fmt::Display for Version {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "v{}.{}.{}", self.0, self.1, self.2)
    }
}

/// The version a cluster runs on a template: its own value, else the template's.
fn version_of(cluster: &Value, template: &Value) -> Option<Version> {
    text(cluster, &["spec", "values", "kubernetesVersion"])
        .or_else(|| text(template, &["spec", "values", "kubernetesVersion"]))
        .and_then(Version::parse)
}

pub fn validate(request: &ValidateRequest) -> Result<Verdict, ProviderError> {
    let old = parse(&request.old, "old")?;
    let new = parse(&request.new, "new")?;
    let old_template = parse(&request.old_template, "old template")?;
    let new_template = parse(&request.new_template, "new template")?;
    let Some(to) = version_of(&new, &new_template) else {
        return Ok(Verdict::Refused(
            "the new template has no kubernetesVersion".into(),
        ));
    };
    // A template gone since it was applied: nothing to compare with.
    let Some(from) = version_of(&old, &old_template) else {
        return Ok(Verdict::Allowed);
    };
    if to < from {
        return Ok(Verdict::Refused(format!("{from} to {to} is a downgrade")));
    }
    if to.minor_above(from).is_none_or(|m| m > 1) {
        return Ok(Verdict::Refused(format!(
            "{from} to {to} is more than one minor version at once"
        )));
    }
    let oldest = at(&old, &["status", "nodes"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| text(n, &["kubeletVersion"]).and_then(Version::parse))
        .min();
    if let Some(oldest) = oldest
        && to.minor_above(oldest).is_none_or(|m| m > 1)
    {
        return Ok(Verdict::Refused(format!(
            "nodes still run {oldest}: {to} would be more than one minor version above the oldest kubelet"
        )));
    }
    Ok(Verdict::Allowed)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Why the change is refused; `None` if allowed.
    fn verdict(from: &str, to: &str, kubelets: &[&str]) -> Option<String> {
        let nodes: Vec<Value> = kubelets
            .iter()
            .map(|v| json!({"kubeletVersion": v}))
            .collect();
        let template = |v: &str| json!({"spec": {"values": {"kubernetesVersion": v}}}).to_string();
        let request = ValidateRequest {
            old: json!({"status": {"nodes": nodes}}).to_string(),
            new: json!({}).to_string(),
            old_template: template(from),
            new_template: template(to),
        };
        match validate(&request) {
            Ok(Verdict::Allowed) => None,
            Ok(Verdict::Refused(why)) => Some(why),
            Err(e) => Some(e.message().into()),
        }
    }

    #[test]
    fn one_minor_up_is_allowed_and_anything_else_refused_with_why() {
        assert_eq!(verdict("v1.30.2", "v1.31.0", &["v1.30.2"]), None);
        assert_eq!(verdict("v1.30.2", "v1.30.5", &[]), None);
        assert_eq!(
            verdict("v1.30.2", "v1.32.0", &[]),
            Some("v1.30.2 to v1.32.0 is more than one minor version at once".into())
        );
        assert_eq!(
            verdict("v1.31.0", "v1.30.9", &[]),
            Some("v1.31.0 to v1.30.9 is a downgrade".into())
        );
        assert_eq!(
            verdict("v1.31.0", "v1.32.0", &["v1.30.4", "v1.31.0"]),
            Some("nodes still run v1.30.4: v1.32.0 would be more than one minor version above the oldest kubelet".into())
        );
        assert!(verdict("v1.31.0", "v2.0.0", &[]).is_some());
    }
}
