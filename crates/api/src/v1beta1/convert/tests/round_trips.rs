//! Both versions there and back over generated objects.

use super::generate::*;
use super::*;

/// `object` converted to the other version and back, typed and as JSON
/// through [`convert`] (to `there`, then `back`): the same each way.
fn there_and_back<A: Serialize, B: Serialize>(
    object: &A,
    to: impl Fn(&A) -> Result<B, ConversionError>,
    from: impl Fn(&B) -> Result<A, ConversionError>,
    there: &str,
    back: &str,
) -> Result<(), TestCaseError> {
    let other = to(object).unwrap();
    prop_assert_eq!(to_value(&from(&other).unwrap()), to_value(object));
    let json = convert(to_value(object), there, &versions).unwrap();
    prop_assert_eq!(&json, &to_value(&other));
    prop_assert_eq!(convert(json, back, &versions).unwrap(), to_value(object));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn cluster_v1beta2_to_v1beta1_and_back_is_the_same(cluster in cluster()) {
        there_and_back(&cluster, |c| cluster_to_v1beta1(c, &versions), cluster_from_v1beta1, API_VERSION, CLUSTER_API_VERSION)?;
    }

    #[test]
    fn cluster_v1beta1_to_v1beta2_and_back_is_the_same(cluster in v1beta1_cluster()) {
        there_and_back(&cluster, cluster_from_v1beta1, |c| cluster_to_v1beta1(c, &versions), CLUSTER_API_VERSION, API_VERSION)?;
    }

    #[test]
    fn machine_pool_v1beta2_to_v1beta1_and_back_is_the_same(pool in machine_pool()) {
        there_and_back(&pool, |p| machine_pool_to_v1beta1(p, &versions), machine_pool_from_v1beta1, API_VERSION, CLUSTER_API_VERSION)?;
    }

    #[test]
    fn machine_pool_v1beta1_to_v1beta2_and_back_is_the_same(pool in v1beta1_machine_pool()) {
        there_and_back(&pool, machine_pool_from_v1beta1, |p| machine_pool_to_v1beta1(p, &versions), CLUSTER_API_VERSION, API_VERSION)?;
    }

    /// What a v1beta1 client changes wins over the kept v1beta2 values.
    #[test]
    fn v1beta1_edits_win_over_kept_data(pool in machine_pool(), bootstrap in any::<bool>(), infrastructure in any::<bool>()) {
        let mut old = machine_pool_to_v1beta1(&pool, &versions).unwrap();
        let status = old.status.get_or_insert_with(Default::default);
        status.bootstrap_ready = bootstrap;
        status.infrastructure_ready = infrastructure;
        status.ready_replicas = Some(7);
        old.spec.template.spec.node_deletion_timeout = Some(Duration::from_seconds(42));
        let new = machine_pool_from_v1beta1(&old).unwrap();
        let init = new.status.as_ref().and_then(|s| s.initialization.clone()).unwrap_or_default();
        prop_assert_eq!(init.bootstrap_data_secret_created == Some(true), bootstrap);
        prop_assert_eq!(init.infrastructure_provisioned == Some(true), infrastructure);
        let deprecated = new.status.and_then(|s| s.deprecated).and_then(|d| d.v1beta1);
        prop_assert_eq!(deprecated.and_then(|v| v.ready_replicas), Some(7));
        prop_assert_eq!(new.spec.template.spec.deletion.and_then(|d| d.node_deletion_timeout_seconds), Some(42));
    }
}
