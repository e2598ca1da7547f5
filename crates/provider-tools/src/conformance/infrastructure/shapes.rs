//! What a pool's nodes offer before any exists (`node-shapes`): the
//! simulated cloud's instance types, and a type it does not offer refused
//! for good.

use super::{cloud, instant, loopback, requests};
use crate::conformance::{Failure, Subject, ensure_eq, expect_terminal};
use crate::simcloud::instance_types;

/// `describe` answers a type's capacity, architecture and operating system
/// as the cloud describes them (the default type without one), and an
/// instance type the cloud does not offer as the terminal
/// `UnknownInstanceType`.
pub async fn node_shapes_are_the_cloud_s_instance_types_and_an_unknown_one_is_terminal(
    subject: &Subject,
) -> Result<(), Failure> {
    let running = cloud(instant()).await?;
    let provider = subject.load(loopback()).await?;
    let config = |instance_type: Option<&str>| {
        let mut config =
            serde_json::json!({"endpoint": running.endpoint(), "region": super::REGION});
        if let Some(name) = instance_type {
            config["instanceType"] = name.into();
        }
        config.to_string()
    };
    for asked in [Some("gpu"), Some("small-arm"), None] {
        let expected = instance_types::of(asked)
            .ok_or_else(|| Failure::Setup(format!("the cloud offers no {asked:?}")))?;
        let shape = provider
            .describe_nodes(&requests::describe_nodes(&config(asked)))
            .await?;
        let capacity: std::collections::BTreeMap<_, _> = shape.capacity.into_iter().collect();
        ensure_eq!(capacity, expected.capacity, "capacity of {asked:?}");
        ensure_eq!(
            (shape.architecture, shape.operating_system),
            (expected.architecture, expected.operating_system),
            "architecture and operating system of {asked:?}"
        );
    }
    let unknown = provider
        .describe_nodes(&requests::describe_nodes(&config(Some("m5.huge"))))
        .await;
    expect_terminal(unknown, "UnknownInstanceType")
}
