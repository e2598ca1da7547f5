//! The provider worlds of the WIT package: which exports make a component
//! one, and the name a ProviderModule gives it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The provider worlds of the WIT package `capwasm:provider`.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub enum World {
    /// `bootstrap-provider`: serves WasmBootstrapConfigs.
    #[default]
    Bootstrap,
    /// `infrastructure-provider`: serves WasmMachinePools and WasmClusters.
    Infrastructure,
}

impl World {
    /// The WIT world name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bootstrap => "bootstrap-provider",
            Self::Infrastructure => "infrastructure-provider",
        }
    }

    /// The interface whose export identifies the world.
    pub(crate) fn marker(self) -> &'static str {
        match self {
            Self::Bootstrap => "capwasm:provider/bootstrap",
            Self::Infrastructure => "capwasm:provider/machine-pools",
        }
    }
}

impl std::fmt::Display for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
