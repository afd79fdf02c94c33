//! Control groups for a run's limits, where the caller may make them (root, cgroup v1):
//! processes, memory and CPU share for the whole sandbox.
//!
//! Without them, limits are rlimits, which hold per process (memory) or per user namespace
//! (processes, and not at all for root); `cordon doctor` and the run say which applies.

use std::path::{Path, PathBuf};

use crate::Limits;

/// A run's own control groups; removed when dropped (they are empty by then: the PID
/// namespace ended with the run).
#[derive(Debug, Default)]
pub struct RunCgroups {
    dirs: Vec<PathBuf>,
}

impl RunCgroups {
    /// The `cgroup.procs` files the sandbox should join.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// Whether the kernel killed a process of the run for going over its memory limit: the
    /// `oom_kill` count of the run's v1 `memory` group. Read before the groups are dropped.
    pub fn memory_killed(&self) -> bool {
        self.dirs
            .iter()
            .filter(|d| d.parent().is_some_and(|p| p.ends_with("memory")))
            .filter_map(|d| std::fs::read_to_string(d.join("memory.oom_control")).ok())
            .any(|text| {
                text.lines().any(|l| {
                    l.strip_prefix("oom_kill ")
                        .and_then(|n| n.trim().parse::<u64>().ok())
                        .is_some_and(|n| n > 0)
                })
            })
    }

    /// Makes v1 `pids`, `memory` and `cpu` groups for the limits that are set, where
    /// possible. Returns the groups made and the limits that could not be placed in one.
    pub fn create(limits: &Limits) -> (Self, Vec<&'static str>) {
        let mut groups = RunCgroups::default();
        let mut missed = Vec::new();
        // The process id keeps concurrent runs apart; the time keeps a reused id from
        // meeting a group left behind (see `Drop`).
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!("{PREFIX}{}-{stamp:x}", std::process::id());
        // The CPU share is a quota per scheduling period: N thousandths of a CPU are N × 100
        // microseconds of every 100 ms.
        let cpu_quota = limits.cpu_millis.map(|m| m.saturating_mul(100));
        let wanted = [
            ("pids", "pids.max", limits.max_processes, "max-processes"),
            (
                "memory",
                "memory.limit_in_bytes",
                limits.memory_bytes,
                "memory",
            ),
            ("cpu", "cpu.cfs_quota_us", cpu_quota, "cpus"),
        ];
        for (controller, file, value, what) in wanted {
            let Some(value) = value else { continue };
            let parent = Path::new("/sys/fs/cgroup").join(controller);
            remove_abandoned(&parent);
            let dir = parent.join(&name);
            let made = std::fs::create_dir(&dir).and_then(|()| {
                if controller == "cpu" {
                    std::fs::write(dir.join("cpu.cfs_period_us"), "100000")?;
                }
                std::fs::write(dir.join(file), value.to_string())
            });
            match made {
                Ok(()) => groups.dirs.push(dir),
                Err(_) => {
                    let _ = std::fs::remove_dir(&dir);
                    missed.push(what);
                }
            }
        }
        (groups, missed)
    }
}

const PREFIX: &str = "cordon-";

/// Removes the groups of earlier runs that could not be removed when they ended (the kernel
/// lets go of a group a moment after its last process is reaped): those whose cordon is
/// gone. Only empty groups can be removed, so a live run's is never touched.
fn remove_abandoned(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

impl Drop for RunCgroups {
    fn drop(&mut self) {
        // One try each: a group the kernel still holds is removed by the next run instead of
        // making this one wait.
        for d in &self.dirs {
            let _ = std::fs::remove_dir(d);
        }
    }
}
