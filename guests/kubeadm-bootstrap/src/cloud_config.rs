//! Renders the cloud-config that writes a kubeadm configuration and runs
//! `kubeadm join` or `kubeadm init`, the way Cluster API's kubeadm
//! bootstrap provider lays it out.

use alloc::borrow::Cow;
use alloc::collections::BTreeMap;

use capwasm_provider_sdk::prelude::*;
use capwasm_provider_sdk::types::{ClusterInfo, ProviderError};

use crate::config::{Config, Mode};
use crate::yaml::{self, Node};

const JOIN_CONFIG_PATH: &str = "/run/kubeadm/kubeadm-join-config.yaml";
const INIT_CONFIG_PATH: &str = "/run/kubeadm/kubeadm.yaml";
/// Written when kubeadm succeeded, as CAPI's kubeadm provider does, so
/// tooling can tell a finished bootstrap from a failed one.
const SENTINEL: &str =
    "mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete";
/// How long to wait for the control-plane endpoint before asking again.
const ENDPOINT_RETRY_SECONDS: u32 = 30;

/// The kubeadm config API the cluster's kubeadm understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KubeadmApi {
    /// kubeadm before 1.31; kubeletExtraArgs is a map.
    V1beta3,
    /// kubeadm 1.31 and later; kubeletExtraArgs is a list of name/value.
    V1beta4,
}

impl KubeadmApi {
    fn version(self) -> &'static str {
        match self {
            Self::V1beta3 => "kubeadm.k8s.io/v1beta3",
            Self::V1beta4 => "kubeadm.k8s.io/v1beta4",
        }
    }

    /// v1beta4 unless the cluster is known to run a Kubernetes older than
    /// 1.31.
    fn for_version(kubernetes_version: Option<&str>) -> Result<Self, ProviderError> {
        let Some(version) = kubernetes_version else {
            return Ok(Self::V1beta4);
        };
        let (major, minor) = parse_minor(version).ok_or_else(|| {
            ProviderError::terminal(
                "InvalidKubernetesVersion",
                format!("the cluster's Kubernetes version {version:?} is not of the form v1.31.2"),
            )
        })?;
        Ok(if (major, minor) < (1, 31) {
            Self::V1beta3
        } else {
            Self::V1beta4
        })
    }
}

/// `v1.31.2` or `1.31.2` (suffixes such as `-rc.1` allowed) → (1, 31).
fn parse_minor(version: &str) -> Option<(u32, u32)> {
    let version = version.strip_prefix('v').unwrap_or(version);
    let mut parts = version.splitn(3, '.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = parts.next()?;
    let digits = patch.split(['-', '+']).next()?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some((major, minor))
}

/// The `#cloud-config` document for `config` in `cluster`.
pub fn render(config: &Config, cluster: &ClusterInfo) -> Result<String, ProviderError> {
    let endpoint = cluster.control_plane_endpoint.as_ref().ok_or_else(|| {
        ProviderError::retry_after(
            ENDPOINT_RETRY_SECONDS,
            format!(
                "the control-plane endpoint of cluster {}/{} is not known yet; kubeadm {} needs it",
                cluster.namespace,
                cluster.name,
                config.mode.as_str()
            ),
        )
    })?;
    let api = KubeadmApi::for_version(cluster.kubernetes_version.as_deref())?;
    let authority = endpoint.authority();
    let (path, kubeadm_config, command) = match config.mode {
        Mode::Join => (
            JOIN_CONFIG_PATH,
            join_configuration(config, &authority, api),
            kubeadm_command("join", JOIN_CONFIG_PATH),
        ),
        Mode::Init => (
            INIT_CONFIG_PATH,
            init_configuration(config, cluster, &authority, api),
            kubeadm_command("init", INIT_CONFIG_PATH),
        ),
    };
    let runcmd = config
        .pre_kubeadm_commands
        .iter()
        .map(String::as_str)
        .chain([command.as_str()])
        .chain(config.post_kubeadm_commands.iter().map(String::as_str));
    let document = Node::map([
        (
            "write_files",
            Node::List(vec![Node::map([
                ("path", Node::str(path)),
                ("owner", Node::str("root:root")),
                ("permissions", Node::str("0640")),
                ("content", kubeadm_config),
            ])]),
        ),
        ("runcmd", Node::strs(runcmd)),
    ]);
    // A join cloud-config is about 1 KiB: one allocation, no regrowth.
    let mut out = String::with_capacity(2048);
    out.push_str("#cloud-config\n");
    yaml::write(&mut out, &document);
    Ok(out)
}

/// `kubeadm <verb> --config <path> && <sentinel>`.
fn kubeadm_command(verb: &str, path: &str) -> String {
    let mut command = String::with_capacity(32 + path.len() + SENTINEL.len());
    for part in ["kubeadm ", verb, " --config ", path, " && ", SENTINEL] {
        command.push_str(part);
    }
    command
}

fn join_configuration<'a>(config: &'a Config, authority: &'a str, api: KubeadmApi) -> Node<'a> {
    let discovery = Node::map([(
        "bootstrapToken",
        Node::map([
            ("apiServerEndpoint", Node::str(authority)),
            ("token", Node::str(&config.token)),
            ("caCertHashes", Node::strs(&config.ca_cert_hashes)),
        ]),
    )]);
    // Room for nodeRegistration, so adding it does not reallocate.
    let mut document = Vec::with_capacity(4);
    document.extend([
        ("apiVersion", Node::str(api.version())),
        ("kind", Node::str("JoinConfiguration")),
        ("discovery", discovery),
    ]);
    document.extend(node_registration(config, api));
    Node::Documents(vec![Node::map(document)])
}

fn init_configuration<'a>(
    config: &'a Config,
    cluster: &'a ClusterInfo,
    authority: &'a str,
    api: KubeadmApi,
) -> Node<'a> {
    // Room for nodeRegistration, as above.
    let mut init = Vec::with_capacity(4);
    init.extend([
        ("apiVersion", Node::str(api.version())),
        ("kind", Node::str("InitConfiguration")),
        (
            "bootstrapTokens",
            Node::List(vec![Node::map([("token", Node::str(&config.token))])]),
        ),
    ]);
    init.extend(node_registration(config, api));
    let mut cluster_configuration = vec![
        ("apiVersion", Node::str(api.version())),
        ("kind", Node::str("ClusterConfiguration")),
        ("clusterName", Node::str(&cluster.name)),
        ("controlPlaneEndpoint", Node::str(authority)),
    ];
    if let Some(version) = &cluster.kubernetes_version {
        cluster_configuration.push(("kubernetesVersion", Node::str(version)));
    }
    Node::Documents(vec![Node::map(init), Node::map(cluster_configuration)])
}

/// `nodeRegistration`, when there are kubelet arguments to pass.
fn node_registration(config: &Config, api: KubeadmApi) -> Option<(&'static str, Node<'_>)> {
    let mut args: BTreeMap<&str, Cow<str>> = config
        .kubelet_extra_args
        .iter()
        .map(|(k, v)| (k.as_str(), Cow::Borrowed(v.as_str())))
        .collect();
    if !config.node_labels.is_empty() {
        let mut labels = String::new();
        for (k, v) in &config.node_labels {
            if !labels.is_empty() {
                labels.push(',');
            }
            labels.push_str(k);
            labels.push('=');
            labels.push_str(v);
        }
        args.insert("node-labels", Cow::Owned(labels));
    }
    if args.is_empty() {
        return None;
    }
    let args = match api {
        KubeadmApi::V1beta3 => Node::map(args.into_iter().map(|(k, v)| (k, Node::Str(v)))),
        KubeadmApi::V1beta4 => Node::List(
            args.into_iter()
                .map(|(name, value)| {
                    Node::map([("name", Node::str(name)), ("value", Node::Str(value))])
                })
                .collect(),
        ),
    };
    Some(("nodeRegistration", Node::map([("kubeletExtraArgs", args)])))
}

#[cfg(test)]
mod tests {
    use capwasm_provider_sdk::types::ApiEndpoint;

    use super::*;
    use crate::config;

    const TOKEN: &str = "abcdef.0123456789abcdef";
    const HASH: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn cluster(endpoint: Option<(&str, u16)>, version: Option<&str>) -> ClusterInfo {
        ClusterInfo {
            name: "demo".to_owned(),
            namespace: "default".to_owned(),
            control_plane_endpoint: endpoint.map(|(host, port)| ApiEndpoint {
                host: host.to_owned(),
                port,
            }),
            kubernetes_version: version.map(str::to_owned),
        }
    }

    fn join(extra: &str) -> Config {
        config::parse(&format!(
            r#"{{"mode": "join", "token": "{TOKEN}", "caCertHashes": ["{HASH}"]{extra}}}"#
        ))
        .expect("valid config")
    }

    #[test]
    fn render_join_writes_config_and_runs_kubeadm_join() {
        let out = render(
            &join(r#", "preKubeadmCommands": ["echo pre"], "nodeLabels": {"pool": "a", "tier": "web"}"#),
            &cluster(Some(("10.0.0.1", 6443)), Some("v1.31.2")),
        )
        .expect("rendered");
        let expected = format!(
            "#cloud-config
write_files:
  - path: \"/run/kubeadm/kubeadm-join-config.yaml\"
    owner: \"root:root\"
    permissions: \"0640\"
    content: |
      apiVersion: \"kubeadm.k8s.io/v1beta4\"
      kind: \"JoinConfiguration\"
      discovery:
        bootstrapToken:
          apiServerEndpoint: \"10.0.0.1:6443\"
          token: \"{TOKEN}\"
          caCertHashes:
            - \"{HASH}\"
      nodeRegistration:
        kubeletExtraArgs:
          - name: \"node-labels\"
            value: \"pool=a,tier=web\"
runcmd:
  - \"echo pre\"
  - \"kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml && {SENTINEL}\"
"
        );
        assert_eq!(out, expected);
    }

    #[test]
    fn render_uses_v1beta3_map_args_before_kubernetes_1_31() {
        let out = render(
            &join(r#", "kubeletExtraArgs": {"max-pods": "50"}"#),
            &cluster(Some(("api.example", 443)), Some("v1.30.4")),
        )
        .expect("rendered");
        assert!(out.contains("apiVersion: \"kubeadm.k8s.io/v1beta3\""));
        assert!(out.contains("kubeletExtraArgs:\n          max-pods: \"50\"\n"));
    }

    #[test]
    fn render_init_writes_cluster_configuration() {
        let config =
            config::parse(&format!(r#"{{"mode": "init", "token": "{TOKEN}"}}"#)).expect("valid");
        let out =
            render(&config, &cluster(Some(("fd00::1", 6443)), Some("v1.32.0"))).expect("rendered");
        assert!(
            out.contains("kind: \"InitConfiguration\"\n      bootstrapTokens:\n        - token: ")
        );
        assert!(out.contains("      ---\n      apiVersion: \"kubeadm.k8s.io/v1beta4\"\n      kind: \"ClusterConfiguration\"\n"));
        assert!(out.contains("controlPlaneEndpoint: \"[fd00::1]:6443\""));
        assert!(out.contains("kubernetesVersion: \"v1.32.0\""));
        assert!(out.contains("\"kubeadm init --config /run/kubeadm/kubeadm.yaml && "));
    }

    #[test]
    fn render_asks_to_retry_until_endpoint_is_known() {
        let result = render(&join(""), &cluster(None, None));
        assert!(
            matches!(result, Err(ProviderError::RetryAfter(e)) if e.message.contains("default/demo"))
        );
    }

    #[test]
    fn render_rejects_unparsable_kubernetes_version() {
        let result = render(&join(""), &cluster(Some(("h", 1)), Some("latest")));
        assert!(
            matches!(result, Err(ProviderError::Terminal(e)) if e.reason == "InvalidKubernetesVersion")
        );
    }

    #[test]
    fn render_keeps_hostile_commands_inside_their_scalar() {
        let out = render(
            &join(r#", "postKubeadmCommands": ["echo \"x\"\nruncmd: [evil]"]"#),
            &cluster(Some(("h", 6443)), None),
        )
        .expect("rendered");
        assert!(out.ends_with("  - \"echo \\\"x\\\"\\nruncmd: [evil]\"\n"));
        assert_eq!(out.matches("\nruncmd:").count(), 1);
    }

    #[test]
    fn parse_minor_accepts_prereleases() {
        assert_eq!(parse_minor("v1.31.0-rc.1"), Some((1, 31)));
        assert_eq!(parse_minor("1.29.3"), Some((1, 29)));
        assert_eq!(parse_minor("v1.31"), None);
    }
}
