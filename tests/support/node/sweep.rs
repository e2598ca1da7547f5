//! Removing what a node leaves behind: its processes (a killed test run
//! never stops them, and Pods outlive the kubelet and containerd anyway),
//! their mounts, cgroups, network namespaces and directories. The kubelet and
//! containerd write outside any directory of a test's own, so this runs
//! before a node starts and after it stops.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::mount::{MntFlags, umount2};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::network;

/// Where the node keeps its files, and its runtime state and sockets.
pub const ROOT: &str = "/var/lib/capwasm-node";
pub const STATE: &str = "/run/capwasm-node";
/// Pod cgroups, under every cgroup v1 hierarchy (the kubelet's default root).
const POD_CGROUP: &str = "kubepods";
/// How long killed processes get to disappear before the mounts go.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// Kills every process of the node, unmounts, removes cgroups, the network
/// namespace and the directories. Best effort; what cannot go now goes next
/// time.
pub fn all() {
    kill_node_processes();
    unmount_under(&[Path::new(ROOT), Path::new(STATE), Path::new("/run/netns")]);
    remove_pod_cgroups();
    network::delete();
    let _ = std::fs::remove_dir_all(STATE);
    let _ = std::fs::remove_dir_all(ROOT);
}

/// Processes in the node's network namespace, in a Pod's cgroup, or
/// naming the node's state directory (the containerd shims).
#[expect(
    clippy::disallowed_methods,
    reason = "runs in Drop, outside any runtime: polls /proc until the killed processes are gone"
)]
fn kill_node_processes() {
    let namespace = std::fs::metadata(network::NAMESPACE_PATH)
        .ok()
        .map(|m| (m.dev(), m.ino()));
    let started = Instant::now();
    loop {
        let victims: Vec<i32> = pids().filter(|pid| belongs(*pid, namespace)).collect();
        if victims.is_empty() || started.elapsed() > KILL_WAIT {
            return;
        }
        for pid in victims {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn pids() -> impl Iterator<Item = i32> {
    let own = i32::try_from(std::process::id()).unwrap_or(0);
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(move |pid| *pid != own && *pid > 1)
}

fn belongs(pid: i32, namespace: Option<(u64, u64)>) -> bool {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    if let (Some(namespace), Ok(net)) = (namespace, std::fs::metadata(proc.join("ns/net")))
        && (net.dev(), net.ino()) == namespace
    {
        return true;
    }
    let in_pod = std::fs::read_to_string(proc.join("cgroup")).is_ok_and(|cgroups| {
        cgroups
            .lines()
            .filter_map(|line| line.splitn(3, ':').nth(2))
            .any(|path| path.starts_with(&format!("/{POD_CGROUP}")))
    });
    in_pod
        || std::fs::read(proc.join("cmdline")).is_ok_and(|cmdline| {
            cmdline
                .split(|b| *b == 0)
                .any(|arg| arg.starts_with(STATE.as_bytes()))
        })
}

/// Unmounts everything at or below `roots`, deepest first, detached so a
/// busy mount goes as soon as it is free. Only `cni-*` entries of
/// `/run/netns`: the Pods' namespaces, never others'.
fn unmount_under(roots: &[&Path]) {
    let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut points: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|point| PathBuf::from(point.replace("\\040", " ")))
        .filter(|point| {
            roots.iter().any(|root| {
                point.starts_with(root)
                    && (*root != Path::new("/run/netns")
                        || point
                            .file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("cni-")))
            })
        })
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for point in points {
        let _ = umount2(&point, MntFlags::MNT_DETACH);
        if point.starts_with("/run/netns") {
            let _ = std::fs::remove_file(&point);
        }
    }
}

fn remove_pod_cgroups() {
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for hierarchy in hierarchies.flatten() {
        remove_tree(&hierarchy.path().join(POD_CGROUP));
    }
}

/// cgroup directories go with rmdir, children first.
fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}
