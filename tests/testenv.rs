//! The harness against itself: real etcd and kube-apiserver processes doing
//! what capwasm's controllers will need of them, and leaving nothing behind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, Node, NodeCondition, NodeSpec, NodeStatus, Secret,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams,
    PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use kube::{Api, Client, Config};
use serde_json::json;
use testenv::{Options, TestEnv, install_crds, is_running};

const WAIT: Duration = Duration::from_secs(30);

fn fixture_crds() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/crds")
}

fn widget_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "testenv.capwasm.dev",
        "v1",
        "Widget",
    ))
}

fn workload(env: &TestEnv) -> Result<&testenv::ApiServer> {
    env.workload()
        .context("the shared environment starts a workload server")
}

/// Polls (a process table has no watch) until no listed process runs.
async fn wait_until_stopped(pids: &[u32]) -> Result<()> {
    let deadline = tokio::time::Instant::now() + WAIT;
    while pids.iter().any(|pid| is_running(*pid)) {
        if tokio::time::Instant::now() > deadline {
            let left: Vec<_> = pids.iter().filter(|p| is_running(**p)).collect();
            bail!("processes still running after {WAIT:?}: {left:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Every live process whose command line mentions `dir`.
fn processes_using(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
                && is_running(*pid)
        })
        .collect()
}

#[tokio::test]
async fn namespace_secret_crd_and_custom_object_round_trip() -> Result<()> {
    let env = TestEnv::shared().await?;
    let server = env.management();
    let client = server.client()?;
    let ns = server.create_namespace("roundtrip").await?;

    let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("credentials".into()),
            ..ObjectMeta::default()
        },
        string_data: Some(BTreeMap::from([("token".into(), "s3cr3t".into())])),
        ..Secret::default()
    };
    secrets.create(&PostParams::default(), &secret).await?;
    let stored = secrets.get("credentials").await?;
    let token = stored
        .data
        .as_ref()
        .and_then(|d| d.get("token"))
        .context("token key")?;
    assert_eq!(token.0, b"s3cr3t");

    let installed = install_crds(&client, &[fixture_crds()]).await?;
    assert_eq!(installed, ["widgets.testenv.capwasm.dev"]);

    let widgets = Api::<DynamicObject>::namespaced_with(client, &ns, &widget_resource());
    let mut widget = DynamicObject::new("w1", &widget_resource());
    widget.data = json!({ "spec": { "size": 3 } });
    widgets.create(&PostParams::default(), &widget).await?;
    assert_eq!(widgets.get("w1").await?.data["spec"]["size"], 3);

    // The CRD's schema is enforced by the real server.
    let mut invalid = DynamicObject::new("w2", &widget_resource());
    invalid.data = json!({ "spec": { "size": 0 } });
    let err = widgets
        .create(&PostParams::default(), &invalid)
        .await
        .expect_err("size 0 is below the minimum");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn watch_sees_create_update_and_delete() -> Result<()> {
    let env = TestEnv::shared().await?;
    let server = env.management();
    let ns = server.create_namespace("watch").await?;
    let api = Api::<ConfigMap>::namespaced(server.client()?, &ns);

    // Each write waits for the watch to show the one before it, the first
    // for its initial list: every event is then seen, in order, whatever
    // the timing.
    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut next = async || -> Result<watcher::Event<ConfigMap>> {
        loop {
            let event = tokio::time::timeout(WAIT, events.try_next())
                .await
                .context("the watch went quiet")??
                .context("the watch ended")?;
            if !matches!(event, watcher::Event::Init) {
                return Ok(event);
            }
        }
    };
    let value = |cm: &ConfigMap| cm.data.as_ref().and_then(|d| d.get("v")).cloned();
    assert!(
        matches!(next().await?, watcher::Event::InitDone),
        "a new namespace lists nothing"
    );

    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("watched".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("v".into(), "1".into())])),
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &cm).await?;
    match next().await? {
        watcher::Event::Apply(cm) => assert_eq!(value(&cm).as_deref(), Some("1")),
        other => bail!("expected the create, saw {other:?}"),
    }

    let patch = json!({ "data": { "v": "2" } });
    api.patch("watched", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    match next().await? {
        watcher::Event::Apply(cm) => assert_eq!(value(&cm).as_deref(), Some("2")),
        other => bail!("expected the update, saw {other:?}"),
    }

    api.delete("watched", &DeleteParams::default()).await?;
    match next().await? {
        watcher::Event::Delete(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("watched")),
        other => bail!("expected the deletion, saw {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn node_with_provider_id_can_be_marked_ready_in_workload_cluster() -> Result<()> {
    let env = TestEnv::shared().await?;
    let nodes = Api::<Node>::all(workload(env)?.client()?);
    let node = Node {
        metadata: ObjectMeta {
            name: Some("pool-a-0".into()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some("sim://local-1/i-0001".into()),
            ..NodeSpec::default()
        }),
        ..Node::default()
    };
    nodes.create(&PostParams::default(), &node).await?;

    // What a kubelet does once the machine has joined.
    let status = Node {
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        }),
        ..Node::default()
    };
    let patch = serde_json::to_value(&status)?;
    nodes
        .patch_status("pool-a-0", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;

    let stored = nodes.get("pool-a-0").await?;
    assert_eq!(
        stored.spec.and_then(|s| s.provider_id).as_deref(),
        Some("sim://local-1/i-0001")
    );
    let ready = stored.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(
        ready
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        "{ready:?}"
    );
    Ok(())
}

#[tokio::test]
async fn management_and_workload_servers_are_isolated() -> Result<()> {
    let env = TestEnv::shared().await?;
    let (management, workload) = (env.management(), workload(env)?);
    assert_ne!(management.url(), workload.url());

    let ns = management.create_namespace("isolated").await?;
    let in_workload = Api::<Namespace>::all(workload.client()?)
        .get_opt(&ns)
        .await?;
    assert!(
        in_workload.is_none(),
        "namespace {ns} leaked into the workload server"
    );

    let node = Node {
        metadata: ObjectMeta {
            name: Some("only-in-workload".into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    };
    Api::<Node>::all(workload.client()?)
        .create(&PostParams::default(), &node)
        .await?;
    assert!(
        Api::<Node>::all(management.client()?)
            .get_opt("only-in-workload")
            .await?
            .is_none()
    );

    // Cluster-scoped API definitions are separate too.
    install_crds(&workload.client()?, &[fixture_crds()]).await?;
    let defined = Api::<CustomResourceDefinition>::all(workload.client()?);
    assert!(
        defined
            .get_opt("widgets.testenv.capwasm.dev")
            .await?
            .is_some()
    );
    let other = env.start_workload().await?;
    let undefined = Api::<CustomResourceDefinition>::all(other.client()?);
    assert!(
        undefined
            .get_opt("widgets.testenv.capwasm.dev")
            .await?
            .is_none()
    );
    Ok(())
}

#[tokio::test]
async fn kubeconfig_secret_reaches_the_workload_server() -> Result<()> {
    let env = TestEnv::shared().await?;
    let (management, workload) = (env.management(), workload(env)?);
    let ns = management.create_namespace("kubeconfig").await?;
    let secrets = Api::<Secret>::namespaced(management.client()?, &ns);
    secrets
        .create(
            &PostParams::default(),
            &workload.kubeconfig_secret(&ns, "demo")?,
        )
        .await?;

    // What a controller does: read `<cluster>-kubeconfig`, key `value`, and connect.
    let secret = secrets.get("demo-kubeconfig").await?;
    assert_eq!(secret.type_.as_deref(), Some("cluster.x-k8s.io/secret"));
    let value = secret
        .data
        .as_ref()
        .and_then(|d| d.get("value"))
        .context("value key")?;
    let kubeconfig = Kubeconfig::from_yaml(std::str::from_utf8(&value.0)?)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;
    let marker = workload.create_namespace("marker").await?;
    assert!(
        Api::<Namespace>::all(client)
            .get_opt(&marker)
            .await?
            .is_some()
    );
    Ok(())
}

#[tokio::test]
async fn extra_workload_server_stops_on_drop_and_leaves_the_rest_running() -> Result<()> {
    let env = TestEnv::shared().await?;
    let extra = env.start_workload().await?;
    let pid = extra.pid();
    assert!(is_running(pid));
    extra.create_namespace("extra").await?;
    drop(extra);
    wait_until_stopped(&[pid]).await?;
    // The shared etcd and the other servers are untouched.
    assert!(is_running(env.management().etcd_pid()));
    env.management().create_namespace("still-serving").await?;
    Ok(())
}

#[tokio::test]
async fn dropping_an_environment_stops_its_processes_and_removes_its_directory() -> Result<()> {
    let env = TestEnv::start(Options {
        crds: Vec::new(),
        ..Options::default()
    })
    .await?;
    let (pids, dir) = (env.pids(), env.run_dir());
    assert_eq!(pids.len(), 3, "etcd, management and workload");
    assert!(pids.iter().all(|p| is_running(*p)) && dir.is_dir());
    drop(env);
    wait_until_stopped(&pids).await?;
    assert!(!dir.exists(), "{} was not removed", dir.display());
    Ok(())
}

#[test]
fn a_panicking_test_leaves_no_process() -> Result<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async {
            let env = TestEnv::start(Options {
                workload: false,
                crds: Vec::new(),
                ..Options::default()
            })
            .await
            .expect("environment starts");
            tx.send((env.pids(), env.run_dir()))
                .expect("receiver waits");
            panic!("a test failing while its environment runs");
        })
    })
    .join();
    assert!(outcome.is_err(), "the thread panicked");
    let (pids, dir) = rx.recv()?;
    tokio::runtime::Runtime::new()?.block_on(wait_until_stopped(&pids))?;
    assert!(!dir.exists(), "{} was not removed", dir.display());
    Ok(())
}

/// Run by `a_killed_test_process_leaves_no_process` in a child process; does
/// nothing when run on its own.
#[tokio::test]
#[ignore = "a probe started by another test"]
async fn probe_holds_an_environment_until_killed() -> Result<()> {
    let Some(pid_file) = std::env::var_os("CAPWASM_TESTENV_PROBE_PIDFILE") else {
        return Ok(());
    };
    let env = TestEnv::start(Options {
        workload: false,
        crds: Vec::new(),
        ..Options::default()
    })
    .await?;
    let pids: Vec<String> = env.pids().iter().map(u32::to_string).collect();
    std::fs::write(&pid_file, pids.join(" "))?;
    std::future::pending::<()>().await;
    Ok(())
}

#[tokio::test]
async fn a_killed_test_process_leaves_no_process() -> Result<()> {
    let scratch = tempfile::tempdir()?;
    let pid_file = scratch.path().join("pids");
    let mut probe = tokio::process::Command::new(std::env::current_exe()?)
        .args([
            "probe_holds_an_environment_until_killed",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("CAPWASM_TESTENV_PROBE_PIDFILE", &pid_file)
        // Its test-runner lines would read as this binary's own.
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pids: Vec<u32> = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            if let Ok(text) = std::fs::read_to_string(&pid_file)
                && !text.is_empty()
            {
                return Ok(text
                    .split_whitespace()
                    .map(str::parse)
                    .collect::<Result<Vec<u32>, _>>()?);
            }
            if let Some(status) = probe.try_wait()? {
                bail!("the probe exited early with {status}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .context("the probe did not start its environment")??;
    assert!(pids.iter().all(|p| is_running(*p)));
    // SIGKILL: no destructor runs; only the closed stdin pipes tell the children.
    probe.start_kill()?;
    probe.wait().await?;
    wait_until_stopped(&pids).await
}

#[tokio::test]
async fn a_failed_start_names_the_cause_and_leaves_nothing() -> Result<()> {
    let root = tempfile::tempdir()?;
    let options = Options {
        workload: false,
        crds: Vec::new(),
        run_root: root.path().to_path_buf(),
        ..Options::default()
    };
    let Err(err) = TestEnv::start(Options {
        apiserver_args: vec!["--no-such-flag=1".into()],
        ..options.clone()
    })
    .await
    else {
        bail!("kube-apiserver accepted an unknown flag");
    };
    let message = err.to_string();
    assert!(
        message.contains("kube-apiserver did not become ready"),
        "{message}"
    );
    assert!(
        message.contains("unknown flag: --no-such-flag"),
        "the log tail is included: {message}"
    );

    let Err(err) = TestEnv::start(Options {
        crds: vec![PathBuf::from("/nonexistent/crds")],
        ..options
    })
    .await
    else {
        bail!("a missing CRD path was skipped silently");
    };
    assert!(err.to_string().contains("/nonexistent/crds"), "{err}");

    assert!(
        processes_using(root.path()).is_empty(),
        "processes were left running"
    );
    let left: Vec<_> = std::fs::read_dir(root.path())?
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(
        left.is_empty(),
        "run directories were left behind: {left:?}"
    );
    Ok(())
}

/// The EC2 kubelets register a Ready Node for a running instance whose
/// user data joins its Cluster's API server, none for one whose user data
/// would not, and delete the Node when the instance terminates.
#[tokio::test]
async fn ec2_kubelets_follow_the_running_instances_of_moto() -> Result<()> {
    use testenv::ec2_kubelet::Ec2Kubelets;
    use testenv::moto::Moto;

    const RUN: &str = r##"
import base64, sys, boto3
ec2 = boto3.client("ec2", endpoint_url=sys.argv[1])
image = ec2.describe_images()["Images"][0]["ImageId"]
ids = []
for name, data in (("joins", sys.argv[2]), ("does-not", "#!/bin/sh\necho hello\n")):
    run = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, UserData=data,
        Placement={"AvailabilityZone": "us-east-1a"},
        TagSpecifications=[{"ResourceType": "instance", "Tags": [
            {"Key": "capwasm.dev/cluster", "Value": "ns/c1"}, {"Key": "Name", "Value": name}]}])
    ids.append(run["Instances"][0]["InstanceId"])
print(" ".join(ids))
"##;
    const JOIN: &str = "#cloud-config
write_files:
  - path: /run/kubeadm/kubeadm-join-config.yaml
    content: |
      kind: JoinConfiguration
      discovery:
        bootstrapToken:
          apiServerEndpoint: 10.1.2.3:6443
runcmd:
  - kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml
";
    let env = TestEnv::shared().await?;
    let workload = env.workload().context("a workload server")?.client()?;
    let moto = Moto::start().await?;
    let kubelets = Ec2Kubelets::start(&moto, "us-east-1", workload.clone())?;
    kubelets
        .endpoints
        .lock()
        .unwrap()
        .insert("ns/c1".into(), "10.1.2.3:6443".into());
    let printed = moto.boto3(RUN, &[JOIN])?;
    let ids: Vec<&str> = printed.split_whitespace().collect();
    let [joins, does_not] = ids[..] else {
        bail!("expected two instance ids, got {printed:?}");
    };
    let nodes: Api<Node> = Api::all(workload);
    let node = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Some(node) = nodes.get_opt(joins).await? {
                let ready = node
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                if ready {
                    return anyhow::Ok(node);
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .context("the joining instance's Node is Ready within 30 s")??;
    assert_eq!(
        node.spec.and_then(|s| s.provider_id).as_deref(),
        Some(format!("aws:///us-east-1a/{joins}").as_str())
    );
    assert!(
        nodes.get_opt(does_not).await?.is_none(),
        "user data that cannot join"
    );

    moto.boto3(
        r#"
import sys, boto3
boto3.client("ec2", endpoint_url=sys.argv[1]).terminate_instances(InstanceIds=[sys.argv[2]])
"#,
        &[joins],
    )?;
    tokio::time::timeout(Duration::from_secs(30), async {
        while nodes.get_opt(joins).await?.is_some() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        anyhow::Ok(())
    })
    .await
    .context("the terminated instance's Node is deleted within 30 s")??;
    Ok(())
}
