//! The reconcile frame every controller runs, on a kind of this test's own
//! (`Widget`) whose phases only count their runs: the finalizer comes first
//! and alone, cleanup runs only while deleting, another controller's
//! finalizer survives ours going, a finalizer patch made from a stale read
//! fails instead of overwriting, and the status is written once per
//! reconcile and not at all when unchanged. Each test calls the frame's
//! `reconcile` itself against a real API server; no operator runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use capwasm::api::conditions::Desired;
use capwasm::api::{ConditionType, HasStatus, ObjectStatus, Reason};
use capwasm::controllers::outcome::{Outcome, Wait};
use capwasm::controllers::reconciler::{self, Phase, Reconciler, Scope};
use capwasm::controllers::shard::{Role, Shard};
use capwasm::controllers::{Context, Error, Scoped, Settings};
use capwasm::operator::{Config, Operator};
use capwasm::phases;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client, CustomResource, CustomResourceExt as _, ResourceExt as _};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use testenv::TestEnv;

const FINALIZER: &str = "frame.test.capwasm.dev/widget";
const OTHER: &str = "other.example.com/keep";

/// A kind whose phases count their runs; `cleanupPasses` delete passes wait
/// before cleanup is done.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "frame.test.capwasm.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct WidgetSpec {
    cleanup_passes: u32,
    /// Which test this widget belongs to: its counters.
    counter: usize,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    #[serde(default)]
    conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    observed_generation: Option<i64>,
}

impl ObjectStatus for WidgetStatus {
    fn conditions(&self) -> &[Condition] {
        &self.conditions
    }
    fn conditions_mut(&mut self) -> &mut Vec<Condition> {
        &mut self.conditions
    }
    fn set_observed_generation(&mut self, generation: Option<i64>) {
        self.observed_generation = generation;
    }
}

impl HasStatus for Widget {
    type Status = WidgetStatus;
    fn status(&self) -> Option<&WidgetStatus> {
        self.status.as_ref()
    }
}

impl Scoped for Widget {
    fn api(client: Client, object: &Self) -> Api<Self> {
        Api::namespaced(client, &object.namespace().unwrap_or_default())
    }
}

/// Runs of `apply` and `cleanup`, per test.
static APPLIED: [AtomicU32; 8] = [const { AtomicU32::new(0) }; 8];
static CLEANED: [AtomicU32; 8] = [const { AtomicU32::new(0) }; 8];

async fn apply(scope: &mut Scope<Widget>, _: &Context) -> Result<Outcome, Error> {
    APPLIED[scope.object.spec.counter].fetch_add(1, Ordering::SeqCst);
    scope.set(Desired::holds(
        ConditionType::Ready,
        Reason::Ready,
        "applied",
    ));
    Ok(Outcome::Continue)
}

async fn cleanup(scope: &mut Scope<Widget>, _: &Context) -> Result<Outcome, Error> {
    let runs = CLEANED[scope.object.spec.counter].fetch_add(1, Ordering::SeqCst) + 1;
    if runs <= scope.object.spec.cleanup_passes {
        return Ok(Outcome::Wait(Wait::on_change(
            Reason::WaitingForInfrastructureDeletion,
            "not yet",
        )));
    }
    Ok(Outcome::Continue)
}

impl Reconciler for Widget {
    type Found = ();
    const CONTROLLER: &'static str = "widget";
    const FIELD_MANAGER: &'static str = "capwasm-widget";
    const FINALIZER: Option<&'static str> = Some(FINALIZER);
    const SUMMARY: ConditionType = ConditionType::Ready;
    const PHASES: &'static [Phase<Self>] = phases![Widget: apply];
    const DELETE_PHASES: &'static [Phase<Self>] = phases![Widget: cleanup];

    /// Every shard needs it; shard 0 writes it (as a ProviderModule).
    fn role(&self, shard: Shard) -> Role {
        shard.role_shared()
    }

    fn summarize(_: &mut Scope<Self>, _: &Context, _: &[Result<Outcome, Error>]) {}
}

/// The widgets of a namespace of this test, and a context to reconcile them with.
struct World {
    widgets: Api<Widget>,
    ctx: Arc<Context>,
}

impl World {
    async fn new(prefix: &str) -> Self {
        Self::of_shard(prefix, Shard::ALL).await
    }

    /// A world whose context is that of `shard`.
    async fn of_shard(prefix: &str, shard: Shard) -> Self {
        let env = TestEnv::shared().await.expect("control plane");
        let client = env.management().client().expect("client");
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let crd = Widget::crd();
        crds.patch(
            &crd.name_any(),
            &PatchParams::apply("reconcile-frame-test").force(),
            &Patch::Apply(&crd),
        )
        .await
        .expect("the Widget CRD");
        tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(crds, &crd.name_any(), conditions::is_crd_established()),
        )
        .await
        .expect("established in time")
        .expect("established");
        let ns = env
            .management()
            .create_namespace(prefix)
            .await
            .expect("namespace");
        let config = Config {
            settings: Settings {
                shard,
                ..Settings::default()
            },
            ..Config::default()
        };
        let operator = Operator::new(env.management().config().clone(), config).expect("operator");
        Self {
            widgets: Api::namespaced(client, &ns),
            ctx: operator.context().clone(),
        }
    }

    async fn create(&self, name: &str, spec: WidgetSpec, finalizers: &[&str]) -> Widget {
        let mut widget = Widget::new(name, spec);
        widget.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
        self.widgets
            .create(&PostParams::default(), &widget)
            .await
            .expect("created")
    }

    async fn get(&self, name: &str) -> Option<Widget> {
        self.widgets.get_opt(name).await.expect("read")
    }

    /// One reconcile of the widget as the server has it now.
    async fn reconcile(&self, name: &str) -> Result<(), Error> {
        let widget = self.get(name).await.expect("the widget exists");
        reconciler::reconcile(Arc::new(widget), self.ctx.clone())
            .await
            .map(drop)
    }

    /// Asks for the widget's deletion, then reconciles it once.
    async fn delete_and_reconcile(&self, name: &str) {
        self.widgets
            .delete(name, &DeleteParams::default())
            .await
            .expect("deletion requested");
        self.reconcile(name).await.expect("reconciled");
    }

    fn writes(&self, what: &'static str) -> u64 {
        self.ctx.metrics.writes("widget", what)
    }
}

fn spec(counter: usize, cleanup_passes: u32) -> WidgetSpec {
    WidgetSpec {
        cleanup_passes,
        counter,
    }
}

#[tokio::test]
async fn the_finalizer_is_added_first_and_nothing_else_is_done_in_that_pass() {
    let world = World::new("frame-first").await;
    world.create("w", spec(0, 0), &[]).await;

    world.reconcile("w").await.expect("reconciled");
    let widget = world.get("w").await.expect("exists");
    assert_eq!(widget.finalizers(), [FINALIZER]);
    assert_eq!(APPLIED[0].load(Ordering::SeqCst), 0, "no phase ran");
    assert!(widget.status.is_none(), "no status was written");
    assert_eq!((world.writes("metadata"), world.writes("status")), (1, 0));

    world.reconcile("w").await.expect("reconciled");
    assert_eq!(APPLIED[0].load(Ordering::SeqCst), 1);
    let status = world
        .get("w")
        .await
        .and_then(|w| w.status)
        .expect("a status");
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(world.writes("status"), 1, "one status write per reconcile");
}

#[tokio::test]
async fn a_shard_that_reads_an_object_runs_its_phases_and_writes_nothing() {
    let world = World::of_shard("frame-reader", Shard::new(1, 2).expect("a shard")).await;
    world.create("w", spec(5, 0), &[OTHER]).await;
    world.reconcile("w").await.expect("reconciled");
    assert_eq!(APPLIED[5].load(Ordering::SeqCst), 1, "the phases ran");
    let widget = world.get("w").await.expect("exists");
    assert_eq!(widget.finalizers(), [OTHER], "no finalizer of ours");
    assert!(widget.status.is_none(), "no status was written");

    world.delete_and_reconcile("w").await;
    assert_eq!(
        CLEANED[5].load(Ordering::SeqCst),
        1,
        "the delete phases ran"
    );
    let widget = world.get("w").await.expect("kept by the other finalizer");
    assert_eq!(widget.finalizers(), [OTHER]);
    assert_eq!((world.writes("metadata"), world.writes("status")), (0, 0));
}

#[tokio::test]
async fn the_status_is_not_written_when_nothing_changed() {
    let world = World::new("frame-unchanged").await;
    world.create("w", spec(1, 0), &[FINALIZER]).await;
    for _ in 0..3 {
        world.reconcile("w").await.expect("reconciled");
    }
    assert_eq!(
        APPLIED[1].load(Ordering::SeqCst),
        3,
        "every pass ran the phases"
    );
    assert_eq!(
        world.writes("status"),
        1,
        "only the first pass changed the status"
    );
    assert_eq!(
        world.writes("metadata"),
        0,
        "the finalizer was there already"
    );
}

#[tokio::test]
async fn cleanup_runs_only_while_deleting_and_the_finalizer_goes_once_it_is_done() {
    let world = World::new("frame-cleanup").await;
    world.create("w", spec(2, 1), &[FINALIZER]).await;
    world.reconcile("w").await.expect("reconciled");
    assert_eq!(CLEANED[2].load(Ordering::SeqCst), 0, "not while it lives");

    world.delete_and_reconcile("w").await;
    assert_eq!(CLEANED[2].load(Ordering::SeqCst), 1);
    let waiting = world.get("w").await.expect("kept while cleanup waits");
    assert_eq!(waiting.finalizers(), [FINALIZER]);
    assert_eq!(
        APPLIED[2].load(Ordering::SeqCst),
        1,
        "apply does not run while deleting"
    );

    world.reconcile("w").await.expect("reconciled");
    assert_eq!(CLEANED[2].load(Ordering::SeqCst), 2);
    assert!(world.get("w").await.is_none(), "gone once cleanup is done");
}

#[tokio::test]
async fn another_controllers_finalizer_survives_ours_going() {
    let world = World::new("frame-other").await;
    world.create("w", spec(3, 0), &[OTHER, FINALIZER]).await;
    world.delete_and_reconcile("w").await;
    let widget = world.get("w").await.expect("kept by the other finalizer");
    assert_eq!(widget.finalizers(), [OTHER]);
    assert_eq!(CLEANED[3].load(Ordering::SeqCst), 1);

    // Nothing of ours is left: a reconcile now does nothing.
    world.reconcile("w").await.expect("reconciled");
    assert_eq!(CLEANED[3].load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_finalizer_patch_from_a_stale_read_fails_instead_of_overwriting() {
    let world = World::new("frame-stale").await;
    let stale = world.create("w", spec(4, 0), &[]).await;
    // Another controller adds its finalizer after our read.
    world
        .widgets
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "metadata": { "finalizers": [OTHER] } })),
        )
        .await
        .expect("the other controller's write");
    let result = reconciler::reconcile(Arc::new(stale), world.ctx.clone()).await;
    assert!(result.is_err(), "the test op refuses the stale list");
    assert_eq!(world.get("w").await.expect("exists").finalizers(), [OTHER]);

    // Read again, it goes through and keeps the other entry.
    world.reconcile("w").await.expect("reconciled");
    assert_eq!(
        world.get("w").await.expect("exists").finalizers(),
        [OTHER, FINALIZER]
    );
}
