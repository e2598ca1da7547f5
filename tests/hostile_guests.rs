//! Every hostile guest against the real runtime: each fails its own call
//! with the right typed error, within its limit, while a well-behaved
//! provider keeps being served by another task.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use capwasm::testing::requests;
use capwasm::wasm::types::ProviderError;
use capwasm::wasm::{
    CallError, Capabilities, Limits, Metrics, ProviderSource, ProviderSpec, Runtime,
    RuntimeSettings,
};
use testenv::{KUBEADM_JOIN_CONFIG, guest_path};

include!(concat!(env!("OUT_DIR"), "/hostile_guests.rs"));

/// Fails the build when a guest in `guests/hostile/` has no module here
/// whose `COVERS` names its component.
macro_rules! assert_test_exists {
    ($guest:ident, $file:literal) => {
        const _: () = assert!(
            same($guest::COVERS, $file),
            concat!("mod ", stringify!($guest), " must test ", $file)
        );
    };
}
for_each_hostile_guest!(assert_test_exists);

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const HOSTILE: &str = "hostile";
const WELL_BEHAVED: &str = "kubeadm";

fn limits() -> Limits {
    Limits {
        memory_bytes: 32 << 20,
        deadline: Duration::from_millis(300),
        max_output_bytes: 1 << 20,
        max_log_lines: 10,
        ..Limits::default()
    }
}

/// A runtime serving `file` as [`HOSTILE`] and kubeadm-bootstrap as [`WELL_BEHAVED`].
async fn runtime_with(file: &str, capabilities: Capabilities) -> (Runtime, Metrics) {
    let metrics = Metrics::default();
    let runtime = Runtime::new(
        RuntimeSettings {
            max_memory_bytes: 64 << 20,
            max_instances: 8,
            cache: None,
            ..RuntimeSettings::default()
        },
        Some(metrics.clone()),
    )
    .expect("runtime");
    for (name, file, capabilities) in [
        (HOSTILE, file, capabilities),
        (
            WELL_BEHAVED,
            "kubeadm_bootstrap.wasm",
            Capabilities::default(),
        ),
    ] {
        let source = ProviderSource::File(guest_path(file));
        let loaded = runtime
            .load(ProviderSpec {
                name: String::from(name),
                source,
                sha256: None,
                limits: limits(),
                capabilities,
            })
            .await
            .unwrap_or_else(|e| panic!("loading {file}: {e:#?} (run `make guests`)"));
        runtime.registry().install(Arc::new(loaded));
    }
    (runtime, metrics)
}

/// Runs `hostile` while another task keeps calling the well-behaved
/// provider: the other task has been served before `hostile` starts, and
/// must be served again after it ended. Every one of its calls must succeed.
/// Returns `hostile`'s result and the well-behaved calls made.
async fn while_serving_others<R>(runtime: &Runtime, hostile: impl Future<Output = R>) -> (R, u32) {
    let served = Arc::new(AtomicU32::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let other = {
        let (runtime, served, done) = (runtime.clone(), served.clone(), done.clone());
        tokio::spawn(async move {
            let request = requests::generate(KUBEADM_JOIN_CONFIG);
            while !done.load(Ordering::Relaxed) {
                runtime
                    .generate(WELL_BEHAVED, &request)
                    .await
                    .expect("the well-behaved provider is served");
                served.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let served_at_least = async |n: u32| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while served.load(Ordering::Relaxed) < n {
            assert!(!other.is_finished(), "the serving task died");
            assert!(
                Instant::now() < deadline,
                "no well-behaved call within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    served_at_least(1).await;
    let result = hostile.await;
    served_at_least(served.load(Ordering::Relaxed) + 1).await;
    done.store(true, Ordering::Relaxed);
    other.await.expect("the serving task did not panic");
    (result, served.load(Ordering::Relaxed))
}

async fn generate_hostile(runtime: &Runtime, config: &str) -> (CallError, Duration, u32) {
    let (result, served) = while_serving_others(runtime, async {
        let started = Instant::now();
        let result = runtime.generate(HOSTILE, &requests::generate(config)).await;
        (result, started.elapsed())
    })
    .await;
    let (result, elapsed) = result;
    (result.expect_err("the hostile call fails"), elapsed, served)
}

mod infinite_loop {
    use super::*;

    pub const COVERS: &str = "hostile_infinite_loop.wasm";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn is_interrupted_at_its_deadline_while_others_are_served() {
        let (runtime, metrics) = runtime_with(COVERS, Capabilities::default()).await;
        let (err, elapsed, served) = generate_hostile(&runtime, "{}").await;
        assert!(
            matches!(err, CallError::DeadlineExceeded { deadline, .. } if deadline == limits().deadline),
            "{err}"
        );
        assert!(
            err.to_string().contains("sha256:"),
            "names the digest: {err}"
        );
        // Within the deadline plus a few epoch ticks, with slack for a loaded CI machine.
        assert!(
            elapsed < limits().deadline + Duration::from_secs(2),
            "took {elapsed:?}"
        );
        assert!(served >= 2, "served before and after: {served}");
        assert_eq!(metrics.calls(HOSTILE, "bootstrap.generate", "timeout"), 1);
    }
}

mod memory_bomb {
    use super::*;

    pub const COVERS: &str = "hostile_memory_bomb.wasm";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hits_its_memory_limit_while_others_are_served() {
        let (runtime, metrics) = runtime_with(COVERS, Capabilities::default()).await;
        let (err, _, served) = generate_hostile(&runtime, "{}").await;
        assert!(
            matches!(err, CallError::MemoryLimit { limit_bytes, .. } if limit_bytes == 32 << 20),
            "{err}"
        );
        assert!(served >= 2, "served before and after: {served}");
        assert_eq!(
            metrics.calls(HOSTILE, "bootstrap.generate", "memory_limit"),
            1
        );
    }
}

mod memory_snoop {
    use super::*;

    pub const COVERS: &str = "hostile_memory_snoop.wasm";

    /// Pool slots are reused with their pages kept mapped: each call must
    /// still start from the module's initial memory, whatever the calls
    /// before it (of this provider or another) left there.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn finds_nothing_earlier_calls_left_in_memory() {
        let (runtime, _) = runtime_with(COVERS, Capabilities::default()).await;
        let (reports, served) = while_serving_others(&runtime, async {
            let mut reports = Vec::new();
            for i in 0..50 {
                let mut request = requests::generate("{}");
                request.owner_name = format!("secret-of-call-{i}");
                let data = runtime
                    .generate(HOSTILE, &request)
                    .await
                    .expect("the snooping guest returns its report");
                reports.push(String::from_utf8(data.value).expect("a UTF-8 report"));
            }
            reports
        })
        .await;
        for (i, report) in reports.iter().enumerate() {
            assert!(
                report.contains("# scratch: leftover=0 ")
                    && report.contains("# grown: leftover=0 "),
                "call {i} found what an earlier call left: {report}"
            );
        }
        assert!(served >= 2, "served before and after: {served}");
    }
}

mod deep_recursion {
    use super::*;

    pub const COVERS: &str = "hostile_deep_recursion.wasm";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn traps_without_taking_the_host_down() {
        let (runtime, _) = runtime_with(COVERS, Capabilities::default()).await;
        let (err, _, served) = generate_hostile(&runtime, "{}").await;
        assert!(matches!(err, CallError::Trapped { .. }), "{err}");
        assert!(served >= 2, "served before and after: {served}");
        // The runtime still serves the same provider's next call (and fails it the same way).
        let again = runtime.generate(HOSTILE, &requests::generate("{}")).await;
        assert!(matches!(again, Err(CallError::Trapped { .. })));
    }
}

mod panic {
    use super::*;

    pub const COVERS: &str = "hostile_panic.wasm";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn traps_and_reports_its_panic_message() {
        let (runtime, metrics) = runtime_with(COVERS, Capabilities::default()).await;
        let (err, _, served) = generate_hostile(&runtime, "{}").await;
        let CallError::Trapped {
            ref last_words,
            export,
            ..
        } = err
        else {
            panic!("expected a trap, got {err}");
        };
        assert_eq!(export, "bootstrap.generate");
        assert!(
            last_words.contains("panicked"),
            "the guest's panic message is kept: {last_words:?}"
        );
        assert!(served >= 2, "served before and after: {served}");
        assert_eq!(metrics.calls(HOSTILE, "bootstrap.generate", "trap"), 1);
    }
}

mod oversized_output {
    use super::*;

    pub const COVERS: &str = "hostile_oversized_output.wasm";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn is_refused_above_the_output_cap() {
        let (runtime, _) = runtime_with(COVERS, Capabilities::default()).await;
        // Over the 1 MiB output cap, well under the 32 MiB memory cap.
        let (err, _, served) = generate_hostile(&runtime, r#"{"sizeBytes": 4194304}"#).await;
        assert!(
            matches!(err, CallError::OutputTooLarge { limit_bytes, .. } if limit_bytes == 1 << 20),
            "{err}"
        );
        assert!(served >= 2, "served before and after: {served}");
        // Under the cap the same guest is served.
        let small = runtime
            .generate(HOSTILE, &requests::generate(r#"{"sizeBytes": 1024}"#))
            .await;
        assert_eq!(small.map(|d| d.value.len()).ok(), Some(1024));
    }
}

mod forbidden_http {
    use super::*;

    pub const COVERS: &str = "hostile_forbidden_http.wasm";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sees_a_denied_request_as_an_error_not_a_trap() {
        // It may reach 127.0.0.2 only; it asks for 127.0.0.1.
        let caps = Capabilities {
            allowed_hosts: vec!["127.0.0.2".into()],
        };
        let (runtime, _) = runtime_with(COVERS, caps).await;
        let config = r#"{"url": "http://127.0.0.1:1/"}"#;
        let (result, served) = while_serving_others(
            &runtime,
            runtime.reconcile_pool(HOSTILE, &requests::reconcile_pool(config, 1)),
        )
        .await;
        let err = result.expect_err("the guest reports what it saw");
        let CallError::Provider {
            error: ProviderError::Terminal(ref terminal),
            ..
        } = err
        else {
            panic!("expected the guest's own terminal error, got {err}");
        };
        assert_eq!(terminal.reason, "HttpRequestDenied", "{terminal:?}");
        assert!(served >= 2, "served before and after: {served}");
    }
}
