//! The provider worlds of the WIT packages: which exports make a component
//! one, and the name a ProviderModule gives it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The provider worlds: three of the WIT package `capwasm:provider`, one of
/// `capwasm:platform`.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub enum World {
    /// `bootstrap-provider`: serves WasmBootstrapConfigs.
    #[default]
    Bootstrap,
    /// `infrastructure-provider`: serves WasmMachinePools and WasmClusters.
    Infrastructure,
    /// `platform-provider` (`capwasm:platform`): composes PlatformClusters.
    Platform,
    /// `control-plane-provider`: serves WasmControlPlanes.
    ControlPlane,
}

impl World {
    /// The WIT world name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bootstrap => "bootstrap-provider",
            Self::Infrastructure => "infrastructure-provider",
            Self::Platform => "platform-provider",
            Self::ControlPlane => "control-plane-provider",
        }
    }

    /// The interfaces a component of the world may import (any version the
    /// host serves): what the world grants, and what the guest toolchains'
    /// runtimes pull in (Rust's standard library, CPython, SpiderMonkey),
    /// served empty: no files, no environment, no sockets.
    pub fn may_import(self) -> impl Iterator<Item = &'static str> {
        const EVERY_WORLD: &[&str] = &[
            "capwasm:provider/log",
            "capwasm:provider/types",
            "wasi:clocks/monotonic-clock",
            "wasi:clocks/wall-clock",
            "wasi:random/random",
            "wasi:random/insecure",
            "wasi:random/insecure-seed",
            "wasi:io/error",
            "wasi:io/poll",
            "wasi:io/streams",
            "wasi:cli/stdin",
            "wasi:cli/stdout",
            "wasi:cli/stderr",
            "wasi:cli/environment",
            "wasi:cli/exit",
            "wasi:cli/terminal-input",
            "wasi:cli/terminal-output",
            "wasi:cli/terminal-stdin",
            "wasi:cli/terminal-stdout",
            "wasi:cli/terminal-stderr",
            "wasi:filesystem/types",
            "wasi:filesystem/preopens",
            "wasi:sockets/network",
            "wasi:sockets/instance-network",
            "wasi:sockets/ip-name-lookup",
            "wasi:sockets/tcp",
            "wasi:sockets/tcp-create-socket",
            "wasi:sockets/udp",
            "wasi:sockets/udp-create-socket",
        ];
        const HTTP: &[&str] = &["wasi:http/types", "wasi:http/outgoing-handler"];
        const BOOTSTRAP: &[&str] = &["capwasm:provider/bootstrap-tokens"];
        let http = match self {
            Self::Bootstrap => BOOTSTRAP,
            Self::Platform => &[][..],
            Self::Infrastructure | Self::ControlPlane => HTTP,
        };
        EVERY_WORLD.iter().chain(http).copied()
    }

    /// The interface whose export identifies the world.
    pub(crate) fn marker(self) -> &'static str {
        match self {
            Self::Bootstrap => "capwasm:provider/bootstrap",
            Self::Infrastructure => "capwasm:provider/machine-pools",
            Self::Platform => "capwasm:platform/composition",
            Self::ControlPlane => "capwasm:provider/control-planes",
        }
    }

    /// The WIT package (with the version this host implements) the world belongs to.
    pub fn package(self) -> &'static str {
        match self {
            Self::Bootstrap | Self::Infrastructure | Self::ControlPlane => super::WIT_PACKAGE,
            Self::Platform => super::PLATFORM_WIT_PACKAGE,
        }
    }
}

/// An interface name without its version (`capwasm:provider/log@0.1.2` →
/// `capwasm:provider/log`).
pub(crate) fn unversioned(name: &str) -> &str {
    name.split('@').next().unwrap_or(name)
}

impl std::fmt::Display for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
