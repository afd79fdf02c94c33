//! What this machine offers the sandbox, each mechanism with why it is missing and the fix.

use serde::Serialize;

use super::sys;

/// One mechanism the sandbox relies on.
#[derive(Debug, Clone, Serialize)]
pub struct Mechanism {
    pub name: &'static str,
    pub available: bool,
    /// What was found: a version, a reason.
    pub detail: String,
    /// How to get it, when it is missing.
    pub fix: Option<String>,
    /// cordon cannot run its sandbox without it.
    pub required: bool,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

pub fn probe() -> Vec<Mechanism> {
    let mut out = Vec::new();
    let landlock = sys::landlock_abi();

    let apparmor = read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
    let (available, detail) = match sys::can_create_user_namespace() {
        Ok(true) => (true, "unprivileged user namespaces work".to_string()),
        Ok(false) => (false, "creating a user namespace was refused".to_string()),
        Err(e) => (false, format!("could not test: {e}")),
    };
    let fix = (!available).then(|| match apparmor.as_deref() {
        Some("1") => "AppArmor restricts them (Ubuntu 24.04): sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0".to_string(),
        _ => match read("/proc/sys/user/max_user_namespaces").as_deref() {
            Some("0") => "they are switched off: sudo sysctl user.max_user_namespaces=15000".to_string(),
            _ => "inside Docker, run the container with --security-opt seccomp=unconfined (or use --backend docker for the whole agent)".to_string(),
        },
    });
    let userns = available;
    let detail = if available || landlock.is_err() {
        detail
    } else {
        format!("{detail}; cordon falls back to Landlock and seccomp alone, which is weaker")
    };
    out.push(Mechanism {
        name: "user namespaces",
        available,
        detail,
        fix,
        // Without them cordon still confines commands with Landlock, more weakly.
        required: landlock.is_err(),
    });

    let (available, detail) = match landlock {
        Ok(v) => (
            true,
            format!(
                "ABI {v}{}",
                if v >= 4 {
                    " (file and TCP rules)"
                } else {
                    " (file rules)"
                }
            ),
        ),
        Err(e) => (false, format!("not available: {e}")),
    };
    let fix = (!available).then(|| {
        "needs Linux 5.13+ with Landlock enabled (add `landlock` to the lsm= boot parameter)"
            .to_string()
    });
    out.push(Mechanism {
        name: "Landlock",
        available,
        detail,
        fix,
        // The only wall left without namespaces.
        required: !userns,
    });

    let available = sys::seccomp_available();
    out.push(Mechanism {
        name: "seccomp",
        available,
        detail: if available {
            "filters can be installed".into()
        } else {
            "the kernel has no seccomp".into()
        },
        fix: (!available).then(|| "needs a kernel built with CONFIG_SECCOMP_FILTER".to_string()),
        required: true,
    });

    let available = super::supervise::available(userns);
    out.push(Mechanism {
        name: "Unix sockets",
        available,
        detail: if available {
            "with --allow-unix-socket, the sandbox settles every connect: only the allowed sockets and the command's own are reachable".into()
        } else {
            "with --allow-unix-socket, host sockets bound during the run, renamed, or named relative to a directory stay reachable (the run says so)".into()
        },
        fix: (!available).then(|| {
            "needs Linux 5.6+ (seccomp user notification and pidfd_getfd) and Yama's ptrace_scope below 3 (below 2 without user namespaces)".to_string()
        }),
        required: false,
    });

    let v2 = read("/sys/fs/cgroup/cgroup.controllers");
    let v1: Vec<&str> = ["memory", "pids", "cpu"]
        .into_iter()
        .filter(|c| std::path::Path::new("/sys/fs/cgroup").join(c).is_dir())
        .collect();
    let detail = match (&v2, v1.is_empty()) {
        (Some(c), _) if !c.is_empty() => format!("cgroup v2 controllers: {c}"),
        (_, false) => format!("cgroup v1 hierarchies: {}", v1.join(", ")),
        _ => "no cgroup controllers found".to_string(),
    };
    out.push(Mechanism {
        name: "cgroups",
        available: v2.is_some_and(|c| !c.is_empty()) || !v1.is_empty(),
        detail: format!(
            "{detail} (cordon makes per-run groups for --max-processes, --memory and --cpus only as root on cgroup v1; otherwise rlimits apply per process)"
        ),
        fix: None,
        required: false,
    });
    out
}
