//! The rules of a PlatformCluster's spec that need no provider: judged
//! by the controller, which holds the cluster's objects while one is
//! broken, and by the admission webhook, which refuses the write.

use crate::api::platform::PlatformClusterSpec;
use crate::api::{ClusterTemplate, PlatformCluster};
use crate::wasm::composed::dns_label;

/// Why `template`, which `cluster` names, may not be used: it is
/// deprecated and the cluster does not run it yet (it is new, or changing
/// to it).
pub fn deprecated(cluster: &PlatformCluster, template: &ClusterTemplate) -> Option<String> {
    let name = &cluster.spec.template_name;
    let applied = cluster
        .status
        .as_ref()
        .and_then(|s| s.applied_template.as_ref());
    (template.spec.deprecated && applied != Some(name)).then(|| {
        format!(
            "spec.templateName: ClusterTemplate {name:?} is deprecated: no new cluster, and no cluster changing to it, may use it"
        )
    })
}

/// The first rule of the node groups `spec` breaks, naming the field.
pub fn node_groups(spec: &PlatformClusterSpec) -> Result<(), String> {
    for (i, group) in spec.node_groups.iter().enumerate() {
        let at = format!("spec.nodeGroups[{i}]");
        if !dns_label(&group.name) {
            return Err(format!(
                "{at}.name: {:?} is not a DNS label (lowercase letters, digits and '-')",
                group.name
            ));
        }
        match (group.count, group.min_count, group.max_count) {
            (Some(_), None, None) => {}
            (Some(_), _, _) => {
                return Err(format!(
                    "{at}: set count, or minCount and maxCount, not both"
                ));
            }
            (None, Some(min), Some(max)) if min > max => {
                return Err(format!(
                    "{at}: minCount ({min}) is greater than maxCount ({max})"
                ));
            }
            (None, Some(_), Some(_)) => {}
            (None, _, _) => {
                return Err(format!("{at}: set count, or minCount and maxCount"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::platform::NodeGroup;

    fn group(count: Option<u32>, min: Option<u32>, max: Option<u32>) -> NodeGroup {
        NodeGroup {
            name: "workers".into(),
            count,
            min_count: min,
            max_count: max,
            values: None,
        }
    }

    fn check(groups: Vec<NodeGroup>) -> Result<(), String> {
        node_groups(&PlatformClusterSpec {
            node_groups: groups,
            ..PlatformClusterSpec::default()
        })
    }

    #[test]
    fn a_group_has_a_count_or_both_bounds() {
        assert_eq!(check(vec![group(Some(2), None, None)]), Ok(()));
        assert_eq!(check(vec![group(None, Some(1), Some(3))]), Ok(()));
        let both = check(vec![
            group(Some(2), None, None),
            group(Some(2), Some(1), None),
        ]);
        assert_eq!(
            both,
            Err("spec.nodeGroups[1]: set count, or minCount and maxCount, not both".into())
        );
        let inverted = check(vec![group(None, Some(5), Some(2))]);
        assert_eq!(
            inverted,
            Err("spec.nodeGroups[0]: minCount (5) is greater than maxCount (2)".into())
        );
        assert!(check(vec![group(None, Some(1), None)]).is_err());
        assert!(check(vec![group(None, None, None)]).is_err());
    }

    #[test]
    fn a_group_is_named_by_a_dns_label() {
        let mut bad = group(Some(1), None, None);
        bad.name = "Workers".into();
        assert!(check(vec![bad]).is_err_and(|e| e.starts_with("spec.nodeGroups[0].name")));
    }
}
