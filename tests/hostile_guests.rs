//! Every hostile guest against the real runtime: each fails its own call
//! with the right typed error, within its limit, while a well-behaved
//! provider keeps being served by another task.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use capwasm::testing::requests;
use capwasm::wasm::bounds::{self, THROTTLE_AFTER};
use capwasm::wasm::types::ProviderError;
use capwasm::wasm::{
    CallError, Capabilities, Error, HttpLimits, Limits, LoadedProvider, MemoryBound, Metrics,
    ProviderSource, ProviderSpec, Runtime, RuntimeSettings,
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
    runtime_with_limits(file, capabilities, limits()).await
}

/// [`runtime_with`], the hostile guest under `hostile_limits`.
async fn runtime_with_limits(
    file: &str,
    capabilities: Capabilities,
    hostile_limits: Limits,
) -> (Runtime, Metrics) {
    runtime_with_budget(file, capabilities, hostile_limits, None).await
}

/// [`runtime_with_limits`], all guests' memory within `budget` bytes.
async fn runtime_with_budget(
    file: &str,
    capabilities: Capabilities,
    hostile_limits: Limits,
    budget: Option<usize>,
) -> (Runtime, Metrics) {
    let (runtime, metrics) = well_behaved_runtime_with(budget).await;
    let loaded = load(&runtime, HOSTILE, file, capabilities, hostile_limits)
        .await
        .unwrap_or_else(|e| panic!("loading {file}: {e:#?} (run `make guests`)"));
    runtime.registry().install(Arc::new(loaded));
    (runtime, metrics)
}

/// A runtime serving only kubeadm-bootstrap, as [`WELL_BEHAVED`].
async fn well_behaved_runtime() -> (Runtime, Metrics) {
    well_behaved_runtime_with(None).await
}

/// The tests' runtime settings, all guests' memory within `budget` bytes.
fn settings(budget: Option<usize>) -> RuntimeSettings {
    RuntimeSettings {
        max_memory_bytes: 64 << 20,
        max_instances: 16,
        cache: None,
        guest_memory_budget_bytes: budget,
        ..RuntimeSettings::default()
    }
}

/// A runtime of `settings` serving `file` as [`HOSTILE`] under
/// `hostile_limits` and kubeadm-bootstrap as [`WELL_BEHAVED`].
async fn runtime_of(
    file: &str,
    settings: RuntimeSettings,
    hostile_limits: Limits,
) -> (Runtime, Metrics) {
    let (runtime, metrics) = well_behaved_runtime_in(settings).await;
    install(&runtime, file, hostile_limits).await;
    (runtime, metrics)
}

/// Loads `file` as [`HOSTILE`] under `limits` into `runtime`.
async fn install(runtime: &Runtime, file: &str, limits: Limits) {
    let loaded = load(runtime, HOSTILE, file, Capabilities::default(), limits)
        .await
        .unwrap_or_else(|e| panic!("loading {file}: {e:#?} (run `make guests`)"));
    runtime.registry().install(Arc::new(loaded));
}

/// Waits until `n` instances are alive (at most 30 s): calls in flight,
/// not merely asked for.
async fn in_flight(metrics: &Metrics, n: i64) {
    let until = Instant::now() + Duration::from_secs(30);
    while metrics.instances() < n {
        assert!(
            Instant::now() < until,
            "{n} calls in flight within 30 s: {} are",
            metrics.instances()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// [`well_behaved_runtime`], all guests' memory within `budget` bytes.
async fn well_behaved_runtime_with(budget: Option<usize>) -> (Runtime, Metrics) {
    well_behaved_runtime_in(settings(budget)).await
}

/// [`well_behaved_runtime`] of `settings`.
async fn well_behaved_runtime_in(settings: RuntimeSettings) -> (Runtime, Metrics) {
    let metrics = Metrics::default();
    let runtime = Runtime::new(settings, Some(metrics.clone())).expect("runtime");
    let loaded = load(
        &runtime,
        WELL_BEHAVED,
        "kubeadm_bootstrap.wasm",
        Capabilities::default(),
        limits(),
    )
    .await
    .unwrap_or_else(|e| panic!("loading kubeadm_bootstrap.wasm: {e:#?} (run `make guests`)"));
    runtime.registry().install(Arc::new(loaded));
    (runtime, metrics)
}

/// Loads `file` as `name`.
async fn load(
    runtime: &Runtime,
    name: &str,
    file: &str,
    capabilities: Capabilities,
    limits: Limits,
) -> Result<LoadedProvider, Error> {
    runtime
        .load(ProviderSpec {
            name: String::from(name),
            source: ProviderSource::File(guest_path(file)),
            sha256: None,
            limits,
            capabilities,
        })
        .await
}

/// A task that keeps calling the well-behaved provider, every call of
/// which must succeed, counting them.
struct Serving {
    served: Arc<AtomicU32>,
    done: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Serving {
    fn start(runtime: &Runtime) -> Self {
        let served = Arc::new(AtomicU32::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let task = {
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
        Self { served, done, task }
    }

    /// The calls served so far.
    fn count(&self) -> u32 {
        self.served.load(Ordering::Relaxed)
    }

    /// Waits until `n` calls were served (at most 30 s).
    async fn at_least(&self, n: u32) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.count() < n {
            assert!(!self.task.is_finished(), "the serving task died");
            assert!(
                Instant::now() < deadline,
                "no well-behaved call within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Stops the task: the calls it made.
    async fn stop(self) -> u32 {
        self.done.store(true, Ordering::Relaxed);
        self.task.await.expect("the serving task did not panic");
        self.served.load(Ordering::Relaxed)
    }
}

/// Runs `hostile` while another task keeps calling the well-behaved
/// provider: the other task has been served before `hostile` starts, and
/// must be served again after it ended. Every one of its calls must succeed.
/// Returns `hostile`'s result and the well-behaved calls made.
async fn while_serving_others<R>(runtime: &Runtime, hostile: impl Future<Output = R>) -> (R, u32) {
    let serving = Serving::start(runtime);
    serving.at_least(1).await;
    let result = hostile.await;
    serving.at_least(serving.count() + 1).await;
    (result, serving.stop().await)
}

/// `request` about an object in `namespace`.
fn in_namespace(
    mut request: capwasm::wasm::bootstrap::GenerateRequest,
    namespace: &str,
) -> capwasm::wasm::bootstrap::GenerateRequest {
    request.config_object.namespace = namespace.into();
    request
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

    /// [`super::limits`] with a deadline of seconds: these tests measure
    /// calls against their deadline and patience, which must stay far
    /// above a busy two-core machine's scheduling delays.
    fn limits() -> Limits {
        Limits {
            deadline: Duration::from_secs(3),
            ..super::limits()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn is_interrupted_at_its_deadline_while_others_are_served() {
        let (runtime, metrics) =
            runtime_with_limits(COVERS, Capabilities::default(), limits()).await;
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

    /// Its calls about one namespace's objects throttled: those are
    /// refused at once, those about another namespace's are still made.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn deadlines_in_a_row_throttle_its_calls_about_one_namespace_while_others_are_served() {
        // Turns enough for the calls about one namespace to run at once.
        let settings = RuntimeSettings {
            max_calls_per_provider: 2 * THROTTLE_AFTER,
            ..settings(None)
        };
        let (runtime, metrics) = runtime_of(COVERS, settings, limits()).await;
        let mut told = runtime.throttles();
        let request = requests::generate("{}");
        let (results, served) = while_serving_others(&runtime, async {
            let calls = (0..THROTTLE_AFTER).map(|_| runtime.generate(HOSTILE, &request));
            futures::future::join_all(calls).await
        })
        .await;
        for result in results {
            let err = result.expect_err("the loop fails");
            assert!(matches!(err, CallError::DeadlineExceeded { .. }), "{err}");
        }
        assert!(served >= 2, "served before and after: {served}");
        assert_eq!(told.try_recv().as_deref(), Ok(HOSTILE));
        let throttled = runtime.throttled(HOSTILE);
        let [throttled] = throttled.as_slice() else {
            panic!("one namespace throttled: {throttled:?}");
        };
        assert_eq!(throttled.namespace, request.config_object.namespace);
        assert_eq!(throttled.deadlines, THROTTLE_AFTER);

        // Refused at once, saying why, while the others are still served.
        let started = Instant::now();
        let refused = runtime
            .generate(HOSTILE, &request)
            .await
            .expect_err("refused");
        assert!(
            matches!(refused, CallError::Throttled { deadlines, .. } if deadlines == THROTTLE_AFTER),
            "{refused}"
        );
        assert!(started.elapsed() < limits().deadline, "refused at once");
        assert!(
            refused.to_string().contains("ran into their deadline"),
            "{refused}"
        );
        assert_eq!(metrics.calls(HOSTILE, "bootstrap.generate", "throttled"), 1);
        runtime
            .generate(WELL_BEHAVED, &requests::generate(KUBEADM_JOIN_CONFIG))
            .await
            .expect("the others are served");
        // The same provider's call about another namespace is made (and runs
        // to its own deadline).
        let elsewhere = in_namespace(request, "elsewhere");
        let made = runtime.generate(HOSTILE, &elsewhere).await;
        assert!(
            matches!(made, Err(CallError::DeadlineExceeded { .. })),
            "{made:?}"
        );
        assert_eq!(runtime.throttled(HOSTILE).len(), 1);
    }

    /// Four turns: the calls about one namespace may hold half of them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn its_calls_about_one_namespace_beyond_half_its_turns_wait_for_one() {
        let settings = RuntimeSettings {
            max_calls_per_provider: 4,
            patience: limits().deadline * 10,
            ..settings(None)
        };
        calls_beyond_two_wait(settings, ["a"; 4]).await;
    }

    /// Two turns, calls about four namespaces: the provider's turns bound
    /// them whatever their namespaces.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn its_calls_beyond_its_share_of_turns_wait_for_one() {
        let settings = RuntimeSettings {
            max_calls_per_provider: 2,
            patience: limits().deadline * 10,
            ..settings(None)
        };
        calls_beyond_two_wait(settings, ["a", "b", "c", "d"]).await;
    }

    /// The looping guest as [`HOSTILE`] with one turn and `patience`.
    async fn one_turn(patience: Duration) -> (Runtime, Metrics) {
        let settings = RuntimeSettings {
            max_calls_per_provider: 1,
            patience,
            ..settings(None)
        };
        runtime_of(COVERS, settings, limits()).await
    }

    /// One turn, three looping calls, a patience shorter than the deadline:
    /// one runs to its deadline, the two behind it are refused as busy when
    /// their patience ends (not at their turn), and the other provider is
    /// served all along.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_finding_no_turn_within_the_patience_are_refused_as_busy() {
        let patience = limits().deadline / 3;
        let (runtime, metrics) = one_turn(patience).await;
        let request = requests::generate("{}");
        let (results, served) = while_serving_others(&runtime, async {
            let calls = (0..3).map(|_| async {
                let started = Instant::now();
                (runtime.generate(HOSTILE, &request).await, started.elapsed())
            });
            futures::future::join_all(calls).await
        })
        .await;
        let mut busy = 0;
        for (result, elapsed) in results {
            match result {
                Err(CallError::DeadlineExceeded { .. }) => {}
                Err(CallError::Busy { waited, .. }) => {
                    assert_eq!(waited, patience);
                    assert!(elapsed < limits().deadline, "refused after {elapsed:?}");
                    busy += 1;
                }
                other => panic!("neither a deadline nor busy: {other:?}"),
            }
        }
        assert_eq!(busy, 2);
        assert_eq!(metrics.calls(HOSTILE, "bootstrap.generate", "busy"), 2);
        assert_eq!(metrics.waiting(HOSTILE), 0, "none left waiting");
        assert!(served >= 2, "served before and after: {served}");
        // Being busy is load, not a fault: it throttles nothing.
        assert!(runtime.throttled(HOSTILE).is_empty());
    }

    /// One turn held by a looping call already past the patience: a call
    /// after it is refused at once rather than after the patience, since
    /// that turn is unlikely to come back within it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_behind_turns_held_past_the_patience_is_refused_at_once() {
        let patience = limits().deadline / 4;
        let (runtime, metrics) = one_turn(patience).await;
        let request = requests::generate("{}");
        let holder = runtime.generate(HOSTILE, &request);
        let late = async {
            // Past the patience since the holder took its turn.
            in_flight(&metrics, 1).await;
            tokio::time::sleep(patience * 2).await;
            let started = Instant::now();
            (runtime.generate(HOSTILE, &request).await, started.elapsed())
        };
        let (held, (refused, elapsed)) = tokio::join!(holder, late);
        assert!(
            matches!(held, Err(CallError::DeadlineExceeded { .. })),
            "{held:?}"
        );
        assert!(
            matches!(refused, Err(CallError::Busy { waited, .. }) if waited.is_zero()),
            "{refused:?}"
        );
        assert!(elapsed < patience, "refused after {elapsed:?}");
        assert_eq!(metrics.calls(HOSTILE, "bootstrap.generate", "busy"), 1);
        assert_eq!(metrics.waiting(HOSTILE), 0, "none left waiting");
    }

    /// Two turns, one for each namespace: the calls about one namespace
    /// hold theirs past the patience, so its next call is refused at once,
    /// while a call about another namespace finds its turn and is made.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn turns_of_one_namespace_held_past_the_patience_refuse_its_calls_not_another_s() {
        let patience = limits().deadline / 4;
        let settings = RuntimeSettings {
            max_calls_per_provider: 2,
            patience,
            ..settings(None)
        };
        let (runtime, metrics) = runtime_of(COVERS, settings, limits()).await;
        let request = requests::generate("{}");
        let elsewhere = in_namespace(request.clone(), "elsewhere");
        let holder = runtime.generate(HOSTILE, &request);
        let late = async {
            // Past the patience since the holder took its turn.
            in_flight(&metrics, 1).await;
            tokio::time::sleep(patience * 2).await;
            let started = Instant::now();
            let refused = runtime.generate(HOSTILE, &request).await;
            (
                refused,
                started.elapsed(),
                runtime.generate(HOSTILE, &elsewhere).await,
            )
        };
        let (held, (refused, elapsed, made)) = tokio::join!(holder, late);
        assert!(
            matches!(held, Err(CallError::DeadlineExceeded { .. })),
            "{held:?}"
        );
        assert!(
            matches!(refused, Err(CallError::Busy { waited, .. }) if waited.is_zero()),
            "{refused:?}"
        );
        assert!(elapsed < patience, "refused after {elapsed:?}");
        assert!(
            matches!(made, Err(CallError::DeadlineExceeded { .. })),
            "the other namespace's call ran: {made:?}"
        );
        assert_eq!(metrics.calls(HOSTILE, "bootstrap.generate", "busy"), 1);
        assert_eq!(metrics.waiting(HOSTILE), 0, "none left waiting");
    }

    /// One turn, five looping calls: three run to their deadline one after
    /// another and throttle the provider; the two queued behind them are
    /// refused when their turn comes instead of running to theirs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_queued_when_the_throttle_begins_are_refused_at_their_turn() {
        let settings = RuntimeSettings {
            max_calls_per_provider: 1,
            patience: limits().deadline * 10,
            ..settings(None)
        };
        let (runtime, _metrics) = runtime_of(COVERS, settings, limits()).await;
        let request = requests::generate("{}");
        let calls = (0..5).map(|_| runtime.generate(HOSTILE, &request));
        let started = Instant::now();
        let results = futures::future::join_all(calls).await;
        let deadlines = results
            .iter()
            .filter(|r| matches!(r, Err(CallError::DeadlineExceeded { .. })))
            .count();
        let throttled = results
            .iter()
            .filter(|r| matches!(r, Err(CallError::Throttled { .. })))
            .count();
        assert_eq!((deadlines, throttled), (3, 2), "{results:?}");
        assert!(
            started.elapsed() < limits().deadline * 4,
            "the last two ran no deadline: {:?}",
            started.elapsed()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_beyond_the_instance_slots_wait_for_one() {
        let settings = RuntimeSettings {
            max_instances: 2,
            patience: limits().deadline * 10,
            ..settings(None)
        };
        calls_beyond_two_wait(settings, ["a", "b", "c", "d"]).await;
    }

    /// Four looping calls about objects in `namespaces` under `settings`,
    /// which let two run at once: two run while two are queued (not
    /// dropped), as the metrics say, then those two run their whole deadline.
    async fn calls_beyond_two_wait(settings: RuntimeSettings, namespaces: [&str; 4]) {
        let (runtime, metrics) = runtime_of(COVERS, settings, limits()).await;
        let started = Instant::now();
        let calls = namespaces.map(|namespace| {
            let request = in_namespace(requests::generate("{}"), namespace);
            let runtime = &runtime;
            async move {
                let result = runtime.generate(HOSTILE, &request).await;
                (result, started.elapsed())
            }
        });
        // Two alive and two queued, seen before the first two end (seconds later).
        let sample = async {
            let until = Instant::now() + limits().deadline;
            loop {
                let seen = (metrics.instances(), metrics.waiting(HOSTILE));
                if seen == (2, 2) || Instant::now() >= until {
                    break seen;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        let (results, (alive, waiting)) = futures::join!(futures::future::join_all(calls), sample);
        assert_eq!((alive, waiting), (2, 2), "instances alive, calls queued");
        let mut ended: Vec<Duration> = Vec::new();
        for (result, elapsed) in results {
            let err = result.expect_err("the loop fails");
            assert!(matches!(err, CallError::DeadlineExceeded { .. }), "{err}");
            ended.push(elapsed);
        }
        ended.sort();
        assert!(ended[3] >= limits().deadline * 2, "{ended:?}");
        assert_eq!((metrics.instances(), metrics.waiting(HOSTILE)), (0, 0));
    }
}

mod memory_bomb {
    use super::*;

    pub const COVERS: &str = "hostile_memory_bomb.wasm";

    /// A bomb ends at a memory bound, never at its deadline: one far enough
    /// that a busy machine's slowness cannot reach it first (300 ms did,
    /// beside other test binaries on two cores).
    fn limits() -> Limits {
        Limits {
            deadline: Duration::from_secs(10),
            ..super::limits()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hits_its_memory_limit_while_others_are_served() {
        let (runtime, metrics) =
            runtime_with_limits(COVERS, Capabilities::default(), limits()).await;
        let (err, _, served) = generate_hostile(&runtime, "{}").await;
        assert!(
            matches!(err, CallError::MemoryLimit { bound: MemoryBound::Instance(bytes), .. } if bytes == 32 << 20),
            "{err}"
        );
        assert!(served >= 2, "served before and after: {served}");
        assert_eq!(
            metrics.calls(HOSTILE, "bootstrap.generate", "memory_limit"),
            1
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bombs_under_a_shared_budget_each_meet_a_bound_and_a_cap_above_it_meets_the_budget() {
        // 48 MiB for all: two bombs capped at 32 MiB cannot both hold their
        // caps at once. Each meets a bound (its own or the budget) and ends
        // there, neither waiting on the other.
        let budget = 48 << 20;
        let (runtime, metrics) =
            runtime_with_budget(COVERS, Capabilities::default(), limits(), Some(budget)).await;
        let request = requests::generate("{}");
        let ((first, second), served) = while_serving_others(&runtime, async {
            futures::join!(
                runtime.generate(HOSTILE, &request),
                runtime.generate(HOSTILE, &request)
            )
        })
        .await;
        for result in [first, second] {
            let err = result.expect_err("the bomb fails");
            assert!(
                matches!(
                    err,
                    CallError::MemoryLimit { bound: MemoryBound::Instance(b) | MemoryBound::Runtime(b), .. }
                        if b == 32 << 20 || b == budget
                ),
                "{err}"
            );
        }
        assert!(served >= 2, "served before and after: {served}");
        assert_eq!(
            metrics.calls(HOSTILE, "bootstrap.generate", "memory_limit"),
            2
        );

        // A cap above the whole budget meets the budget, at once.
        let (runtime, _) =
            runtime_with_budget(COVERS, Capabilities::default(), limits(), Some(24 << 20)).await;
        let (err, _, served) = generate_hostile(&runtime, "{}").await;
        assert!(
            matches!(err, CallError::MemoryLimit { bound: MemoryBound::Runtime(bytes), .. } if bytes == 24 << 20),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("the 25165824-byte memory budget all providers share"),
            "{err}"
        );
        assert!(served >= 2, "served before and after: {served}");
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
            ..Capabilities::default()
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

mod credential_dump {
    use std::net::SocketAddr;
    use std::sync::Mutex;

    use axum::Router;
    use axum::http::HeaderMap;
    use axum::routing::post;
    use capwasm::wasm::types::Credential;
    use capwasm::wasm::{HostAuth, Scheme};
    use testenv::moto::Moto;

    use super::*;

    pub const COVERS: &str = "hostile_credential_dump.wasm";

    /// What a recorder was sent: each request's Authorization and body.
    type Seen = Arc<Mutex<Vec<(Option<String>, String)>>>;

    /// A loopback server recording every POST; its authority.
    async fn recorder() -> (String, Seen) {
        let seen = Seen::default();
        let record = seen.clone();
        let app = Router::new().route(
            "/",
            post(move |headers: HeaderMap, body: String| async move {
                let authorization = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                record.lock().unwrap().push((authorization, body));
                "recorded"
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr: SocketAddr = listener.local_addr().expect("its address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (addr.to_string(), seen)
    }

    fn credentials(pairs: &[(&str, &str)]) -> Vec<Credential> {
        pairs
            .iter()
            .map(|(key, value)| Credential {
                key: (*key).into(),
                value: value.as_bytes().to_vec(),
            })
            .collect()
    }

    fn capabilities(allowed: &[&str], auth: Vec<HostAuth>, expose: bool) -> Capabilities {
        Capabilities {
            allowed_hosts: allowed.iter().map(|h| (*h).to_owned()).collect(),
            request_auth: auth,
            expose_credentials: expose,
            allowed_kinds: Vec::new(),
        }
    }

    /// A bearer rule for `host`, over plain HTTP (the recorders' loopback).
    fn bearer(host: &str) -> HostAuth {
        HostAuth {
            host: host.into(),
            plain_http: true,
            scheme: Scheme::Bearer {
                token: "token".into(),
            },
        }
    }

    /// The guest's reconcile of a cluster, given `secrets`, sending to `targets` (url, body).
    async fn dump(
        capabilities: Capabilities,
        targets: &[(String, &str)],
        secrets: &[(&str, &str)],
    ) -> CallError {
        let limits = Limits {
            deadline: Duration::from_secs(10),
            ..limits()
        };
        let (runtime, _) = runtime_with_limits(COVERS, capabilities, limits).await;
        let requests: Vec<_> = targets
            .iter()
            .map(|(url, body)| serde_json::json!({ "url": url, "body": body }))
            .collect();
        let config = serde_json::json!({ "requests": requests }).to_string();
        let mut request = requests::cluster_request(&config);
        request.credentials = credentials(secrets);
        runtime
            .reconcile_cluster(HOSTILE, &request)
            .await
            .expect_err("the guest always reports with an error")
    }

    fn terminal(error: &CallError) -> (&str, &str) {
        let CallError::Provider {
            error: ProviderError::Terminal(terminal),
            ..
        } = error
        else {
            panic!("expected the guest's own report, got {error}");
        };
        (&terminal.reason, &terminal.message)
    }

    const SECRETS: [(&str, &str); 2] = [("token", "s3cret-token"), ("other", "another-secret")];

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keys_stay_on_the_host_and_only_the_ruled_host_is_authenticated() {
        let (ruled, seen_ruled) = recorder().await;
        let (plain, seen_plain) = recorder().await;
        // Another host than the ruled one (another port of it would be refused).
        let plain = plain.replace("127.0.0.1", "localhost");
        let caps = capabilities(&[&ruled, &plain], vec![bearer(&ruled)], false);
        let targets = [
            (format!("http://{ruled}/"), "a=1"),
            (format!("http://{plain}/"), ""),
        ];
        let error = dump(caps, &targets, &SECRETS).await;
        assert_eq!(terminal(&error).0, "AllAnswered", "{error}");
        let ruled = seen_ruled.lock().unwrap().clone();
        let plain = seen_plain.lock().unwrap().clone();
        assert_eq!(ruled.len(), 1, "{ruled:?}");
        assert_eq!(ruled[0].0.as_deref(), Some("Bearer s3cret-token"));
        assert_eq!(plain.len(), 1, "{plain:?}");
        assert_eq!(
            plain[0].0, None,
            "a host without a rule gets no credentials"
        );
        for (_, body) in ruled.iter().chain(&plain) {
            // The guest sent all it had: its config, but no secret.
            assert!(body.contains("Given=config"), "{body}");
            assert!(
                !body.contains("s3cret") && !body.contains("another-secret"),
                "{body}"
            );
        }
    }

    /// The rule names a scheme, a host and a port: its token goes there
    /// and nowhere else, not to another port of the host nor over plain
    /// HTTP to a rule for HTTPS; those requests are refused unsent.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_ruled_token_never_reaches_another_port_or_plain_http() {
        let (ruled, seen_ruled) = recorder().await;
        let (other_port, seen_other) = recorder().await;
        // Every port of loopback may be reached; the token is for one.
        let any_port = ["127.0.0.1"];
        let refused = |error: &CallError| terminal(error).0 == "HttpRequestDenied";

        let to_other_port = [(format!("http://{other_port}/"), "")];
        let caps = capabilities(&any_port, vec![bearer(&ruled)], false);
        let error = dump(caps.clone(), &to_other_port, &SECRETS).await;
        assert!(refused(&error), "{error}");
        assert!(
            seen_other.lock().unwrap().is_empty(),
            "nothing reached another port"
        );

        let https_only = HostAuth {
            plain_http: false,
            ..bearer(&ruled)
        };
        let to_ruled = [(format!("http://{ruled}/"), "")];
        let error = dump(
            capabilities(&any_port, vec![https_only], false),
            &to_ruled,
            &SECRETS,
        )
        .await;
        assert!(refused(&error), "{error}");
        assert!(
            seen_ruled.lock().unwrap().is_empty(),
            "nothing went over plain HTTP"
        );

        // The rule's own scheme, host and port: authenticated. A host
        // without a rule is reached unauthenticated, as before.
        let error = dump(caps, &to_ruled, &SECRETS).await;
        assert_eq!(terminal(&error).0, "AllAnswered", "{error}");
        let ruled = seen_ruled.lock().unwrap().clone();
        assert_eq!(ruled.len(), 1, "{ruled:?}");
        assert_eq!(ruled[0].0.as_deref(), Some("Bearer s3cret-token"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn exposing_credentials_to_the_guest_is_opt_in_and_hands_it_every_key() {
        let (plain, seen) = recorder().await;
        let caps = capabilities(&[&plain], Vec::new(), true);
        let error = dump(caps, &[(format!("http://{plain}/"), "")], &SECRETS).await;
        assert_eq!(terminal(&error).0, "AllAnswered", "{error}");
        let body = seen.lock().unwrap()[0].1.clone();
        assert!(
            body.contains("s3cret-token") && body.contains("another-secret"),
            "{body}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_ruled_host_never_gets_a_request_its_key_is_missing_from() {
        let (ruled, seen) = recorder().await;
        let caps = capabilities(&[&ruled], vec![bearer(&ruled)], false);
        let only_other = [("other", "another-secret")];
        let error = dump(caps, &[(format!("http://{ruled}/"), "")], &only_other).await;
        assert_eq!(terminal(&error).0, "HttpRequestDenied", "{error}");
        assert!(
            seen.lock().unwrap().is_empty(),
            "nothing was sent unauthenticated"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sigv4_from_the_host_passes_an_emulator_that_checks_signatures() {
        let moto = Moto::start().await.expect("moto (tests/moto/install.sh)");
        let sigv4 = HostAuth {
            host: moto.authority.clone(),
            plain_http: true,
            scheme: Scheme::AwsSigV4 {
                service: "ec2".into(),
                region: "us-east-1".into(),
                access_key_id: "AWS_ACCESS_KEY_ID".into(),
                secret_access_key: "AWS_SECRET_ACCESS_KEY".into(),
                session_token: None,
            },
        };
        let caps = capabilities(&[&moto.authority], vec![sigv4], false);
        let targets = [(
            format!("http://{}/", moto.authority),
            "Action=DescribeVpcs&Version=2016-11-15",
        )];
        let good = [
            ("AWS_ACCESS_KEY_ID", moto.access_key_id.as_str()),
            ("AWS_SECRET_ACCESS_KEY", moto.secret_access_key.as_str()),
        ];
        let error = dump(caps.clone(), &targets, &good).await;
        let (reason, message) = terminal(&error);
        assert_eq!(reason, "AllAnswered", "{error}");
        assert!(message.ends_with(" 200;"), "{message}");

        let wrong_secret = "wrong-secret-that-must-not-show";
        let wrong = [
            ("AWS_ACCESS_KEY_ID", moto.access_key_id.as_str()),
            ("AWS_SECRET_ACCESS_KEY", wrong_secret),
        ];
        let error = dump(caps, &targets, &wrong).await;
        let CallError::CredentialsRejected {
            ref host, status, ..
        } = error
        else {
            panic!("expected the credentials named as the cause, got {error}");
        };
        assert_eq!((host.as_str(), status), (moto.authority.as_str(), 401));
        let text = error.to_string();
        assert!(
            text.contains(HOSTILE) && text.contains(&moto.authority),
            "{text}"
        );
        assert!(!text.contains(wrong_secret), "{text}");
    }
}

mod timer_sleep {
    use super::*;

    pub const COVERS: &str = "hostile_timer_sleep.wasm";

    /// Blocked in a host call, not computing: the deadline still ends it,
    /// and six of them at once on two worker threads hold none of them —
    /// the well-behaved provider is served while all six are waiting.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ends_at_its_deadline_while_waiting_on_a_timer_and_holds_no_thread() {
        // Turns enough for six calls about one namespace at once; a deadline
        // far longer than a well-behaved call (milliseconds), far shorter
        // than the 20 s the sleepers ask for.
        let settings = RuntimeSettings {
            max_calls_per_provider: 12,
            ..settings(None)
        };
        let deadline = Duration::from_secs(5);
        let (runtime, metrics) = well_behaved_runtime_in(settings).await;
        let hostile_limits = Limits {
            deadline,
            ..limits()
        };
        install(&runtime, COVERS, hostile_limits).await;
        let started = Instant::now();
        let sleepers = {
            let runtime = runtime.clone();
            tokio::spawn(async move {
                let request = requests::generate(r#"{"seconds": 20}"#);
                let calls = (0..6).map(|_| runtime.generate(HOSTILE, &request));
                futures::future::join_all(calls).await
            })
        };
        in_flight(&metrics, 6).await;
        for served in 1..=3 {
            runtime
                .generate(WELL_BEHAVED, &requests::generate(KUBEADM_JOIN_CONFIG))
                .await
                .expect("the well-behaved provider is served");
            assert!(
                !sleepers.is_finished() && metrics.instances() >= 6,
                "call {served} was served while the six sleepers wait"
            );
        }

        for result in sleepers.await.unwrap() {
            let err = result.expect_err("the sleeping call fails");
            assert!(
                matches!(err, CallError::DeadlineExceeded { deadline: d, .. } if d == deadline),
                "{err}"
            );
        }
        // Ended by the deadline, not by the 20 s asked for.
        let elapsed = started.elapsed();
        assert!(
            elapsed >= deadline && elapsed < Duration::from_secs(15),
            "took {elapsed:?}"
        );
        assert_eq!(metrics.calls(HOSTILE, "bootstrap.generate", "timeout"), 6);
    }

    /// Stopping the runtime abandons the calls waiting in it, and every call
    /// made afterwards, however short.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stopping_the_runtime_abandons_calls_in_flight_and_later_ones() {
        let hostile_limits = Limits {
            deadline: Duration::from_secs(30),
            ..limits()
        };
        let (runtime, metrics) =
            runtime_with_limits(COVERS, Capabilities::default(), hostile_limits).await;
        let sleeper = {
            let runtime = runtime.clone();
            tokio::spawn(async move {
                let request = requests::generate(r#"{"seconds": 60}"#);
                runtime.generate(HOSTILE, &request).await
            })
        };
        // In flight, not merely asked for: an instance holds it.
        in_flight(&metrics, 1).await;
        runtime.stop();
        let ended = tokio::time::timeout(Duration::from_secs(5), sleeper)
            .await
            .expect("abandoned at once, not at its 30 s deadline")
            .unwrap();
        assert!(
            matches!(ended, Err(CallError::Abandoned { .. })),
            "{ended:?}"
        );
        let later = runtime
            .generate(WELL_BEHAVED, &requests::generate(KUBEADM_JOIN_CONFIG))
            .await;
        assert!(
            matches!(later, Err(CallError::Abandoned { .. })),
            "{later:?}"
        );
    }
}

mod slow_load {
    use super::*;

    pub const COVERS: &str = "hostile_slow_load.wasm";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fails_to_load_at_the_deadline_of_its_info_call() {
        let (runtime, _) = well_behaved_runtime().await;
        let (result, served) = while_serving_others(&runtime, async {
            let started = Instant::now();
            let loaded = load(&runtime, HOSTILE, COVERS, Capabilities::default(), limits()).await;
            (loaded, started.elapsed())
        })
        .await;
        let (loaded, elapsed) = result;
        let err = loaded.expect_err("info sleeps for 30 s");
        let Error::Check(ref call) = err else {
            panic!("expected a failed check call, got {err}");
        };
        assert!(
            matches!(**call, CallError::DeadlineExceeded { export: "info", .. }),
            "{call}"
        );
        assert!(
            elapsed < limits().deadline + Duration::from_secs(2),
            "took {elapsed:?}"
        );
        assert!(served >= 2, "served before and after: {served}");
    }
}

mod schema_bomb {
    use super::*;

    pub const COVERS: &str = "hostile_schema_bomb.wasm";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn is_refused_at_load_naming_the_bound_it_crossed() {
        let (runtime, _) = well_behaved_runtime().await;
        let (loaded, served) = while_serving_others(
            &runtime,
            load(&runtime, HOSTILE, COVERS, Capabilities::default(), limits()),
        )
        .await;
        let err = loaded.expect_err("the schema expands past every bound");
        let Error::InvalidSchema(ref why) = err else {
            panic!("expected an unusable schema, got {err}");
        };
        let why = why.to_string();
        assert!(
            why.contains("has over 50000 values with its $refs inlined"),
            "{why}"
        );
        assert!(served >= 2, "served before and after: {served}");
    }
}

mod bootstrap_http {
    use super::*;

    pub const COVERS: &str = "hostile_bootstrap_http.wasm";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn is_refused_at_load_naming_the_import_its_world_lacks() {
        let (runtime, _) = well_behaved_runtime().await;
        let caps = Capabilities {
            allowed_hosts: vec!["127.0.0.1".into()],
            ..Capabilities::default()
        };
        let err = load(&runtime, HOSTILE, COVERS, caps, limits())
            .await
            .expect_err("a bootstrap provider may not import wasi:http");
        let Error::ImportNotGranted {
            ref import, world, ..
        } = err
        else {
            panic!("expected an import its world does not grant, got {err}");
        };
        assert!(import.starts_with("wasi:http/"), "{import}");
        assert_eq!(world, "bootstrap-provider");
        assert!(
            err.to_string()
                .contains("it may import: capwasm:provider/log"),
            "{err}"
        );
    }
}

mod bad_results {
    use super::*;

    pub const COVERS: &str = "hostile_bad_results.wasm";

    async fn reconcile(runtime: &Runtime, mode: &str) -> Result<(), CallError> {
        let config = format!(r#"{{"mode": "{mode}"}}"#);
        let request = requests::reconcile_pool(&config, 3);
        runtime.reconcile_pool(HOSTILE, &request).await.map(|_| ())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn results_that_break_the_contract_are_refused_naming_the_rule_and_field() {
        // Memory enough to build two million addresses: the host must stop them.
        let roomy = Limits {
            memory_bytes: 64 << 20,
            ..limits()
        };
        let (runtime, metrics) = runtime_with_limits(COVERS, Capabilities::default(), roomy).await;
        let cases = [
            (
                "controlChars",
                "instances[0].providerID",
                "not printable ASCII",
            ),
            ("duplicateIds", "instances[1].id", "an instance id repeated"),
            ("longId", "instances[0].providerID", "longer than its bound"),
        ];
        let (results, served) = while_serving_others(&runtime, async {
            let mut results = Vec::new();
            for (mode, _, _) in cases {
                results.push(reconcile(&runtime, mode).await);
            }
            results
        })
        .await;
        for ((mode, field, rule), result) in cases.iter().zip(results) {
            let Err(CallError::InvalidResult {
                ref violation,
                export,
                ..
            }) = result
            else {
                panic!("{mode}: expected an invalid result, got {result:?}");
            };
            assert_eq!(export, "machine-pools.reconcile", "{mode}");
            assert_eq!(violation.field, *field, "{mode}");
            assert!(violation.rule.contains(rule), "{mode}: {violation}");
        }
        assert_eq!(
            metrics.invalid_results(HOSTILE, "machine-pools.reconcile"),
            3
        );
        assert!(served >= 2, "served before and after: {served}");
        // Results whose decoding alone would cost the host far more than
        // the output cap stop while being decoded.
        for mode in ["tooMany", "emptyAddresses"] {
            let result = reconcile(&runtime, mode).await;
            assert!(
                matches!(result, Err(CallError::OutputTooLarge { .. })),
                "{mode}: {result:?}"
            );
        }
        // The same guest, keeping to the contract, is served.
        assert!(reconcile(&runtime, "fine").await.is_ok());
    }
}

mod huge_strings {
    use super::*;

    pub const COVERS: &str = "hostile_huge_strings.wasm";

    fn assert_clean(text: &str, max: usize, what: &str) {
        // The marker `…[+N bytes]` comes on top of the bound.
        assert!(text.len() <= max + 24, "{what}: {} bytes", text.len());
        assert!(text.contains("…[+"), "{what} says it was cut: {text:?}");
        assert!(
            !text.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{what} holds raw control characters: {text:?}"
        );
        assert!(text.contains("\\u{1b}"), "{what} shows escapes: {text:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_string_is_bounded_and_escaped_before_it_leaves_the_runtime() {
        let (runtime, _) = runtime_with(COVERS, Capabilities::default()).await;
        let mut errors = Vec::new();
        for field in [
            "terminalReason",
            "terminalMessage",
            "retryMessage",
            "configPath",
        ] {
            let config = format!(r#"{{"field": "{field}"}}"#);
            let (err, _, served) = generate_hostile(&runtime, &config).await;
            assert!(served >= 2, "served before and after: {served}");
            errors.push((field, err));
        }
        for (field, err) in errors {
            let CallError::Provider { ref error, .. } = err else {
                panic!("{field}: expected the guest's own error, got {err}");
            };
            match (field, error) {
                ("terminalReason", ProviderError::Terminal(t)) => {
                    assert_clean(&t.reason, bounds::MAX_REASON_BYTES, field);
                }
                ("terminalMessage", ProviderError::Terminal(t)) => {
                    assert_clean(&t.message, bounds::MAX_MESSAGE_BYTES, field);
                }
                ("retryMessage", ProviderError::RetryAfter(r)) => {
                    assert_clean(&r.message, bounds::MAX_MESSAGE_BYTES, field);
                }
                ("configPath", ProviderError::InvalidConfig(c)) => {
                    assert_clean(&c.path, bounds::MAX_PATH_BYTES, field);
                }
                _ => panic!("{field}: unexpected {error:?}"),
            }
            // Whatever the error, its text as logs and conditions show it is bounded too.
            assert!(
                err.to_string().len() < 4096,
                "{field}: {}",
                err.to_string().len()
            );
        }
    }
}

mod http_flood {
    use std::net::SocketAddr;

    use axum::Router;
    use axum::routing::{get, post};

    use super::*;

    pub const COVERS: &str = "hostile_http_flood.wasm";

    /// [`server`], and the capabilities that let the guest reach it.
    async fn server_and_caps() -> (SocketAddr, Capabilities) {
        let addr = server().await;
        let caps = Capabilities {
            allowed_hosts: vec![addr.ip().to_string()],
            ..Capabilities::default()
        };
        (addr, caps)
    }

    /// `/ok` answers at once, `/slow` after a second, `/big` with 20 MiB,
    /// `/sink` reads what it is sent.
    async fn server() -> SocketAddr {
        let app = Router::new()
            .route("/ok", get(|| async { "ok" }))
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    "slow"
                }),
            )
            .route("/big", get(|| async { vec![b'x'; 20 << 20] }))
            .route(
                "/sink",
                post(|body: axum::body::Bytes| async move { body.len().to_string() }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }

    async fn flood(runtime: &Runtime, config: &str) -> String {
        let result = runtime
            .reconcile_pool(HOSTILE, &requests::reconcile_pool(config, 1))
            .await;
        let Err(CallError::Provider {
            error: ProviderError::Terminal(report),
            ..
        }) = result
        else {
            panic!("expected the guest's report, got {result:?}");
        };
        assert_eq!(report.reason, "FloodReport");
        // The kinds and counts; what follows `; ` is the error's own words.
        let (tally, detail) = report
            .message
            .split_once("; ")
            .unwrap_or((&report.message, ""));
        eprintln!("{tally}; {detail}");
        tally.to_owned()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_budget_refuses_with_an_error_the_guest_can_handle() {
        let (addr, caps) = server_and_caps().await;
        // Time for a thousand requests; memory for a body at the host's cap.
        let hostile_limits = Limits {
            deadline: Duration::from_secs(10),
            memory_bytes: 64 << 20,
            ..limits()
        };
        let http = hostile_limits.http;
        let (runtime, metrics) = runtime_with_limits(COVERS, caps, hostile_limits).await;
        let url = |path: &str| format!("http://{addr}{path}");

        // A thousand in a row: the call's request budget, then refusals.
        let config = format!(
            r#"{{"mode": "inARow", "url": "{}", "count": 1000}}"#,
            url("/ok")
        );
        let report = flood(&runtime, &config).await;
        assert_eq!(
            report,
            format!("ok={} refused=1 first=LimitReached", http.requests_per_call)
        );
        assert_eq!(metrics.http_refusals(HOSTILE, "requests_per_call"), 1);

        // Twenty at once: as many as may be in flight, the rest refused.
        let config = format!(
            r#"{{"mode": "atOnce", "url": "{}", "count": 20}}"#,
            url("/slow")
        );
        let report = flood(&runtime, &config).await;
        let in_flight = http.in_flight_per_call;
        assert_eq!(
            report,
            format!(
                "ok={in_flight} refused={} first=ErrorCode::ConnectionLimitReached",
                20 - in_flight
            )
        );
        assert_eq!(
            metrics.http_refusals(HOSTILE, "in_flight_per_call"),
            u64::from(20 - in_flight)
        );

        // Bodies over their caps, either way.
        let over = http.max_request_body_bytes + 1;
        let config = format!(
            r#"{{"mode": "bigRequest", "url": "{}", "bytes": {over}}}"#,
            url("/sink")
        );
        let report = flood(&runtime, &config).await;
        assert_eq!(report, "ok=0 refused=1 first=InvalidRequest");
        let config = format!(r#"{{"mode": "bigResponse", "url": "{}"}}"#, url("/big"));
        let report = flood(&runtime, &config).await;
        assert_eq!(report, "ok=0 refused=1 first=ResponseTooLarge");

        // At the cap, a body goes through.
        let at_cap = http.max_request_body_bytes;
        let config = format!(
            r#"{{"mode": "bigRequest", "url": "{}", "bytes": {at_cap}}}"#,
            url("/sink")
        );
        assert_eq!(flood(&runtime, &config).await, "ok=1 refused=0 first=none");
    }

    /// The provider's slots are shared by all its calls: a request over
    /// them waits for one (within its connect timeout) instead of being
    /// refused because other requests hold them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_over_the_providers_shared_slots_wait_for_one() {
        let (addr, caps) = server_and_caps().await;
        let shared = 2;
        let base = limits();
        let hostile_limits = Limits {
            deadline: Duration::from_secs(10),
            http: HttpLimits {
                in_flight_per_provider: shared,
                ..base.http
            },
            ..base
        };
        let count = hostile_limits.http.in_flight_per_call;
        assert!(count > shared, "more at once than the provider's slots");
        let (runtime, metrics) = runtime_with_limits(COVERS, caps, hostile_limits).await;
        // Each takes a second: three waves through two slots.
        let config =
            format!(r#"{{"mode": "atOnce", "url": "http://{addr}/slow", "count": {count}}}"#);
        let report = flood(&runtime, &config).await;
        assert_eq!(report, format!("ok={count} refused=0 first=none"));
        assert_eq!(metrics.http_refusals(HOSTILE, "in_flight_per_provider"), 0);
    }
}
