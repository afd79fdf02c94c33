//! Landlock: the file (and, without a network namespace, TCP) rules the kernel enforces on the
//! command itself. With namespaces it is the second wall behind the mount view; without them
//! it is the only one.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

/// The newest ABI cordon was written and tested against; newer rights are not asked for.
const TARGET: ABI = ABI::V7;

/// Devices a command may write: the harmless ones and terminals. Never block devices, even
/// where the host's `/dev` is visible.
const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// What the command may read.
pub(super) enum Reads {
    /// Everything (the mount view hides what must be hidden).
    Everything,
    /// Only beneath `read`; in `list`, names can be listed but not read.
    Beneath {
        read: Vec<PathBuf>,
        list: Vec<PathBuf>,
    },
}

pub(super) struct Walls<'a> {
    pub reads: Reads,
    pub writable: Vec<&'a Path>,
    /// No TCP connect or bind at all (there is no network namespace to contain it).
    pub deny_tcp: bool,
}

/// How much of what was asked the kernel enforces.
pub(super) struct Enforced {
    /// No file rule at all: Landlock is missing or disabled.
    pub none: bool,
    /// Some rights (or the TCP rules, or the scopes) are missing on this kernel.
    pub partly: bool,
}

pub(super) fn restrict(walls: &Walls) -> Result<Enforced, String> {
    let err = |e: landlock::RulesetError| e.to_string();
    let path_fd = |p: &Path| PathFd::new(p).map_err(|e| format!("landlock: {}: {e}", p.display()));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET))
        .map_err(err)?;
    if walls.deny_tcp {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TARGET))
            .map_err(err)?;
    }
    let mut created = ruleset
        .scope(Scope::from_all(TARGET))
        .map_err(err)?
        .create()
        .map_err(err)?;
    let read = AccessFs::from_read(TARGET);
    match &walls.reads {
        Reads::Everything => {
            created = created
                .add_rule(PathBeneath::new(path_fd(Path::new("/"))?, read))
                .map_err(err)?;
        }
        Reads::Beneath { read: paths, list } => {
            let listing = paths
                .iter()
                .map(|p| (p, read))
                .chain(list.iter().map(|p| (p, BitFlags::from(AccessFs::ReadDir))));
            for (p, rights) in listing {
                // Paths come from a directory listing taken a moment ago; one that has gone
                // since needs no rule.
                let Ok(fd) = PathFd::new(p) else { continue };
                created = created
                    .add_rule(PathBeneath::new(fd, rights))
                    .map_err(err)?;
            }
        }
    }
    for dev in WRITABLE_DEVICES
        .iter()
        .map(Path::new)
        .filter(|d| d.exists())
    {
        let rights: BitFlags<AccessFs> = if dev.is_dir() {
            read | AccessFs::WriteFile
        } else {
            AccessFs::from_file(TARGET)
        };
        created = created
            .add_rule(PathBeneath::new(path_fd(dev)?, rights))
            .map_err(err)?;
    }
    for p in &walls.writable {
        // A writable file gets the rights a file can have: the directory ones would leave the
        // rule (and so the ruleset) only partly enforced.
        let rights = if p.is_dir() {
            AccessFs::from_all(TARGET)
        } else {
            AccessFs::from_file(TARGET)
        };
        created = created
            .add_rule(PathBeneath::new(path_fd(p)?, rights))
            .map_err(err)?;
    }
    let status = created.restrict_self().map_err(err)?;
    Ok(Enforced {
        none: status.ruleset == RulesetStatus::NotEnforced,
        partly: status.ruleset != RulesetStatus::FullyEnforced,
    })
}

/// What to grant so that everything is readable except `hidden` (and what is under it), with
/// `reopened` readable again. Landlock can only allow, so a hidden path is cut out by granting
/// each of its siblings, and each of its ancestors' siblings.
///
/// The directories on the way to a hidden path may be listed (so `ls ~` works), which also
/// shows the names, never the contents, inside the hidden one. What is created in them during
/// the run is not readable: their entries were granted one by one.
pub(super) fn readable_except(hidden: &[PathBuf], reopened: &[PathBuf]) -> Reads {
    let on_the_way = |p: &Path| hidden.iter().any(|h| h.starts_with(p) && h != p);
    let mut read: Vec<PathBuf> = Vec::new();
    let mut list: Vec<PathBuf> = Vec::new();
    let mut todo = vec![PathBuf::from("/")];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        list.push(dir);
        for e in entries.flatten() {
            let p = e.path();
            if hidden.contains(&p) {
                continue;
            }
            let is_real_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if on_the_way(&p) && is_real_dir {
                todo.push(p);
            } else {
                read.push(p);
            }
        }
    }
    read.extend(reopened.iter().cloned());
    Reads::Beneath { read, list }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_path_is_cut_out_by_its_siblings() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let root = std::fs::canonicalize(dir.path())?;
        for d in ["home/.ssh", "home/ws", "other"] {
            std::fs::create_dir_all(root.join(d))?;
        }
        std::fs::write(root.join("home/.ssh/id"), "k")?;
        std::fs::write(root.join("home/.ssh/known_hosts"), "h")?;
        let hidden = [root.join("home/.ssh")];
        let reopened = [root.join("home/.ssh/known_hosts")];
        let Reads::Beneath {
            read: granted,
            list,
        } = readable_except(&hidden, &reopened)
        else {
            panic!("a hidden path must narrow the reads");
        };
        assert!(list.contains(&root.join("home")), "{list:?}");
        assert!(granted.contains(&root.join("home/ws")));
        assert!(granted.contains(&root.join("other")));
        assert!(granted.contains(&root.join("home/.ssh/known_hosts")));
        for g in &granted {
            assert!(
                !root.join("home/.ssh/id").starts_with(g),
                "{} would grant the hidden key",
                g.display()
            );
        }
        assert!(
            granted.iter().any(|g| g == Path::new("/usr")),
            "the rest of the system stays readable"
        );
        Ok(())
    }
}
