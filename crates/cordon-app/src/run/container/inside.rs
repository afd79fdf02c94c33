//! cordon inside a container it launched: this very binary and the shared objects it has
//! loaded, mounted read-only under [`INSIDE`] and started by its loader (so the image needs no
//! C library), and the check that a process is the program of one of cordon's containers.
//! `cordon mcp --backend docker|podman` runs its server this way.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use cordon_sandbox::container::Mount;

/// Files Docker (`/.dockerenv`) and Podman (`/run/.containerenv`) put in every container.
const CONTAINER_MARKS: &[&str] = &["/.dockerenv", "/run/.containerenv"];

/// The names `--init`'s process has as PID 1: Docker's tini, Podman's catatonit.
const ENGINE_INITS: &[&str] = &["docker-init", "podman-init", "catatonit", "tini"];

/// Whether this process is what cordon's container launcher makes it: the program started by
/// the engine's `--init` (PID 1 of the container's own PID namespace) in a container.
pub fn started_by_an_engine() -> Result<(), String> {
    if !CONTAINER_MARKS.iter().any(|m| Path::new(m).exists()) {
        return Err(format!("neither {} exists", CONTAINER_MARKS.join(" nor ")));
    }
    if std::os::unix::process::parent_id() != 1 {
        return Err("its parent is not the container's first process".into());
    }
    let init = std::fs::read_to_string("/proc/1/comm").unwrap_or_default();
    if !ENGINE_INITS.contains(&init.trim()) {
        return Err(format!(
            "the first process is `{}`, not the engine's init",
            init.trim()
        ));
    }
    Ok(())
}

/// Where cordon's binary and its shared objects appear inside the container.
pub const INSIDE: &str = "/.cordon";

/// The shared objects a process has mapped, from its `/proc/PID/maps`: each file once, in the
/// order first seen, without `exe` (the program itself).
pub fn loaded_objects(maps: &str, exe: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for line in maps.lines() {
        // address perms offset dev inode path; the path may hold spaces.
        let Some(path) = line.splitn(6, ' ').nth(5).map(str::trim_start) else {
            continue;
        };
        if !path.starts_with('/') || path.ends_with(" (deleted)") {
            continue;
        }
        let path = PathBuf::from(path);
        let is_object = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.contains(".so"));
        if is_object && path != exe && !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// How the binary is mounted into the container and started there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary {
    pub mounts: Vec<Mount>,
    /// The command that starts cordon inside, before its arguments.
    pub argv: Vec<String>,
}

/// The mounts and command for `exe` with these shared objects. The loader is the object named
/// `ld-*.so*` (glibc's `ld-linux-*.so.N`, musl's `ld-musl-*.so.1`); without one (a static
/// build) the binary runs by itself.
pub fn binary(exe: &Path, objects: &[PathBuf]) -> anyhow::Result<Binary> {
    let ro = |from: &Path, to: String| Mount {
        from: from.to_path_buf(),
        to: PathBuf::from(to),
        options: "ro".into(),
    };
    let mut mounts = vec![ro(exe, format!("{INSIDE}/cordon"))];
    let mut loader = None;
    let mut names: Vec<&str> = Vec::new();
    for o in objects {
        let Some(name) = o.file_name().and_then(|n| n.to_str()) else {
            bail!(
                "{}: a shared object of cordon's whose name is not UTF-8 cannot be mounted into the container",
                o.display()
            );
        };
        // Two objects of one name in one directory would shadow each other.
        if names.contains(&name) {
            bail!(
                "cordon has two shared objects named {name} loaded ({}); it cannot mount both into the container; use a statically linked cordon",
                o.display()
            );
        }
        names.push(name);
        if name.starts_with("ld-") && loader.is_none() {
            loader = Some(name);
        }
        mounts.push(ro(o, format!("{INSIDE}/lib/{name}")));
    }
    let argv = match loader {
        Some(ld) => vec![
            format!("{INSIDE}/lib/{ld}"),
            "--library-path".into(),
            format!("{INSIDE}/lib"),
            format!("{INSIDE}/cordon"),
        ],
        None if objects.is_empty() => vec![format!("{INSIDE}/cordon")],
        None => bail!(
            "cordon is dynamically linked, but no dynamic loader (ld-*.so) is among its loaded objects ({}); use a statically linked cordon with --backend docker|podman",
            names.join(", ")
        ),
    };
    Ok(Binary { mounts, argv })
}

/// This binary, as the container will start it.
#[cfg(target_os = "linux")]
pub fn this_binary() -> anyhow::Result<Binary> {
    let exe = std::fs::read_link("/proc/self/exe").context("cannot find cordon's own binary")?;
    if exe.to_string_lossy().ends_with(" (deleted)") || !exe.is_file() {
        bail!(
            "{}: cordon's binary was replaced or removed while it runs; start cordon again",
            exe.display()
        );
    }
    let maps = std::fs::read_to_string("/proc/self/maps")
        .context("cannot read /proc/self/maps to find cordon's shared objects")?;
    binary(&exe, &loaded_objects(&maps, &exe))
}

#[cfg(not(target_os = "linux"))]
pub fn this_binary() -> anyhow::Result<Binary> {
    bail!(
        "cordon mcp --backend docker|podman runs this cordon binary inside the container, which needs a Linux host (the binary must be one the container's Linux can run); on this OS use `cordon mcp` without --backend, or `cordon mcp` from a Linux machine"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
5581e0a00000-5581e0b00000 r--p 00000000 08:01 123 /opt/cordon/bin/cordon
5581e0b00000-5581e0c00000 r-xp 00100000 08:01 123 /opt/cordon/bin/cordon
7f0000000000-7f0000001000 rw-p 00000000 00:00 0 
7f0000100000-7f0000200000 r--p 00000000 08:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000200000-7f0000300000 r-xp 00020000 08:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000300000-7f0000301000 r--p 00000000 08:01 457 /usr/lib/x86_64-linux-gnu/libgcc_s.so.1
7f0000400000-7f0000401000 r--p 00000000 08:01 458 /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
7f0000500000-7f0000501000 r--p 00000000 08:01 459 /usr/lib/locale/C.utf8/LC_CTYPE
7f0000600000-7f0000601000 r--p 00000000 08:01 460 /tmp/old lib.so (deleted)
7ffd00000000-7ffd00001000 r-xp 00000000 00:00 0                          [vdso]
";

    #[test]
    fn the_loaded_objects_are_each_shared_object_once_without_the_program() {
        let exe = Path::new("/opt/cordon/bin/cordon");
        assert_eq!(
            loaded_objects(MAPS, exe),
            [
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn a_dynamic_binary_starts_through_its_loader_with_only_its_objects() {
        let exe = Path::new("/opt/cordon/bin/cordon");
        let b = binary(exe, &loaded_objects(MAPS, exe)).unwrap();
        assert_eq!(
            b.argv,
            [
                "/.cordon/lib/ld-linux-x86-64.so.2",
                "--library-path",
                "/.cordon/lib",
                "/.cordon/cordon"
            ]
        );
        let pairs: Vec<(String, String, String)> = b
            .mounts
            .iter()
            .map(|m| {
                (
                    m.from.display().to_string(),
                    m.to.display().to_string(),
                    m.options.clone(),
                )
            })
            .collect();
        assert_eq!(pairs[0].0, "/opt/cordon/bin/cordon");
        assert_eq!(pairs[0].1, "/.cordon/cordon");
        assert!(pairs.iter().all(|(_, _, o)| o == "ro"));
        assert!(
            pairs
                .iter()
                .any(|(f, t, _)| f.ends_with("/libc.so.6") && t == "/.cordon/lib/libc.so.6")
        );
        assert_eq!(pairs.len(), 4);
    }

    #[test]
    fn a_static_binary_runs_by_itself() {
        let b = binary(Path::new("/cordon"), &[]).unwrap();
        assert_eq!(b.argv, ["/.cordon/cordon"]);
        assert_eq!(b.mounts.len(), 1);
    }

    #[test]
    fn objects_without_a_loader_or_of_one_name_twice_are_refused() {
        let e = binary(Path::new("/cordon"), &[PathBuf::from("/lib/libc.so.6")]).unwrap_err();
        assert!(e.to_string().contains("no dynamic loader"), "{e}");
        let e = binary(
            Path::new("/cordon"),
            &[
                PathBuf::from("/lib/ld-linux-x86-64.so.2"),
                PathBuf::from("/lib/libc.so.6"),
                PathBuf::from("/usr/lib/libc.so.6"),
            ],
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("two shared objects named libc.so.6"),
            "{e}"
        );
    }
}
