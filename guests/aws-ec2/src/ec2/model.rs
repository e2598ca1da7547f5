//! EC2 resources as the provider needs them, reduced from EC2's answers.

use capwasm_provider_sdk::prelude::*;

/// One page of a Describe call's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// The token of the next page; `None` on the last.
    pub next_token: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vpc {
    pub id: String,
    pub cidr: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subnet {
    pub id: String,
    pub zone: String,
    pub cidr: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecurityGroup {
    pub id: String,
    /// Its ingress rules, one source each.
    pub ingress: Vec<Rule>,
}

/// One ingress rule: protocol, ports and a single source. EC2 groups
/// rules by protocol and ports; one source each makes them comparable.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rule {
    /// `tcp`, `udp`, `icmp`, a protocol number, or `-1` for all.
    pub protocol: String,
    /// From and to port; `None` for all protocols.
    pub ports: Option<(i32, i32)>,
    pub source: Source,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Cidr(String),
    Ipv6Cidr(String),
    Group(String),
    PrefixList(String),
}

/// The protocol EC2 names `-1`: every protocol, every port.
pub const ALL_PROTOCOLS: &str = "-1";

impl Rule {
    pub fn tcp(port: u16, source: Source) -> Self {
        Self {
            protocol: "tcp".to_owned(),
            ports: Some((i32::from(port), i32::from(port))),
            source,
        }
    }

    pub fn all(source: Source) -> Self {
        Self {
            protocol: ALL_PROTOCOLS.to_owned(),
            ports: None,
            source,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub id: String,
    /// EC2's state name: pending, running, shutting-down, terminated,
    /// stopping, stopped.
    pub state: String,
    pub zone: Option<String>,
    pub private_ip: Option<String>,
    pub public_ip: Option<String>,
    pub private_dns: Option<String>,
    pub public_dns: Option<String>,
    pub tags: Vec<(String, String)>,
}

impl Instance {
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub id: String,
    /// pending, available, invalid, deregistered, transient, failed, error.
    pub state: String,
    /// What it runs on: `i386`, `x86_64`, `arm64`, `x86_64_mac`, `arm64_mac`.
    pub architecture: Option<String>,
}

/// What an instance type offers, as `DescribeInstanceTypes` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceType {
    pub name: String,
    pub default_vcpus: u32,
    pub memory_mib: u64,
    /// EC2's names, in its order: `i386`, `x86_64`, `arm64`, `x86_64_mac`,
    /// `arm64_mac`.
    pub architectures: Vec<String>,
    pub gpus: Vec<Gpu>,
}

/// One kind of accelerator an instance type has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    pub manufacturer: String,
    pub count: u32,
}
