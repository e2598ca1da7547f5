//! What the binary's tests share: running `capwasm` as a user would, the
//! built components and the example fixtures, and reading what it printed.
// Each test binary uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_capwasm");
/// Generous: a Python or JavaScript component not yet in the precompiled
/// cache takes about 30 s to compile on an idle 2-core machine, and more
/// while other work holds a core.
pub const WAIT: Duration = Duration::from_secs(180);

pub fn guest(file: &str) -> PathBuf {
    let dir = std::env::var_os("CAPWASM_GUESTS_DIR").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../guests/target/wasm32-wasip2/release"
            ))
        },
        PathBuf::from,
    );
    let path = dir.join(file);
    assert!(
        path.exists(),
        "{} is missing: run `make guests`",
        path.display()
    );
    path
}

pub fn example(file: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/requests"
    ))
    .join(file)
}

/// Runs `capwasm args...` to completion, within [`WAIT`], logging warnings and errors.
pub async fn capwasm<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut command = tokio::process::Command::new(BIN);
    command.args(args).env("RUST_LOG", "warn");
    finish(command).await
}

/// Runs `capwasm args...` as [`capwasm`] does, with the log level a user gets by default.
pub async fn capwasm_default_log(args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(BIN);
    command.args(args).env_remove("RUST_LOG");
    finish(command).await
}

pub async fn finish(mut command: tokio::process::Command) -> Output {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("capwasm starts");
    tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("capwasm finishes in time")
        .expect("capwasm's output is read")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The exit code, with everything printed if it is not `expected`.
#[track_caller]
pub fn assert_exit(output: &Output, expected: i32) {
    assert_eq!(
        output.status.code(),
        Some(expected),
        "stdout:\n{}\nstderr:\n{}",
        stdout(output),
        stderr(output)
    );
}

/// The single line on stderr.
#[track_caller]
pub fn one_line(output: &Output) -> String {
    let text = stderr(output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr, got:\n{text}");
    lines[0].to_owned()
}

pub fn json_stdout(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", stdout(output)))
}

/// `fixture` with its `request.config.endpoint` pointing at `endpoint`, in `dir`.
pub fn fixture_for(dir: &Path, fixture: &str, endpoint: &str) -> PathBuf {
    let mut value: Value =
        serde_json::from_str(&std::fs::read_to_string(example(fixture)).expect("example exists"))
            .expect("example is JSON");
    value["request"]["config"]["endpoint"] = Value::String(endpoint.to_owned());
    let path = dir.join(fixture);
    std::fs::write(&path, value.to_string()).expect("fixture written");
    path
}

pub async fn provider_test(component: &str, fixture: &Path, extra: &[&str]) -> Output {
    let component = guest(component);
    let mut args = vec![
        "provider".as_ref(),
        "test".as_ref(),
        component.as_os_str(),
        "--input".as_ref(),
        fixture.as_os_str(),
    ];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    capwasm(args).await
}
