//! The WasmBootstrapConfig as the frame reconciles it: its owner
//! MachinePool, then data generated once per generation of the config, by a
//! bootstrap-provider component, into a Secret the config owns. No
//! finalizer: the Secret goes with the config (owner reference).

use std::sync::Arc;

use super::{CONTROLLER, data, tokens};
use crate::api::provider::BOOTSTRAP_FIELD_MANAGER;
use crate::api::{Cluster, ConditionType, WasmBootstrapConfig};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::outcome::Outcome;
use crate::controllers::provider::{self, Found};
use crate::controllers::reconciler::{Phase, Reconciler, Scope};
use crate::controllers::shard::{Role, Shard};
use crate::phases;

impl Reconciler for WasmBootstrapConfig {
    type Found = Found;
    const CONTROLLER: &'static str = CONTROLLER;
    const FIELD_MANAGER: &'static str = BOOTSTRAP_FIELD_MANAGER;
    const FINALIZER: Option<&'static str> = None;
    const SUMMARY: ConditionType = ConditionType::Ready;
    const PHASES: &'static [Phase<Self>] = phases![WasmBootstrapConfig:
        provider::owner_pool::<WasmBootstrapConfig>,
        data::existing,
        tokens::maintain,
        provider::prepare::<WasmBootstrapConfig>,
        data::generate,
    ];
    const DELETE_PHASES: &'static [Phase<Self>] = &[];

    fn role(&self, shard: Shard) -> Role {
        shard.role(self)
    }

    fn cluster(&self, ctx: &Context) -> Result<Option<Arc<Cluster>>, Error> {
        provider::cluster_of_pool_owner(self, ctx)
    }

    fn claimed(&self) -> bool {
        provider::capi_owner(self, "MachinePool").is_some()
    }

    fn summarize(scope: &mut Scope<Self>, _: &Context, results: &[Result<Outcome, Error>]) {
        provider::summarize(scope, results);
    }
}
