//! A kind the frame reconciles (its phases, its summary) and what one
//! reconcile of it works on: the object, its Cluster, the status being
//! computed and what the phases found, with the writes a phase makes
//! through it.

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use serde::Serialize;

use crate::api::conditions::{self, Desired};
use crate::api::{Cluster, ConditionType, HasStatus, ObjectStatus, Reason};
use crate::controllers::context::Context;
use crate::controllers::error::Error;
use crate::controllers::finalizer::Required;
use crate::controllers::outcome::{Outcome, Wait};
use crate::controllers::shard::{Role, Shard};
use crate::controllers::write::{self, Writable};

/// One phase: `async fn(&mut Scope<K>, &Context) -> Result<Outcome, Error>`,
/// boxed by [`phases!`](crate::phases).
pub type Phase<K> =
    for<'a> fn(&'a mut Scope<K>, &'a Context) -> BoxFuture<'a, Result<Outcome, Error>>;

/// A kind the frame reconciles.
pub trait Reconciler: HasStatus + Writable + Serialize {
    /// What the phases find, for the phases after them and the summary.
    type Found: Default + Send + Sync;
    /// The controller's name in metrics and logs.
    const CONTROLLER: &'static str;
    /// The field manager of its status.
    const FIELD_MANAGER: &'static str;
    /// Its finalizer, if deleting it needs work.
    const FINALIZER: Option<&'static str>;
    /// The condition summing the object up.
    const SUMMARY: ConditionType;
    /// The phases while it lives.
    const PHASES: &'static [Phase<Self>];
    /// The phases while it is deleted: done when all of them continue.
    const DELETE_PHASES: &'static [Phase<Self>];
    /// Whether a new phase is worth an Event. Upstream publishes one for a
    /// Cluster's, none for a MachinePool's (a phase per step of every pool
    /// of a fleet is many writes that say what the status says).
    const PHASE_EVENTS: bool = false;

    /// The Cluster the object belongs to, from the cache. An error stops
    /// the reconcile before the finalizer (upstream: no finalizer without a
    /// Cluster); only the summary condition is written.
    fn cluster(&self, ctx: &Context) -> Result<Option<Arc<Cluster>>, Error> {
        let _ = ctx;
        Ok(None)
    }

    /// What shard `shard` does with the object: [`Shard::role`] of its
    /// Cluster, or [`Shard::role_shared`] for what every shard needs.
    fn role(&self, shard: Shard) -> Role;

    /// Whether the object's owner has claimed it. A provider object waits
    /// for its Cluster or MachinePool to set the owner reference: until then
    /// nothing is written, not even the finalizer, as upstream's providers
    /// wait; the owner's write brings it back.
    fn claimed(&self) -> bool {
        true
    }

    /// Whether the object's own spec pauses it (kinds with `spec.paused`).
    fn spec_paused(&self) -> bool {
        false
    }

    /// Labels and owner references the object must carry before anything
    /// runs; they go with the finalizer.
    fn required(scope: &Scope<Self>) -> Required {
        let _ = scope;
        Required::default()
    }

    /// Derived status (phase, summary conditions) once the phases ran.
    fn summarize(scope: &mut Scope<Self>, ctx: &Context, results: &[Result<Outcome, Error>]);
}

/// Who writes for `K`.
pub(super) fn author<K: Reconciler>() -> write::Author {
    write::Author {
        controller: K::CONTROLLER,
        manager: K::FIELD_MANAGER,
    }
}

/// What one reconcile works on.
pub struct Scope<K: Reconciler> {
    /// The object, as cached when the reconcile began.
    pub object: Arc<K>,
    /// Its Cluster, as cached.
    pub cluster: Option<Arc<Cluster>>,
    /// The status being computed, from the object's.
    pub status: K::Status,
    /// What the phases found.
    pub found: K::Found,
    /// When the reconcile began (for condition transitions).
    pub now: Time,
    /// A phase wrote to another object what brings this one back (an
    /// adoption): its status waits for that reconcile, which sees the
    /// write, and is written once instead of twice.
    pub defer_status: bool,
    /// The generation a phase's write of the object's spec made: the status
    /// computed with it is of that generation.
    pub written_generation: Option<i64>,
    /// Another shard writes the object: the phases run for their effect
    /// on this process, and announce nothing.
    pub read_only: bool,
}

impl<K: Reconciler> Scope<K> {
    pub(crate) fn new(object: Arc<K>, cluster: Option<Arc<Cluster>>) -> Self {
        Self {
            status: object.status().cloned().unwrap_or_default(),
            cluster,
            object,
            found: K::Found::default(),
            now: Time(Timestamp::now()),
            defer_status: false,
            written_generation: None,
            read_only: false,
        }
    }

    /// Whether the object is being deleted.
    pub fn deleting(&self) -> bool {
        self.object.meta().deletion_timestamp.is_some()
    }

    /// Sets a condition.
    pub fn set(&mut self, desired: Desired) {
        conditions::set(
            self.status.conditions_mut(),
            desired,
            self.object.meta().generation,
            &self.now,
        );
    }

    /// Sets `desired`, and waits for a change a watch reports, saying the same.
    pub fn waits(&mut self, desired: Desired) -> Outcome {
        let wait = Wait::on_change(desired.reason, desired.message.clone());
        self.set(desired);
        Outcome::Wait(wait)
    }

    /// Applies `fields` (`{"spec": ...}`, say, for `what` = `spec`) to the
    /// object, as its controller's field manager for that part. The status
    /// this reconcile writes is of the generation the write made: it was
    /// computed from what the write holds, so the reconcile the write
    /// brings finds nothing to change.
    pub async fn apply(
        &mut self,
        ctx: &Context,
        what: &'static str,
        fields: serde_json::Value,
    ) -> Result<(), Error> {
        let generation = write::fields(ctx, author::<K>(), &*self.object, what, fields).await?;
        self.written_generation = generation.or(self.written_generation);
        Ok(())
    }

    /// Sets condition `type_` to fail with `error`'s reason and returns the error.
    pub fn failed(&mut self, type_: ConditionType, error: Error) -> Error {
        self.set(Desired::fails(
            type_,
            error.reason(),
            crate::report::error_chain(&error),
        ));
        error
    }

    /// The object's namespace.
    pub fn namespace(&self) -> String {
        self.object.namespace().unwrap_or_default()
    }

    /// The object as the controller of objects it adopts, blocking their
    /// owner's foreground deletion as upstream's `NewControllerRef` does.
    pub fn controller_reference(&self) -> OwnerReference {
        OwnerReference {
            block_owner_deletion: Some(true),
            ..self.object.controller_owner_ref(&()).unwrap_or_default()
        }
    }

    /// The object, for Events.
    pub fn reference(&self) -> ObjectReference {
        self.object.object_ref(&())
    }

    /// Publishes an Event about the object, unless another shard writes it.
    pub async fn publish(&self, ctx: &Context, reason: Reason, note: impl Into<String>) {
        if !self.read_only {
            ctx.publish(&self.reference(), reason, note).await;
        }
    }
}
