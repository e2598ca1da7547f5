//! Whether bootstrap data would make a machine join its cluster.
//!
//! A cloud does not read user data: it boots the machine with whatever it
//! was given, and a machine whose cloud-init, Ignition or script cannot run
//! simply never registers a Node. So unusable data does not fail the API
//! call; the instance boots and ends `failed`, which is how a MachinePool
//! controller sees the same fault on a real cloud.

use super::api::BootstrapFormat;

/// Why a machine booted with some bootstrap data would never join.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JoinFailure {
    /// No data at all: the machine boots an empty image.
    #[error("the bootstrap data is empty")]
    Empty,
    /// cloud-init ignores user data without the `#cloud-config` header.
    #[error("cloud-config bootstrap data does not start with #cloud-config")]
    NotCloudConfig,
    /// The script has no interpreter line, so it cannot be executed.
    #[error("shell-script bootstrap data does not start with #!")]
    NotShellScript,
    /// Ignition refuses a config it cannot parse or whose version it does not know.
    #[error("ignition bootstrap data is not a JSON object with a string ignition.version")]
    NotIgnition,
}

/// Checks `data` the way the machine's first-boot agent would.
pub(crate) fn check(format: BootstrapFormat, data: &[u8]) -> Result<(), JoinFailure> {
    if data.iter().all(u8::is_ascii_whitespace) {
        return Err(JoinFailure::Empty);
    }
    match format {
        BootstrapFormat::CloudConfig if !data.starts_with(b"#cloud-config") => {
            Err(JoinFailure::NotCloudConfig)
        }
        BootstrapFormat::ShellScript if !data.starts_with(b"#!") => {
            Err(JoinFailure::NotShellScript)
        }
        BootstrapFormat::Ignition => {
            let config: serde_json::Value =
                serde_json::from_slice(data).map_err(|_| JoinFailure::NotIgnition)?;
            if config["ignition"]["version"].is_string() {
                Ok(())
            } else {
                Err(JoinFailure::NotIgnition)
            }
        }
        BootstrapFormat::CloudConfig | BootstrapFormat::ShellScript => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_accepts_data_each_agent_runs() {
        let cases: [(BootstrapFormat, &[u8]); 3] = [
            (
                BootstrapFormat::CloudConfig,
                b"#cloud-config\nruncmd: [kubeadm join]\n",
            ),
            (BootstrapFormat::ShellScript, b"#!/bin/sh\nkubeadm join\n"),
            (
                BootstrapFormat::Ignition,
                br#"{"ignition": {"version": "3.4.0"}}"#,
            ),
        ];
        for (format, data) in cases {
            assert_eq!(check(format, data), Ok(()), "{format:?}");
        }
    }

    #[test]
    fn check_names_why_a_node_would_not_join() {
        let cases: [(BootstrapFormat, &[u8], JoinFailure); 7] = [
            (BootstrapFormat::CloudConfig, b"", JoinFailure::Empty),
            (BootstrapFormat::ShellScript, b" \n\t", JoinFailure::Empty),
            (
                BootstrapFormat::CloudConfig,
                b"runcmd: [kubeadm join]\n",
                JoinFailure::NotCloudConfig,
            ),
            (
                BootstrapFormat::CloudConfig,
                b" #cloud-config\n",
                JoinFailure::NotCloudConfig,
            ),
            (
                BootstrapFormat::ShellScript,
                b"kubeadm join\n",
                JoinFailure::NotShellScript,
            ),
            (
                BootstrapFormat::Ignition,
                b"#cloud-config\n",
                JoinFailure::NotIgnition,
            ),
            (
                BootstrapFormat::Ignition,
                br#"{"ignition": {}}"#,
                JoinFailure::NotIgnition,
            ),
        ];
        for (format, data, failure) in cases {
            assert_eq!(
                check(format, data),
                Err(failure),
                "{format:?} {:?}",
                String::from_utf8_lossy(data)
            );
        }
    }
}
