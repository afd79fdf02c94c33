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

    /// Makes v1 `pids` and `memory` groups for the limits that are set, where possible.
    /// Returns the groups made and the limits that could not be placed in one.
    pub fn create(limits: &Limits) -> (Self, Vec<&'static str>) {
        let mut groups = RunCgroups::default();
        let mut missed = Vec::new();
        let name = format!("cordon-{}", std::process::id());
        let wanted = [
            ("pids", "pids.max", limits.max_processes, "max-processes"),
            (
                "memory",
                "memory.limit_in_bytes",
                limits.memory_bytes,
                "memory",
            ),
        ];
        // The CPU share is a quota per scheduling period: N thousandths of a CPU are N × 100
        // microseconds of every 100 ms.
        let cpu_quota = limits.cpu_millis.map(|m| m.saturating_mul(100));
        let wanted = wanted
            .into_iter()
            .chain([("cpu", "cpu.cfs_quota_us", cpu_quota, "cpus")]);
        for (controller, file, value, what) in wanted {
            let Some(value) = value else { continue };
            let dir = Path::new("/sys/fs/cgroup").join(controller).join(&name);
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

impl Drop for RunCgroups {
    fn drop(&mut self) {
        for d in &self.dirs {
            // Only empty groups can be removed, and the kernel lets go of the last process a
            // moment after it has been reaped: retry in short steps, for half a second at most.
            for _ in 0..500 {
                if std::fs::remove_dir(d).is_ok() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
    }
}
