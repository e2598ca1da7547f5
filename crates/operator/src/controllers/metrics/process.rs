//! `process_*`: the process's CPU time, memory, file descriptors and start
//! time, read from `/proc/self` at each scrape, under the names the
//! Prometheus client libraries give them (client_golang's process
//! collector, which every controller-runtime operator exports). Where
//! there is no `/proc`, nothing.

// Ticks, bytes and counts far below 2^52; Prometheus holds every value as an f64.
#![allow(clippy::cast_precision_loss)]

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// The kernel's clock ticks per second in `/proc` (USER_HZ, 100 on every
/// architecture Linux runs on; procfs assumes the same).
const USER_HZ: f64 = 100.0;

/// Reads `/proc/self` when scraped.
#[derive(Debug, Default)]
pub(super) struct Process;

/// What one read of `/proc/self` found.
#[derive(Debug, Default, PartialEq)]
struct Figures {
    cpu_seconds: Option<f64>,
    start_time_seconds: Option<f64>,
    resident_bytes: Option<f64>,
    virtual_bytes: Option<f64>,
    open_fds: Option<f64>,
    max_fds: Option<f64>,
}

impl Figures {
    fn read() -> Self {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let stat = read("/proc/self/stat").and_then(|s| Stat::parse(&s));
        let boot = read("/proc/stat").and_then(|s| boot_time(&s));
        let status = read("/proc/self/status").unwrap_or_default();
        Self {
            cpu_seconds: stat.as_ref().map(|s| s.cpu_ticks as f64 / USER_HZ),
            start_time_seconds: stat
                .as_ref()
                .zip(boot)
                .map(|(s, boot)| boot as f64 + s.start_ticks as f64 / USER_HZ),
            resident_bytes: status_bytes(&status, "VmRSS:"),
            virtual_bytes: status_bytes(&status, "VmSize:"),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|entries| entries.count() as f64),
            max_fds: read("/proc/self/limits").and_then(|l| open_files_limit(&l)),
        }
    }
}

/// The fields of `/proc/self/stat` used here.
#[derive(Debug, PartialEq)]
struct Stat {
    /// utime + stime.
    cpu_ticks: u64,
    /// When the process started, in ticks after boot.
    start_ticks: u64,
}

impl Stat {
    fn parse(stat: &str) -> Option<Self> {
        // The command name (field 2) is in parentheses and may hold spaces
        // and parentheses itself: the fields are counted after the last `)`.
        let (_, rest) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // `fields[0]` is field 3 (state): field n is `fields[n - 3]`.
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(Self {
            cpu_ticks: field(14)? + field(15)?,
            start_ticks: field(22)?,
        })
    }
}

/// Seconds since the epoch when the machine booted (`btime` in `/proc/stat`).
fn boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// A `kB` line of `/proc/self/status`, in bytes.
fn status_bytes(status: &str, field: &str) -> Option<f64> {
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some((kib * 1024) as f64)
}

/// The soft limit of open files in `/proc/self/limits`.
fn open_files_limit(limits: &str) -> Option<f64> {
    let line = limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))?;
    let soft = line.split_whitespace().next()?;
    // "unlimited" is as client_golang reports it: the largest value.
    Some(soft.parse::<u64>().map_or(u64::MAX as f64, |v| v as f64))
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let figures = Figures::read();
        if let Some(seconds) = figures.cpu_seconds {
            let counter = ConstCounter::new(seconds);
            counter.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                counter.metric_type(),
            )?)?;
        }
        let gauges = [
            (
                "process_open_fds",
                "Number of open file descriptors.",
                figures.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                figures.max_fds,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                figures.virtual_bytes,
            ),
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                figures.resident_bytes,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                figures.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(value) = value {
                let gauge: ConstGauge<f64> = ConstGauge::new(value);
                gauge.encode(encoder.encode_descriptor(
                    name,
                    help,
                    None,
                    gauge.metric_type(),
                )?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (tokio (rt) x) S 1 4242 4242 0 -1 4194304 1000 0 0 0 250 50 0 0 20 0 12 0 98765 1234567 890 18446744073709551615";
        assert_eq!(
            Stat::parse(stat),
            Some(Stat {
                cpu_ticks: 300,
                start_ticks: 98765,
            })
        );
        assert_eq!(Stat::parse("4242 (truncated"), None);
    }

    #[test]
    fn limits_and_status_are_read_in_bytes_and_counts() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1048576              1048576              files     \n";
        assert_eq!(open_files_limit(limits), Some(1_048_576.0));
        let status = "Name:\tcapwasm\nVmSize:\t  123456 kB\nVmRSS:\t    2048 kB\n";
        assert_eq!(status_bytes(status, "VmRSS:"), Some(2048.0 * 1024.0));
        assert_eq!(status_bytes(status, "VmSize:"), Some(123_456.0 * 1024.0));
        assert_eq!(
            boot_time("cpu 1 2 3\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_every_figure() {
        let figures = Figures::read();
        assert!(figures.cpu_seconds.is_some_and(|s| s >= 0.0), "{figures:?}");
        assert!(
            figures.resident_bytes.is_some_and(|b| b > 1e6),
            "{figures:?}"
        );
        assert!(figures.open_fds.is_some_and(|n| n >= 3.0), "{figures:?}");
        assert!(figures.max_fds.is_some_and(|n| n >= 3.0), "{figures:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // Started before now, and not before yesterday.
        assert!(
            figures
                .start_time_seconds
                .is_some_and(|t| t <= now + 1.0 && t > now - 86_400.0),
            "{figures:?}"
        );
    }
}
