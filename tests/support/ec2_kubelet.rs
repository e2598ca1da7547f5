//! The kubelets of the EC2 instances in moto, where nothing boots. A lister
//! (boto3 in moto's virtualenv, signing as any AWS client does) prints the
//! running instances, with their user data, twice a second; for each whose
//! user data is a kubeadm cloud-config that would join the API server its
//! Cluster expects, a Ready Node with the instance's providerID
//! (`aws:///<zone>/<id>`) is registered in the workload cluster, and the
//! Nodes of instances no longer running are deleted. Instances whose user
//! data would not join never get a Node, as on a real cloud.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use crate::moto::Moto;
use crate::{Error, Result};

const FIELD_MANAGER: &str = "capwasm-ec2-kubelet";

/// Prints a JSON list of the running instances per pass; user data is
/// fetched once per instance.
const LISTER: &str = r#"
import json, os, sys, time
import boto3
ec2 = boto3.client("ec2", endpoint_url=sys.argv[1], region_name=sys.argv[2])
user_data = {}
while True:
    running = []
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "instance-state-name", "Values": ["running"]}])
    for page in pages:
        for reservation in page["Reservations"]:
            for i in reservation["Instances"]:
                id = i["InstanceId"]
                if id not in user_data:
                    answer = ec2.describe_instance_attribute(InstanceId=id, Attribute="userData")
                    user_data[id] = answer.get("UserData", {}).get("Value", "")
                tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
                running.append({"id": id, "zone": i["Placement"]["AvailabilityZone"],
                                "ip": i.get("PrivateIpAddress"), "userData": user_data[id],
                                "cluster": tags.get("capwasm.dev/cluster")})
    print(json.dumps(running), flush=True)
    time.sleep(0.5)
"#;

/// One running instance as the lister reports it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Running {
    id: String,
    zone: String,
    ip: Option<String>,
    user_data: String,
    cluster: Option<String>,
}

/// The API server each Cluster's machines must join, by `<namespace>/<name>`.
pub type Endpoints = Arc<Mutex<BTreeMap<String, String>>>;

/// Running kubelets; stopped when dropped.
pub struct Ec2Kubelets {
    _lister: Child,
    task: JoinHandle<()>,
    /// Where each Cluster's machines must join: set before creating one.
    pub endpoints: Endpoints,
}

impl Drop for Ec2Kubelets {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Ec2Kubelets {
    /// Starts the lister against `moto` in `region`, registering Nodes with `workload`.
    pub fn start(moto: &Moto, region: &str, workload: kube::Client) -> Result<Self> {
        let python = moto.bin.join("python");
        let mut lister = Command::new(&python)
            .args(["-c", LISTER, &format!("http://{}", moto.authority), region])
            .env("AWS_ACCESS_KEY_ID", &moto.access_key_id)
            .env("AWS_SECRET_ACCESS_KEY", &moto.secret_access_key)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| Error::Spawn {
                name: "ec2 kubelet lister",
                binary: python.clone(),
                source,
            })?;
        let stdout = lister.stdout.take().ok_or_else(|| Error::Spawn {
            name: "ec2 kubelet lister",
            binary: python,
            source: std::io::Error::other("no stdout"),
        })?;
        let endpoints = Endpoints::default();
        let task = tokio::spawn(keep_in_step(
            BufReader::new(stdout),
            Api::all(workload),
            endpoints.clone(),
        ));
        Ok(Self {
            _lister: lister,
            task,
            endpoints,
        })
    }
}

async fn keep_in_step(
    stdout: BufReader<tokio::process::ChildStdout>,
    nodes: Api<Node>,
    endpoints: Endpoints,
) {
    let mut lines = stdout.lines();
    let mut registered = BTreeSet::new();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(running) = serde_json::from_str::<Vec<Running>>(&line) else {
            continue;
        };
        let expected = endpoints
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let joining: Vec<&Running> = running
            .iter()
            .filter(|r| {
                r.cluster
                    .as_ref()
                    .and_then(|c| expected.get(c))
                    .is_some_and(|endpoint| joins(&r.user_data, endpoint))
            })
            .collect();
        let desired: BTreeSet<String> = joining.iter().map(|r| r.id.clone()).collect();
        for gone in registered.difference(&desired).cloned().collect::<Vec<_>>() {
            let deleted = nodes.delete(&gone, &DeleteParams::default()).await;
            if deleted.is_ok()
                || matches!(deleted, Err(kube::Error::Api(ref s)) if s.is_not_found())
            {
                registered.remove(&gone);
            }
        }
        for instance in joining {
            if !registered.contains(&instance.id) && register(&nodes, instance).await {
                registered.insert(instance.id.clone());
            }
        }
    }
}

/// Whether `user_data` (base64) is a kubeadm cloud-config joining `endpoint`.
fn joins(user_data: &str, endpoint: &str) -> bool {
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(user_data.trim()) else {
        return false;
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return false;
    };
    if !text.starts_with("#cloud-config") {
        return false;
    }
    let Ok(config) = serde_yaml_ng::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    let runs_join = config["runcmd"].as_array().is_some_and(|cmds| {
        cmds.iter()
            .any(|c| c.as_str().is_some_and(|c| c.contains("kubeadm join")))
    });
    let joins_endpoint = config["write_files"].as_array().is_some_and(|files| {
        files.iter().any(|file| {
            file["content"]
                .as_str()
                .and_then(|c| serde_yaml_ng::from_str::<serde_json::Value>(c).ok())
                .is_some_and(|join| {
                    join["kind"] == "JoinConfiguration"
                        && join["discovery"]["bootstrapToken"]["apiServerEndpoint"] == endpoint
                })
        })
    });
    runs_join && joins_endpoint
}

/// Registers `instance`'s Node and marks it Ready; false to try again.
async fn register(nodes: &Api<Node>, instance: &Running) -> bool {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let node = Node {
        metadata: ObjectMeta {
            name: Some(instance.id.clone()),
            labels: Some(BTreeMap::from([(
                "topology.kubernetes.io/zone".to_owned(),
                instance.zone.clone(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("aws:///{}/{}", instance.zone, instance.id)),
            ..NodeSpec::default()
        }),
        status: None,
    };
    let now = Time(Timestamp::now());
    let status = Node {
        metadata: ObjectMeta {
            name: Some(instance.id.clone()),
            ..ObjectMeta::default()
        },
        spec: None,
        status: Some(NodeStatus {
            addresses: Some(
                instance
                    .ip
                    .iter()
                    .map(|ip| NodeAddress {
                        type_: "InternalIP".into(),
                        address: ip.clone(),
                    })
                    .collect(),
            ),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                message: Some("kubelet is posting ready status".into()),
                last_heartbeat_time: Some(now.clone()),
                last_transition_time: Some(now),
            }]),
            ..NodeStatus::default()
        }),
    };
    nodes
        .patch(&instance.id, &params, &Patch::Apply(&node))
        .await
        .is_ok()
        && nodes
            .patch_status(&instance.id, &params, &Patch::Apply(&status))
            .await
            .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(text: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    const JOIN: &str = "#cloud-config
write_files:
  - path: \"/run/kubeadm/kubeadm-join-config.yaml\"
    content: |
      apiVersion: \"kubeadm.k8s.io/v1beta4\"
      kind: \"JoinConfiguration\"
      discovery:
        bootstrapToken:
          apiServerEndpoint: \"10.0.0.1:6443\"
runcmd:
  - \"kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml\"
";

    #[test]
    fn only_a_kubeadm_join_of_the_expected_endpoint_joins() {
        assert!(joins(&encoded(JOIN), "10.0.0.1:6443"));
        assert!(!joins(&encoded(JOIN), "10.0.0.2:6443"), "another cluster");
        assert!(!joins(
            &encoded(&JOIN.replace("kubeadm join", "echo")),
            "10.0.0.1:6443"
        ));
        assert!(!joins(
            &encoded(&JOIN.replacen("#cloud-config", "#!/bin/sh", 1)),
            "10.0.0.1:6443"
        ));
        assert!(!joins("not base64!", "10.0.0.1:6443"));
        assert!(!joins("", "10.0.0.1:6443"));
    }
}
