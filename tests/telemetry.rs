//! One object's story is one span tree: every guest call runs in a
//! `guest_call` span (provider, digest, export, outcome) whose parent is the
//! `reconcile` span of the object it was made for (controller, object.ref).
//! Spans are recorded by a layer of this test's own, through a pool's life
//! in the operator.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use testenv::flows::{Apis, wait_for_pool};
use testenv::{Stack, TestEnv};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

/// A span as recorded: its name, its fields, its parent.
#[derive(Clone, Debug, Default)]
struct Recorded {
    name: &'static str,
    fields: HashMap<String, String>,
    parent: Option<u64>,
}

#[derive(Clone, Default)]
struct Spans(Arc<Mutex<HashMap<u64, Recorded>>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut recorded = Recorded {
            name: attrs.metadata().name(),
            parent: ctx
                .span(id)
                .and_then(|s| s.parent())
                .map(|p| p.id().into_u64()),
            ..Recorded::default()
        };
        attrs.record(&mut Fields(&mut recorded.fields));
        self.0.lock().unwrap().insert(id.into_u64(), recorded);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some(span) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(&mut span.fields));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_guest_call_is_a_child_of_the_reconcile_it_was_made_for() {
    let spans = Spans::default();
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry()
            .with(tracing_subscriber::filter::LevelFilter::INFO)
            .with(spans.clone()),
    )
    .expect("the only subscriber of this test binary");

    let env = TestEnv::shared().await.unwrap();
    let workload = env.workload().unwrap();
    let stack = Stack::of(env).await.unwrap();
    let client = env.management().client().unwrap();
    let ns = env
        .management()
        .create_namespace("telemetry")
        .await
        .unwrap();
    let modules = stack.objects.modules(&client, &ns).await.unwrap();
    stack
        .objects
        .create_cluster(&client, workload, &ns, "c1", &modules)
        .await
        .unwrap();
    stack
        .objects
        .create_pool(&client, &ns, "pool", "c1", 1, &modules)
        .await
        .unwrap();
    wait_for_pool(&Apis::new(&client, &ns).pools, "pool", "Running", 1).await;

    let spans = spans.0.lock().unwrap().clone();
    let calls: Vec<&Recorded> = spans.values().filter(|s| s.name == "guest_call").collect();
    let mut exports = Vec::new();
    for call in &calls {
        let export = call.fields.get("export").cloned().unwrap_or_default();
        let reconcile = call
            .parent
            .and_then(|p| spans.get(&p))
            .unwrap_or_else(|| panic!("{call:?} has no parent"));
        assert_eq!(reconcile.name, "reconcile", "{call:?} under {reconcile:?}");
        assert!(
            call.fields
                .get("digest")
                .is_some_and(|d| d.starts_with("sha256:")),
            "{call:?}"
        );
        assert!(call.fields.contains_key("outcome"), "{call:?}");
        let object = &reconcile.fields["object.ref"];
        let expected = match export.as_str() {
            // Loading a module checks it with calls, in the module's reconcile.
            "info" | "config-schema" | "(export types)" => {
                let module = &call.fields["provider"];
                format!("ProviderModule.v1alpha1.runtime.capwasm.dev/{module}")
            }
            "bootstrap.generate" => {
                format!("WasmBootstrapConfig.v1alpha1.bootstrap.cluster.x-k8s.io/pool.{ns}")
            }
            // New providerIDs are checked as the provider's own, and its
            // nodes described, in the pool's reconcile.
            "machine-pools.reconcile" | "provider-ids.owns" | "node-shapes.describe" => {
                format!("WasmMachinePool.v1alpha1.infrastructure.cluster.x-k8s.io/pool.{ns}")
            }
            "clusters.reconcile" => {
                format!("WasmCluster.v1alpha1.infrastructure.cluster.x-k8s.io/c1.{ns}")
            }
            other => panic!("an unexpected call {other}"),
        };
        assert_eq!(object, &expected, "{call:?} under {reconcile:?}");
        exports.push(export);
    }
    exports.sort();
    exports.dedup();
    assert_eq!(
        exports,
        [
            "(export types)",
            "bootstrap.generate",
            "clusters.reconcile",
            "config-schema",
            "info",
            "machine-pools.reconcile",
            "node-shapes.describe",
            "provider-ids.owns",
        ],
        "every provider call of this pool and its Cluster, in the span of its object's reconcile"
    );
}
