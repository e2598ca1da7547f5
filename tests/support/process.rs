//! A control-plane child process: its own process group, output to a log
//! file, and a stdin pipe whose closing tells it to exit.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::{Error, Result};

/// How long a process gets to exit after its stdin closes and it is sent
/// SIGTERM, before its whole group is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

pub(crate) struct Process {
    name: &'static str,
    child: Option<Child>,
    /// Held open for the child's whole life: its closing (drop, panic, or the
    /// kernel reaping a killed test process) makes the wrapper main exit.
    stdin: Option<ChildStdin>,
    log: PathBuf,
}

impl Process {
    /// One of the wrapper mains under `tests/controlplane/`, which exit
    /// when their stdin closes.
    pub fn spawn(name: &'static str, binary: &Path, args: &[String], log: PathBuf) -> Result<Self> {
        let mut command = Command::new(binary);
        command.args(args).env("CAPWASM_EXIT_ON_STDIN_EOF", "1");
        Self::spawn_command(name, binary, command, log)
    }

    /// A program that does not watch its stdin, run by a shell that
    /// SIGTERMs it when the pipe closes, so that it too dies with the test
    /// process.
    pub fn spawn_exiting_with_stdin(
        name: &'static str,
        binary: &Path,
        args: &[String],
        env: &[(&str, &str)],
        log: PathBuf,
    ) -> Result<Self> {
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(r#""$0" "$@" </dev/null & child=$!; cat >/dev/null; kill -TERM "$child" 2>/dev/null; wait "$child""#)
            .arg(binary)
            .args(args)
            .envs(env.iter().copied());
        Self::spawn_command(name, binary, command, log)
    }

    fn spawn_command(
        name: &'static str,
        binary: &Path,
        mut command: Command,
        log: PathBuf,
    ) -> Result<Self> {
        let io_error = |source| Error::Io {
            path: log.clone(),
            source,
        };
        let out = File::create(&log).map_err(io_error)?;
        let err = out.try_clone().map_err(io_error)?;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(err)
            // Own group: stop reaches anything it forks; Ctrl-C in a terminal does not, stdin EOF does.
            .process_group(0)
            .spawn()
            .map_err(|source| Error::Spawn {
                name,
                binary: binary.to_path_buf(),
                source,
            })?;
        let stdin = child.stdin.take();
        Ok(Self {
            name,
            child: Some(child),
            stdin,
            log,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The exit status if the process has already ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// An error carrying the last lines of this process's log.
    pub fn not_ready(&self, reason: String) -> Error {
        Error::NotReady {
            name: self.name,
            reason,
            log: self.log.clone(),
            tail: log_tail(&self.log, 40),
        }
    }

    /// Ends the process: close stdin, SIGTERM the group, wait, SIGKILL the
    /// group after [`STOP_GRACE`]. Idempotent.
    pub fn stop(&mut self) {
        drop(self.stdin.take());
        let Some(mut child) = self.child.take() else {
            return;
        };
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        let group = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        let _ = killpg(group, Signal::SIGTERM);
        // Wait on a thread so the grace period is a timeout, not a poll.
        let (done, exited) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _ = child.wait();
            let _ = done.send(());
        });
        if exited.recv_timeout(STOP_GRACE).is_err() {
            tracing::warn!(
                name = self.name,
                "did not stop within {STOP_GRACE:?}; killing its process group"
            );
            let _ = killpg(group, Signal::SIGKILL);
        }
        let _ = waiter.join();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether `pid` is a live (not zombie) process.
pub fn is_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the parenthesised command name, which may itself hold spaces.
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// The last `lines` lines of a log file (reads at most the last 64 KiB).
fn log_tail(path: &Path, lines: usize) -> String {
    let mut text = String::new();
    if let Ok(mut file) = File::open(path) {
        let len = file.metadata().map_or(0, |m| m.len());
        let _ = file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
        let mut bytes = Vec::new();
        let _ = file.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
