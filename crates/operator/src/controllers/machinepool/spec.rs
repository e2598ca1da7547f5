//! The spec phase: records what the bootstrap and infrastructure phases
//! copied (`dataSecretName`, `providerIDList`) in one apply of every spec
//! field this controller owns (an apply drops what its manager omits).

use serde_json::json;

use crate::api::MachinePool;
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::reconciler::Scope;

pub async fn run(scope: &mut Scope<MachinePool>, ctx: &Context) -> Result<Outcome, Error> {
    let current = &scope.object.spec;
    let secret_changed = scope.found.data_secret_name.as_ref().is_some_and(|name| {
        current.template.spec.bootstrap.data_secret_name.as_ref() != Some(name)
    });
    if !secret_changed && scope.found.provider_id_list.is_none() {
        return Ok(Outcome::Continue);
    }
    let mut spec = json!({ "providerIDList": scope.provider_ids() });
    // Only with a configRef is dataSecretName ours; otherwise the user's.
    if current.template.spec.bootstrap.config_ref.is_some()
        && let Some(name) = scope.found.data_secret_name.as_ref().or(current
            .template
            .spec
            .bootstrap
            .data_secret_name
            .as_ref())
    {
        spec["template"] = json!({ "spec": { "bootstrap": { "dataSecretName": name } } });
    }
    scope.apply(ctx, "spec", json!({ "spec": spec })).await?;
    Ok(Outcome::Continue)
}
