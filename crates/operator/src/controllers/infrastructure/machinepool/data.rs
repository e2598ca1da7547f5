//! The pool's bootstrap data: read from the Secret its MachinePool names,
//! and whether it may boot new machines yet.

use std::time::Duration;

use kube::ResourceExt as _;

use crate::api::{MachinePool, Reason};
use crate::controllers::bootstrap::fit_for;
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::{Outcome, Wait};
use crate::wasm::types::{BootstrapData, BootstrapFormat};

/// How soon to look again at a pool waiting for bootstrap data with a
/// fresh token.
const TOKEN_RENEWAL_POLL: Duration = Duration::from_secs(2);

/// Why the pool cannot have new instances yet, if it cannot: no bootstrap
/// data, or data whose token is not yet confirmed for `replicas`.
pub(super) async fn waiting_for_data(
    ctx: &Context,
    machine_pool: &MachinePool,
    replicas: u32,
    had: usize,
    has_data: bool,
) -> Result<Option<Outcome>, Error> {
    if !has_data && replicas > 0 {
        return Ok(Some(Outcome::Wait(Wait::on_change(
            Reason::WaitingForBootstrapData,
            format!(
                "MachinePool {:?} has no bootstrap data Secret yet",
                machine_pool.name_any()
            ),
        ))));
    }
    // New machines must not boot with a host token that expired or was
    // deleted: the bootstrap controller confirms (or renews) it as the pool
    // scales. It writes a Secret this controller does not watch, hence the
    // timer.
    let adding = usize::try_from(replicas).unwrap_or(0) > had;
    if adding && !data_fit(ctx, machine_pool).await? {
        return Ok(Some(Outcome::Wait(Wait::after(
            Reason::WaitingForBootstrapData,
            format!(
                "waiting for the bootstrap controller to confirm or renew the bootstrap token in MachinePool {:?}'s bootstrap data for {replicas} replicas",
                machine_pool.name_any()
            ),
            TOKEN_RENEWAL_POLL,
        ))));
    }
    Ok(None)
}

/// The Secret of the pool's bootstrap data, once its MachinePool names one.
fn data_secret_name(machine_pool: &MachinePool) -> Option<&str> {
    machine_pool
        .spec
        .template
        .spec
        .bootstrap
        .data_secret_name
        .as_deref()
}

/// Whether the pool's bootstrap data may boot new machines ([`fit_for`]).
async fn data_fit(ctx: &Context, machine_pool: &MachinePool) -> Result<bool, Error> {
    let Some(name) = data_secret_name(machine_pool) else {
        return Ok(true);
    };
    let namespace = machine_pool.namespace().unwrap_or_default();
    let meta = ctx.secret_metadata(&namespace, name).await?;
    Ok(meta.is_none_or(|m| {
        fit_for(
            m.annotations(),
            machine_pool.desired_replicas(),
            k8s_openapi::jiff::Timestamp::now(),
        )
    }))
}

/// The pool's bootstrap data, from the Secret its MachinePool names.
pub(super) async fn bootstrap_data(
    ctx: &Context,
    machine_pool: &MachinePool,
) -> Result<Option<BootstrapData>, Error> {
    let Some(name) = data_secret_name(machine_pool) else {
        return Ok(None);
    };
    let namespace = machine_pool.namespace().unwrap_or_default();
    let data = ctx.secret_data(&namespace, name).await?;
    let Some(value) = data.as_ref().and_then(|d| d.get("value")) else {
        return Ok(None);
    };
    let format = match data
        .as_ref()
        .and_then(|d| d.get("format"))
        .map(|f| f.0.as_slice())
    {
        Some(b"ignition") => BootstrapFormat::Ignition,
        Some(b"shell-script") => BootstrapFormat::ShellScript,
        _ => BootstrapFormat::CloudConfig,
    };
    Ok(Some(BootstrapData {
        format,
        value: value.0.clone(),
    }))
}
