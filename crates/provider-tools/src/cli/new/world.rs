//! What a world's project holds in every language: its request fixtures and
//! the capabilities its ProviderModule asks for.

use super::WorldArg;
use super::files::File;

/// The request fixtures the project starts with: the examples of its
/// world, those with an `"expect"` held by `conformance --fixtures`.
pub(super) fn fixtures(world: WorldArg) -> Vec<File> {
    macro_rules! fixture {
        ($name:literal) => {
            File::new(
                concat!("fixtures/", $name),
                include_str!(concat!("../../../../../examples/requests/", $name)),
            )
        };
    }
    match world {
        WorldArg::Bootstrap => vec![
            fixture!("kubeadm-generate-join.json"),
            fixture!("kubeadm-generate-no-endpoint.json"),
            fixture!("kubeadm-generate-invalid-token.json"),
            fixture!("kubeadm-generate-bad-version.json"),
        ],
        WorldArg::Infrastructure => vec![
            fixture!("sim-reconcile-pool.json"),
            fixture!("sim-reconcile-pool-no-bootstrap.json"),
            fixture!("sim-delete-pool.json"),
            fixture!("sim-reconcile-cluster.json"),
            fixture!("sim-provider-id.json"),
            fixture!("sim-owns.json"),
        ],
        WorldArg::Platform => vec![
            fixture!("sim-platform-render.json"),
            fixture!("sim-platform-render-bad-version.json"),
            fixture!("sim-platform-status.json"),
            fixture!("sim-platform-status-upgrading.json"),
            fixture!("sim-platform-validate-one-minor.json"),
            fixture!("sim-platform-validate-two-minors.json"),
        ],
    }
}

/// The ProviderModule's capabilities for the world's starting point.
pub(super) fn capabilities(world: WorldArg) -> &'static str {
    match world {
        WorldArg::Bootstrap => "",
        WorldArg::Infrastructure => {
            "  capabilities:\n    providerIDPrefix: \"sim://\"   # the providerIDs its instances carry\n    allowedHosts: [\"sim-cloud.example:8081\"]   # the only hosts it may reach\n"
        }
        WorldArg::Platform => {
            "  capabilities:\n    # the kinds its renders may make (\"\" is the core group)\n    allowedKinds:\n    - { group: cluster.x-k8s.io, kind: Cluster }\n    - { group: cluster.x-k8s.io, kind: MachinePool }\n    - { group: infrastructure.cluster.x-k8s.io, kind: WasmCluster }\n    - { group: infrastructure.cluster.x-k8s.io, kind: WasmMachinePool }\n    - { group: bootstrap.cluster.x-k8s.io, kind: WasmBootstrapConfig }\n    - { group: \"\", kind: Secret }\n"
        }
    }
}
