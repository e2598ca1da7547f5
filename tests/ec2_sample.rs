//! examples/aws-ec2.yaml as a user applies it, on moto (signatures
//! checked) instead of EC2: the steps examples/README gives before it (the
//! providers' ConfigMap, the AWS keys as Secret capwasm-system/aws, the
//! team's kubeconfig), providers.yaml, then the sample with only where EC2
//! is changed (its host, and plain HTTP) — and the pool Running with an
//! instance and a Node each, the Cluster's network made, the host having
//! signed every request with the Secret's keys. The operator reads
//! credentials from capwasm-system only, as deploy/ runs it.

use anyhow::{Context as _, Result, ensure};
use capwasm::api::MachinePool;
use kube::api::Api;
use testenv::ec2::{AMI, tagged};
use testenv::ec2_kubelet::Ec2Kubelets;
use testenv::flows::{create, wait_for_pool};
use testenv::moto::Moto;
use testenv::samples::{self, apply, secret};
use testenv::{Stack, TestEnv};

/// Where the samples put the operator, its ConfigMap and the AWS keys.
const OPERATOR_NAMESPACE: &str = "capwasm-system";
const TEAM: &str = "team-a";
/// EC2's endpoint, as the sample names it.
const EC2_HOST: &str = "ec2.us-east-1.amazonaws.com";
/// Where the sample's Cluster says its API server is.
const API_SERVER: &str = "api.ec2-demo.team-a.example:6443";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_ec2_sample_applied_as_its_readme_says_runs_its_pool_on_moto() -> Result<()> {
    let env = TestEnv::shared().await?;
    let _operator = Stack::of_with(env, |settings| {
        settings.credentials_namespace = Some(OPERATOR_NAMESPACE.into());
    })
    .await?;
    let client = env.management().client()?;
    let workload = env.workload().context("a workload server")?;

    // examples/README's steps before the samples.
    for namespace in [OPERATOR_NAMESPACE, TEAM] {
        testenv::flows::namespace(&client, namespace).await?;
    }
    samples::components_config_map(
        &client,
        (OPERATOR_NAMESPACE, "providers"),
        &["kubeadm_bootstrap.wasm", "sim_infrastructure.wasm"],
    )
    .await?;
    samples::components_config_map(&client, (OPERATOR_NAMESPACE, "aws-ec2"), &["aws_ec2.wasm"])
        .await?;
    let moto = Moto::start().await?;
    let kubelets = Ec2Kubelets::start(&moto, "us-east-1", workload.client()?)?;
    kubelets
        .endpoints
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(format!("{TEAM}/ec2-demo"), API_SERVER.into());
    let keys = [
        ("AWS_ACCESS_KEY_ID", moto.access_key_id.as_str()),
        ("AWS_SECRET_ACCESS_KEY", moto.secret_access_key.as_str()),
    ];
    create(&client, &secret(OPERATOR_NAMESPACE, "aws", &keys)).await?;
    create(&client, &workload.kubeconfig_secret(TEAM, "ec2-demo")?).await?;

    apply(&client, &samples::read("providers.yaml")?).await?;
    let sample = samples::read("aws-ec2.yaml")?;
    for (named, what) in [
        (
            format!("https://{EC2_HOST}"),
            "the endpoint of both configs",
        ),
        (format!("\"{EC2_HOST}\""), "the module's host"),
        ("plainHttp: false".to_owned(), "TLS to EC2"),
        (format!("ami: {AMI}"), "an image moto ships"),
    ] {
        ensure!(sample.contains(&named), "the sample names {what}: {named}");
    }
    let on_moto = sample
        .replace(
            &format!("https://{EC2_HOST}"),
            &format!("http://{}", moto.authority),
        )
        .replace(EC2_HOST, &moto.authority)
        .replace("plainHttp: false", "plainHttp: true");
    apply(&client, &on_moto).await?;

    let pools: Api<MachinePool> = Api::namespaced(client.clone(), TEAM);
    let running = wait_for_pool(&pools, "ec2-workers", "Running", 3).await;
    let ids = &running.spec.provider_id_list;
    assert!(
        ids.iter().all(|id| id.starts_with("aws:///us-east-1")),
        "{ids:?}"
    );
    assert_eq!(
        tagged(&moto, &format!("{TEAM}/ec2-demo"))?,
        [3, 1, 2, 1],
        "three instances, one VPC, a subnet per zone, one security group"
    );
    Ok(())
}
