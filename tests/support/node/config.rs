//! The node's configuration files: containerd's, the CNI bridge's, the
//! kubelet's and kube-proxy's, each set for this kind of machine.

use std::path::Path;

use super::network::{NODE_ADDRESS, POD_SUBNET};
use super::sweep::STATE;

/// containerd's socket.
pub fn containerd_socket() -> String {
    format!("{STATE}/containerd/containerd.sock")
}

/// The sandbox image, built by `tests/node/build.sh` (nothing is pulled).
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:capwasm";

/// cgroupfs (cgroup v1, no systemd here); `restrict_oom_score_adj` because
/// root here lacks CAP_SYS_RESOURCE, without which every sandbox fails
/// with "can't get final child's PID from pipe: EOF"; the Pods' network
/// namespaces under the state directory, so that a sweep finds them.
pub fn containerd(root: &Path, cni_dir: &Path) -> String {
    let state = format!("{STATE}/containerd");
    let socket = containerd_socket();
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
"#,
        root = root.display(),
        cni = cni_dir.display(),
    )
}

/// A bridge with host-local addresses; traffic from Pods to anything
/// outside their subnet (the host end, Services) is masqueraded.
pub fn cni_bridge() -> String {
    format!(
        r#"{{
  "cniVersion": "1.0.0",
  "name": "capwasm-node",
  "plugins": [
    {{
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {{
        "type": "host-local",
        "ranges": [[{{"subnet": "{POD_SUBNET}"}}]],
        "routes": [{{"dst": "0.0.0.0/0"}}]
      }}
    }},
    {{"type": "portmap", "capabilities": {{"portMappings": true}}}}
  ]
}}
"#
    )
}

/// cgroup v1 is what this machine mounts (1.36 refuses it unless told);
/// eviction and image garbage collection off, since the disk of a machine
/// that builds Rust runs close to the default thresholds and the images
/// here cannot be pulled again.
pub fn kubelet(client_ca: &Path, pod_logs: &Path) -> String {
    let socket = containerd_socket();
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://{socket}
address: {NODE_ADDRESS}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: {client_ca}
authorization:
  mode: AlwaysAllow
podLogsDir: {pod_logs}
failSwapOn: false
resolvConf: ""
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusUpdateFrequency: 5s
"#,
        client_ca = client_ca.display(),
        pod_logs = pod_logs.display(),
    )
}

/// iptables mode; conntrack left as the machine has it (its limits are not
/// the namespace's to set).
pub fn kube_proxy(kubeconfig: &Path) -> String {
    format!(
        r"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: {kubeconfig}
clusterCIDR: {POD_SUBNET}
hostnameOverride: {name}
bindAddress: {NODE_ADDRESS}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
",
        kubeconfig = kubeconfig.display(),
        name = super::NODE_NAME,
    )
}
