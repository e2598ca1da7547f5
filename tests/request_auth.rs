//! Credentials that never enter the guest, through the operator: a
//! ProviderModule whose requestAuth has the host sign its provider's
//! requests to moto (the AWS emulator, signatures checked) with keys from
//! its credentials Secret. The provider is the hostile credential-dump
//! guest, which sends on everything it is given.

use capwasm::api::providermodule::World;
use capwasm::api::{ProviderModule, WasmCluster};
use capwasm::testing::guest_path;
use capwasm::testing::objects::{self, ClusterBuilder, ProviderModuleBuilder};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::flows::{Scenario, condition, create, credentials_secret, wait_for};
use testenv::moto::{Moto, signed_capabilities};

/// Waits until WasmCluster `name`'s Ready condition has `reason`; its message.
async fn ready_reason(api: &Api<WasmCluster>, name: &str, reason: &str) -> String {
    let found = wait_for(api, name, &format!("Ready has reason {reason}"), |c| {
        c.and_then(|c| c.status.as_ref())
            .and_then(|s| condition(&s.common.conditions, "Ready"))
            .is_some_and(|(_, r, _)| r == reason)
    })
    .await
    .unwrap();
    condition(&found.status.unwrap().common.conditions, "Ready")
        .unwrap()
        .2
}

/// Makes the operator look at WasmCluster `name` again now (credentials
/// Secrets are polled, not watched).
async fn nudge(api: &Api<WasmCluster>, name: &str, n: u32) {
    let patch =
        json!({ "metadata": { "annotations": { "test.capwasm.dev/nudge": n.to_string() } } });
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

/// The credential-dump guest as module `name`, reaching `moto` with
/// requests the host signs with the keys of Secret `secret`.
fn dump_module(name: &str, secret: &str, moto: &Moto) -> ProviderModule {
    let mut module = ProviderModuleBuilder::file(
        name,
        World::Infrastructure,
        &guest_path("hostile_credential_dump.wasm").to_string_lossy(),
    )
    .build();
    module.spec.capabilities = Some(signed_capabilities(&moto.authority, secret));
    module
}

#[tokio::test]
async fn the_host_signs_for_a_provider_that_never_holds_the_keys() {
    let moto = Moto::start().await.expect("moto (tests/moto/install.sh)");
    let Scenario {
        client, ns, apis, ..
    } = Scenario::new("auth").await;
    let module_name = format!("{ns}-dump");
    let secret_name = format!("{ns}-aws");
    let module = dump_module(&module_name, &secret_name, &moto);
    // First without the secret key: named, and nothing is called.
    credentials_secret(
        &client,
        &secret_name,
        &[("AWS_ACCESS_KEY_ID", &moto.access_key_id)],
    )
    .await;
    let modules: Api<ProviderModule> = Api::all(client.clone());
    modules
        .create(&PostParams::default(), &module)
        .await
        .unwrap();
    let found = wait_for(&modules, &module_name, "CredentialsReady is False", |m| {
        m.and_then(|m| m.status.as_ref())
            .and_then(|s| condition(&s.conditions, "CredentialsReady"))
            .is_some_and(|(status, _, _)| status == "False")
    })
    .await
    .unwrap();
    let (_, reason, message) =
        condition(&found.status.unwrap().conditions, "CredentialsReady").unwrap();
    assert_eq!(reason, "CredentialsKeyMissing");
    assert!(
        message.contains("\"AWS_SECRET_ACCESS_KEY\"") && message.contains(&moto.authority),
        "{message}"
    );
    assert!(!message.contains(&moto.access_key_id), "{message}");

    let config = json!({ "requests": [{
        "url": format!("http://{}/", moto.authority),
        "body": "Action=DescribeVpcs&Version=2016-11-15",
    }] });
    create(
        &client,
        &objects::wasm_cluster(&ns, "c1", &module_name, config),
    )
    .await
    .unwrap();
    create(
        &client,
        &ClusterBuilder::new(&ns, "c1")
            .endpoint("127.0.0.1", 6443)
            .build(),
    )
    .await
    .unwrap();
    let message = ready_reason(&apis.infra_clusters, "c1", "CredentialsKeyMissing").await;
    assert!(message.contains("AWS_SECRET_ACCESS_KEY"), "{message}");

    // The right keys: moto accepts the host's signature, and the guest,
    // which sent on all it was given, reports the answer.
    credentials_secret(
        &client,
        &secret_name,
        &[
            ("AWS_ACCESS_KEY_ID", &moto.access_key_id),
            ("AWS_SECRET_ACCESS_KEY", &moto.secret_access_key),
        ],
    )
    .await;
    nudge(&apis.infra_clusters, "c1", 1).await;
    let message = ready_reason(&apis.infra_clusters, "c1", "ProviderFailed").await;
    assert!(
        message.contains("AllAnswered") && message.contains(" 200;"),
        "{message}"
    );
    assert!(!message.contains(&moto.secret_access_key), "{message}");

    // A wrong secret: the condition names the module and the host, not the key.
    let wrong = "not-the-secret-access-key";
    credentials_secret(
        &client,
        &secret_name,
        &[
            ("AWS_ACCESS_KEY_ID", &moto.access_key_id),
            ("AWS_SECRET_ACCESS_KEY", wrong),
        ],
    )
    .await;
    nudge(&apis.infra_clusters, "c1", 2).await;
    let message = ready_reason(&apis.infra_clusters, "c1", "CredentialsRejected").await;
    assert!(
        message.contains(&module_name)
            && message.contains(&moto.authority)
            && message.contains("401"),
        "{message}"
    );
    assert!(!message.contains(wrong), "{message}");
}
