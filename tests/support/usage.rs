//! What a process and its descendants have used, from `/proc`: CPU seconds
//! and the sum of their peak resident memory. Upstream's manager runs under
//! a shell that stops it with the test, so a process's children count too.

/// CPU and memory of a process tree.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// User and system CPU seconds so far.
    pub cpu_seconds: f64,
    /// The sum of each process's peak resident memory (VmHWM), in bytes.
    pub peak_rss_bytes: u64,
}

/// The usage of `pid` and every process below it; processes gone meanwhile
/// count nothing.
pub fn of_tree(pid: u32) -> Usage {
    let mut usage = Usage::default();
    let mut pending = vec![pid];
    while let Some(pid) = pending.pop() {
        let own = of_process(pid);
        usage.cpu_seconds += own.cpu_seconds;
        usage.peak_rss_bytes += own.peak_rss_bytes;
        pending.extend(children(pid));
    }
    usage
}

/// The usage of `pid` alone.
pub fn of_process(pid: u32) -> Usage {
    Usage {
        cpu_seconds: cpu_seconds(pid).unwrap_or(0.0),
        peak_rss_bytes: peak_rss_bytes(pid).unwrap_or(0),
    }
}

/// utime + stime of `/proc/<pid>/stat`, in clock ticks of 1/100 s (Linux's
/// USER_HZ everywhere but some exotic builds).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may hold spaces, in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    // utime and stime are fields 14 and 15; 12 and 13 after the name and state.
    let total = ticks(11)? + ticks(12)?;
    Some(std::time::Duration::from_millis(total * 10).as_secs_f64())
}

fn peak_rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// How many sockets `pid` holds open now (its connections, each an
/// HTTP/1.1 request in flight or a pooled idle connection, and listeners).
pub fn sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |fds| {
        fds.filter_map(Result::ok)
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .filter(|target| target.to_string_lossy().starts_with("socket:"))
            .count()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_counts_its_children_and_the_cpu_it_used() {
        // Some CPU of our own: a tick is 10 ms.
        let spin = std::time::Instant::now();
        while cpu_seconds(std::process::id()).unwrap_or(0.0) < 0.02 {
            assert!(spin.elapsed().as_secs() < 10, "no CPU time counted");
        }
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(children(std::process::id()).contains(&child.id()));
        // Its memory is its own once it has become `sleep` (exec starts afresh).
        let comm = format!("/proc/{}/comm", child.id());
        while std::fs::read_to_string(&comm).unwrap_or_default().trim() != "sleep" {
            assert!(spin.elapsed().as_secs() < 10, "the child never ran sleep");
            std::thread::yield_now();
        }
        // Peaks only grow: the tree's, read last, is at least the sum.
        let own = peak_rss_bytes(std::process::id()).unwrap();
        let childs = peak_rss_bytes(child.id()).unwrap();
        let tree = of_tree(std::process::id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(tree.cpu_seconds >= 0.02);
        assert!(tree.peak_rss_bytes >= own + childs, "{tree:?}");
    }
}
