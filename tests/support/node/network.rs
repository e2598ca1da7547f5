//! The node's network: a namespace of its own joined to this machine's by
//! one veth pair of two private addresses. Everything the node serves lives
//! inside it; what the tests serve to its Pods binds the host end.

use std::net::Ipv4Addr;
use std::process::Command;

use crate::{Error, Result};

/// The network namespace every node process runs in.
pub const NAMESPACE: &str = "capwasm-node";
/// Its path, for `nsenter --net=`.
pub const NAMESPACE_PATH: &str = "/run/netns/capwasm-node";
/// The node's address (its end of the veth pair).
pub const NODE_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 231, 0, 2);
/// This machine's end: the tests' own servers bind it to be reachable from Pods.
pub const HOST_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 231, 0, 1);
/// The Pods' addresses, on the CNI bridge inside the namespace.
pub const POD_SUBNET: &str = "10.232.0.0/24";
/// Service ClusterIPs; the `kubernetes` Service takes the first.
pub const SERVICE_SUBNET: &str = "10.233.0.0/24";
/// The `kubernetes` Service's ClusterIP.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 233, 0, 1);
const HOST_LINK: &str = "cwnode0";

/// Creates the namespace, the veth pair and their addresses, loopback, and
/// forwarding inside the namespace (Pods reach Services and the host end).
/// No default route: nothing in the node reaches past this machine.
pub fn create() -> Result<()> {
    let node = NODE_ADDRESS.to_string();
    let host = HOST_ADDRESS.to_string();
    ip(&["netns", "add", NAMESPACE])?;
    ip(&[
        "link", "add", HOST_LINK, "type", "veth", "peer", "name", "eth0", "netns", NAMESPACE,
    ])?;
    ip(&["addr", "add", &format!("{host}/30"), "dev", HOST_LINK])?;
    ip(&["link", "set", HOST_LINK, "up"])?;
    ip(&[
        "-n",
        NAMESPACE,
        "addr",
        "add",
        &format!("{node}/30"),
        "dev",
        "eth0",
    ])?;
    ip(&["-n", NAMESPACE, "link", "set", "eth0", "up"])?;
    ip(&["-n", NAMESPACE, "link", "set", "lo", "up"])?;
    run(
        "sysctl",
        Command::new("nsenter")
            .arg(format!("--net={NAMESPACE_PATH}"))
            .args(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]),
    )
}

/// Deletes the namespace (and with it the veth pair). Best effort.
pub fn delete() {
    let _ = Command::new("ip").args(["link", "del", HOST_LINK]).output();
    let _ = Command::new("ip")
        .args(["netns", "del", NAMESPACE])
        .output();
}

fn ip(args: &[&str]) -> Result<()> {
    run("ip", Command::new("ip").args(args))
}

fn run(what: &str, command: &mut Command) -> Result<()> {
    let output = command
        .output()
        .map_err(|e| Error::Node(format!("{what}: {e}")))?;
    if output.status.success() {
        return Ok(());
    }
    Err(Error::Node(format!(
        "{what} {:?} failed ({}): {}",
        command.get_args().collect::<Vec<_>>(),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}
