//! The providerIDs a pool's provider reports, checked against what only
//! the host can see.

use kube::ResourceExt as _;

use crate::api::{MachinePool, WasmMachinePool};
use crate::controllers::cache::cluster_key;
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::wasm::LoadedProvider;
use crate::wasm::checks::Violation;
use crate::workload::ClusterKey;

/// The export whose result the host checks.
pub(super) const EXPORT: &str = "machine-pools.reconcile";

/// The providerIDs a pool's provider reported, against what only the host
/// can see: each within the providerIDs its ProviderModule declares
/// (`capabilities.providerIDPrefix`: the provider's own word, its `owns`,
/// is asked too but is not enough), none listed by another pool of the
/// Cluster, and none a Node of the control plane reports, so that a pool
/// never claims another cloud's, another account's, another pool's or the
/// control plane's Nodes.
pub(super) async fn check_provider_ids(
    ctx: &Context,
    pool: &WasmMachinePool,
    machine_pool: &MachinePool,
    provider: &LoadedProvider,
    provider_ids: &[String],
) -> Result<(), Error> {
    let refuse = |rule, id: &String| {
        let violation = Violation {
            rule,
            field: format!("providerID {id:?}"),
        };
        Error::Guest(ctx.runtime.refused(provider, EXPORT, violation))
    };
    let cluster = cluster_key(machine_pool, &machine_pool.spec.cluster_name);
    let others = ctx
        .caches
        .pools_by_cluster
        .get(ctx.caches.pools.store(), &cluster);
    for other in others
        .iter()
        .filter(|p| p.metadata.uid != machine_pool.metadata.uid)
    {
        if let Some(id) = provider_ids
            .iter()
            .find(|id| other.spec.provider_id_list.contains(id))
        {
            return Err(refuse("a providerID another pool of the Cluster lists", id));
        }
    }
    let module = ctx.caches.modules.get(None, &pool.spec.provider);
    let prefix = module
        .as_ref()
        .and_then(|m| m.spec.capabilities.as_ref())
        .and_then(|c| c.provider_id_prefix.as_deref());
    for id in provider_ids {
        match prefix {
            None => {
                return Err(refuse(
                    "a providerID from a module that declares none (capabilities.providerIDPrefix)",
                    id,
                ));
            }
            Some(prefix) if !id.starts_with(prefix) => {
                return Err(refuse(
                    "a providerID outside the module's capabilities.providerIDPrefix",
                    id,
                ));
            }
            Some(_) => {}
        }
    }
    // New ones only: a Node the pool already holds was checked when it came.
    let known = &pool.spec.provider_id_list;
    let new: Vec<&String> = provider_ids
        .iter()
        .filter(|id| !known.contains(id))
        .collect();
    if new.is_empty() {
        return Ok(());
    }
    for id in &new {
        let owned = ctx
            .runtime
            .owns(&pool.spec.provider, id)
            .await
            .map_err(Error::Guest)?;
        if !owned {
            return Err(refuse("a providerID the provider says is not its own", id));
        }
    }
    // Unreachable, the MachinePool's own matching still never takes a
    // control-plane Node; this names the provider that tried.
    let key = ClusterKey::new(
        machine_pool.namespace().unwrap_or_default(),
        machine_pool.spec.cluster_name.clone(),
    );
    if let Ok(nodes) = ctx.workload.nodes(&key).await
        && let Some(id) = new.into_iter().find(|id| nodes.of_control_plane(id))
    {
        return Err(refuse("the providerID of a control-plane Node", id));
    }
    Ok(())
}
