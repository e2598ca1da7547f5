//! What every status capwasm writes has: conditions, an observed generation,
//! and for Clusters, MachinePools and ProviderModules a phase.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde::Serialize;

use super::cluster::ClusterStatus;
use super::machine::MachineStatus;
use super::machinepool::MachinePoolStatus;
use super::platform::PlatformClusterStatus;
use super::provider::{
    WasmBootstrapConfigStatus, WasmClusterStatus, WasmControlPlaneStatus, WasmMachinePoolStatus,
};
use super::providermodule::ProviderModuleStatus;
use super::{
    Cluster, Machine, MachinePool, PlatformCluster, ProviderModule, WasmBootstrapConfig,
    WasmCluster, WasmControlPlane, WasmMachinePool,
};

/// The most a status the host fills with what a provider returned may
/// weigh as JSON: a third of etcd's default request limit (1.5 MiB), so
/// that the object's spec and metadata always fit beside it. A provider
/// result that would pass it is refused (`InvalidProviderResult`), and
/// the status keeps what it had.
pub const MAX_STATUS_BYTES: usize = 512 << 10;

/// `value`'s size as JSON, if it is over [`MAX_STATUS_BYTES`] (counted,
/// not written out).
pub fn oversized<S: Serialize + ?Sized>(value: &S) -> Option<usize> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // A type whose serialisation fails weighs what it wrote until then.
    let _ = serde_json::to_writer(&mut count, value);
    (count.0 > MAX_STATUS_BYTES).then_some(count.0)
}

/// A status a controller computes and writes in one apply.
pub trait ObjectStatus: Clone + Default + PartialEq + Serialize + Send + Sync + 'static {
    /// Its conditions.
    fn conditions(&self) -> &[Condition];
    /// Its conditions, to change.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
    /// Records the generation reconciled without error.
    fn set_observed_generation(&mut self, generation: Option<i64>);
    /// The phase, where the kind has one.
    fn phase(&self) -> Option<&str> {
        None
    }
}

/// An object with such a status.
pub trait HasStatus: kube::Resource {
    /// Its status type.
    type Status: ObjectStatus;
    /// Its status, if it has one yet.
    fn status(&self) -> Option<&Self::Status>;
}

macro_rules! object_status {
    ($($kind:ty => $status:ty, conditions: $($conditions:ident).+, generation: $($generation:ident).+, phase: $phase:expr;)*) => {$(
        impl ObjectStatus for $status {
            fn conditions(&self) -> &[Condition] {
                &self.$($conditions).+
            }
            fn conditions_mut(&mut self) -> &mut Vec<Condition> {
                &mut self.$($conditions).+
            }
            fn set_observed_generation(&mut self, generation: Option<i64>) {
                self.$($generation).+ = generation;
            }
            fn phase(&self) -> Option<&str> {
                let phase: fn(&Self) -> Option<&str> = $phase;
                phase(self)
            }
        }

        impl HasStatus for $kind {
            type Status = $status;
            fn status(&self) -> Option<&$status> {
                self.status.as_ref()
            }
        }
    )*};
}

object_status! {
    Cluster => ClusterStatus, conditions: conditions, generation: observed_generation,
        phase: |s| s.phase.as_deref();
    MachinePool => MachinePoolStatus, conditions: conditions, generation: observed_generation,
        phase: |s| s.phase.as_deref();
    Machine => MachineStatus, conditions: conditions, generation: observed_generation,
        phase: |s| s.phase.as_deref();
    ProviderModule => ProviderModuleStatus, conditions: conditions, generation: observed_generation,
        phase: |s| s.phase.as_deref();
    WasmBootstrapConfig => WasmBootstrapConfigStatus, conditions: common.conditions,
        generation: common.observed_generation, phase: |_| None;
    WasmMachinePool => WasmMachinePoolStatus, conditions: common.conditions,
        generation: common.observed_generation, phase: |_| None;
    WasmCluster => WasmClusterStatus, conditions: common.conditions,
        generation: common.observed_generation, phase: |_| None;
    WasmControlPlane => WasmControlPlaneStatus, conditions: common.conditions,
        generation: common.observed_generation, phase: |_| None;
    PlatformCluster => PlatformClusterStatus, conditions: conditions,
        generation: observed_generation, phase: |s| s.phase.as_deref();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_oversized_only_past_the_bound_and_says_its_size() {
        let just = "x".repeat(MAX_STATUS_BYTES - 2);
        assert_eq!(
            oversized(&just),
            None,
            "its quotes make it exactly the bound"
        );
        let over = "x".repeat(MAX_STATUS_BYTES - 1);
        assert_eq!(oversized(&over), Some(MAX_STATUS_BYTES + 1));
    }
}
