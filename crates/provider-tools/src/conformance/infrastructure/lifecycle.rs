//! Scaling a pool up and down, repeats and lost records, and deletion.

use std::time::Duration;

use super::{
    POOL, REGION, cloud, cloud_ids, config, ids, instant, lingering, loopback, pool_on_cloud,
    requests, token, wait_for_pool,
};
use crate::conformance::{Failure, Subject, ensure, ensure_eq};
use crate::simcloud::{InstanceState, Settings};
use crate::wasm::types::{self, DeleteOutcome};

/// Scale up to 3: three instances, not ready while they boot, ready once they run.
pub async fn scale_up_creates_sim_instances_and_pool_is_ready_once_they_run(
    subject: &Subject,
) -> Result<(), Failure> {
    let (running, provider, mut request) = pool_on_cloud(
        subject,
        Settings {
            boot_delay: Duration::from_millis(100),
            ..instant()
        },
        3,
    )
    .await?;

    let state = provider.reconcile(&request).await?;
    ensure_eq!(state.instances.len(), 3, "instances reported");
    ensure!(
        !state.ready,
        "the pool is reported ready while its instances boot"
    );
    ensure!(
        state.requeue_after_seconds.is_some(),
        "no requeue asked while instances boot"
    );
    for instance in &state.instances {
        ensure_eq!(
            instance.provider_id,
            format!("sim://{REGION}/{}", instance.id),
            "providerID of {}",
            instance.id
        );
    }
    ensure_eq!(
        ids(&state),
        cloud_ids(running.cloud()),
        "instances reported vs in the cloud"
    );
    let tokens: Vec<_> = state
        .instances
        .iter()
        .map(|i| i.request_token.clone())
        .collect();
    ensure_eq!(
        tokens,
        [0, 1, 2].map(|n| Some(token(n))).to_vec(),
        "request tokens, by ordinal"
    );

    wait_for_pool(running.cloud(), "3 running instances", |pool| {
        pool.iter()
            .all(|r| r.instance.state == InstanceState::Running)
    })
    .await?;
    request.instances = state.instances;
    let state = provider.reconcile(&request).await?;
    ensure!(state.ready, "the pool is not ready once its instances run");
    ensure_eq!(state.requeue_after_seconds, None, "requeue once ready");
    ensure!(
        state
            .instances
            .iter()
            .all(|i| matches!(i.state, types::InstanceState::Running)),
        "instances not all reported running: {:?}",
        state.instances
    );
    ensure_eq!(running.cloud().total_creations(), 3, "instances created");
    Ok(())
}

/// Reconciling again with what was recorded creates nothing.
pub async fn reconcile_creates_nothing_when_repeated_with_the_recorded_instances(
    subject: &Subject,
) -> Result<(), Failure> {
    let (running, provider, mut request) = pool_on_cloud(subject, instant(), 3).await?;
    let first = provider.reconcile(&request).await?;

    request.instances = first.instances.clone();
    let second = provider.reconcile(&request).await?;
    request.instances = second.instances.clone();
    let third = provider.reconcile(&request).await?;

    ensure_eq!(ids(&second), ids(&first), "instances of the second call");
    ensure_eq!(ids(&third), ids(&first), "instances of the third call");
    ensure!(third.ready, "the pool is not ready");
    ensure_eq!(running.cloud().total_creations(), 3, "instances created");
    Ok(())
}

/// The host lost the records of a call (it crashed): calling again, and
/// scaling up, creates no duplicate; the request tokens find the instances.
pub async fn reconcile_creates_no_duplicate_when_a_crash_lost_the_recorded_instances(
    subject: &Subject,
) -> Result<(), Failure> {
    let (running, provider, mut request) = pool_on_cloud(subject, instant(), 3).await?;
    let first = provider.reconcile(&request).await?;

    let again = provider.reconcile(&request).await?;
    ensure_eq!(ids(&again), ids(&first), "instances after the lost records");
    ensure_eq!(running.cloud().total_creations(), 3, "instances created");

    // Scaling up without the records: ordinals 0-2 are asked for again with
    // their old tokens, and the cloud answers with the existing instances.
    request.replicas = 5;
    let grown = provider.reconcile(&request).await?;
    ensure!(
        ids(&grown).is_superset(&ids(&first)),
        "the first instances are not among the 5: {:?}",
        grown.instances
    );
    ensure_eq!(running.cloud().total_creations(), 5, "instances created");
    for n in 0..5 {
        ensure_eq!(
            running.cloud().creations(REGION, &token(n)),
            1,
            "creations with token {}",
            token(n)
        );
    }
    let tokens: Vec<_> = grown
        .instances
        .iter()
        .map(|i| i.request_token.clone())
        .collect();
    ensure_eq!(
        tokens,
        (0..5).map(|n| Some(token(n))).collect::<Vec<_>>(),
        "request tokens, by ordinal"
    );
    Ok(())
}

/// Scale 3 → 1 terminates ordinals 1 and 2 and keeps 0.
pub async fn scale_down_terminates_the_highest_ordinals(subject: &Subject) -> Result<(), Failure> {
    // Terminating instances stay listed for the whole scenario.
    let (running, provider, mut request) = pool_on_cloud(subject, lingering(), 3).await?;
    let three = provider.reconcile(&request).await?;

    request.instances = three.instances;
    request.replicas = 1;
    let one = provider.reconcile(&request).await?;

    let by_token = |n: u32| {
        running
            .cloud()
            .instances_of(POOL)
            .into_iter()
            .find(|r| r.request_token == token(n))
            .map(|r| r.instance.state)
    };
    ensure_eq!(by_token(0), Some(InstanceState::Running), "ordinal 0");
    ensure_eq!(by_token(1), Some(InstanceState::Terminating), "ordinal 1");
    ensure_eq!(by_token(2), Some(InstanceState::Terminating), "ordinal 2");
    ensure!(
        one.ready,
        "the pool is not ready though its one instance runs"
    );
    ensure!(
        one.requeue_after_seconds.is_some(),
        "no requeue asked while two instances terminate"
    );
    ensure_eq!(running.cloud().total_creations(), 3, "instances created");
    Ok(())
}

/// Removing the instance of ordinal 1 from 3 terminates that one alone,
/// whatever the replicas were; repeating it terminates nothing more; the
/// next reconcile for 3 creates one with a new ordinal, the removed one
/// still listed.
pub async fn remove_terminates_exactly_the_instances_asked_for(
    subject: &Subject,
) -> Result<(), Failure> {
    let (running, provider, mut request) = pool_on_cloud(subject, lingering(), 3).await?;
    let three = provider.reconcile(&request).await?;
    let chosen = three
        .instances
        .iter()
        .find(|i| i.request_token.as_deref() == Some(token(1).as_str()))
        .map(|i| i.id.clone())
        .ok_or_else(|| {
            Failure::Expected(format!("no instance of ordinal 1: {:?}", three.instances))
        })?;
    let config = config(&running.endpoint());
    let remove = requests::remove_instances(&config, vec![chosen.clone()], three.instances.clone());
    let two = provider.remove(&remove).await?;

    let states = || {
        running
            .cloud()
            .instances_of(POOL)
            .into_iter()
            .map(|r| (r.instance.id, r.instance.state))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    for instance in &three.instances {
        let expected = if instance.id == chosen {
            InstanceState::Terminating
        } else {
            InstanceState::Running
        };
        ensure_eq!(
            states().get(&instance.id).copied(),
            Some(expected),
            "instance {}",
            instance.id
        );
    }
    let reported = two.instances.iter().find(|i| i.id == chosen);
    ensure!(
        reported.is_none_or(|i| matches!(i.state, types::InstanceState::Terminating)),
        "the removed instance is reported as {reported:?}"
    );
    ensure!(
        two.ready,
        "the pool of its two running instances is not ready"
    );

    let remove = requests::remove_instances(&config, vec![chosen.clone()], two.instances.clone());
    let again = provider.remove(&remove).await?;
    ensure_eq!(ids(&again), ids(&two), "instances after a repeated remove");
    ensure_eq!(running.cloud().total_creations(), 3, "instances created");

    request.instances = again.instances;
    let refilled = provider.reconcile(&request).await?;
    let active = refilled
        .instances
        .iter()
        .filter(|i| !matches!(i.state, types::InstanceState::Terminating))
        .count();
    ensure_eq!(active, 3, "instances up after reconciling for 3 again");
    ensure_eq!(running.cloud().total_creations(), 4, "instances created");
    ensure_eq!(
        states().get(&chosen).copied(),
        Some(InstanceState::Terminating),
        "the removed instance"
    );
    Ok(())
}

/// Deleting a pool is in progress while the cloud has any of its
/// instances, and done once it has none.
pub async fn delete_is_done_once_the_cloud_has_no_instance_of_the_pool(
    subject: &Subject,
) -> Result<(), Failure> {
    let running = cloud(Settings {
        termination_delay: Duration::from_millis(100),
        ..instant()
    })
    .await?;
    let provider = subject.load(loopback()).await?;
    let config = config(&running.endpoint());
    let mut request = requests::delete_pool(&config);
    request.instances = provider
        .reconcile(&requests::reconcile_pool(&config, 3))
        .await?
        .instances;

    let first = provider.delete(&request).await?;
    ensure!(
        matches!(first, DeleteOutcome::InProgress(s) if s > 0),
        "expected in progress with a delay while instances terminate, got {first:?}"
    );
    wait_for_pool(running.cloud(), "no instance of the pool", |pool| {
        pool.is_empty()
    })
    .await?;
    let second = provider.delete(&request).await?;

    ensure!(
        matches!(second, DeleteOutcome::Done),
        "expected done once no instance is left, got {second:?}"
    );
    ensure!(
        running.cloud().instances_of(POOL).is_empty(),
        "instances of the pool are left"
    );
    Ok(())
}
