//! `cordon mcp --backend docker|podman`: the server in a container. cordon on the host is the
//! launcher: it starts the container the way `cordon run --backend …` does (same image,
//! profile, mounts, network, user mapping and clean-up), with this very binary as the
//! container's program, serving MCP on the container's standard input and output, which the
//! engine (`run -i`, no terminal) connects to the host cordon's. The protocol passes through
//! untouched, so elicitation, progress and cancellation need nothing here.
//!
//! The binary inside is the host's: it and the shared objects it has loaded (read from
//! `/proc/self/maps`, the dynamic loader among them) are mounted read-only under
//! [`INSIDE`], and the loader is started by path with those objects as its library path. That
//! needs no C library in the image, only the same architecture and a Linux kernel.
//!
//! The worker decides with the host's policy: every policy directory and settings file the
//! host would read is mounted read-only at its own path, and the launcher's policy and sandbox
//! settings, with its fingerprint of those files, go in as a typed [`Request`] on the first
//! line of the container's standard input; a worker that sees other files refuses to start. Inside, the container is the sandbox: commands run there directly, not in a second
//! sandbox of cordon's (Docker refuses user namespaces anyway).

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use cordon_app::config::{RunConfig, Sources};
use cordon_app::policy::PolicyConfig;
use cordon_app::run::Launch;
use cordon_app::run::backend::BackendChoice;
use cordon_app::run::container::{SandboxVar, Worker, sandbox_var};
use cordon_sandbox::container::Mount;

/// Files Docker (`/.dockerenv`) and Podman (`/run/.containerenv`) put in every container.
const CONTAINER_MARKS: &[&str] = &["/.dockerenv", "/run/.containerenv"];

/// The names `--init`'s process has as PID 1: Docker's tini, Podman's catatonit.
const ENGINE_INITS: &[&str] = &["docker-init", "podman-init", "catatonit", "tini"];

/// Whether this process is what cordon's container launcher makes it: the program started by
/// the engine's `--init` (PID 1 of the container's own PID namespace) in a container.
fn started_by_an_engine() -> Result<(), String> {
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
// Used by the Linux launcher only; elsewhere the flag is refused before.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
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
// Used by the Linux launcher only; elsewhere the flag is refused before.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
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
fn this_binary() -> anyhow::Result<Binary> {
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
fn this_binary() -> anyhow::Result<Binary> {
    bail!(
        "cordon mcp --backend docker|podman runs this cordon binary inside the container, which needs a Linux host (the binary must be one the container's Linux can run); on this OS use `cordon mcp` without --backend, or `cordon mcp` from a Linux machine"
    )
}

/// The variables that make the worker find the policy files where the host finds them.
fn policy_env() -> Vec<(String, String)> {
    let mut env = Vec::new();
    // The user's config directory by its host path: the container's HOME may be another.
    if let Some(dir) =
        cordon_app::user_settings_dir().and_then(|d| d.parent().map(Path::to_path_buf))
        && let Some(text) = dir.to_str()
    {
        env.push(("XDG_CONFIG_HOME".to_string(), text.to_string()));
    }
    for name in ["CORDON_ADMIN_POLICY_DIR", "CORDON_MANAGED_SETTINGS"] {
        if let Ok(v) = std::env::var(name)
            && !v.is_empty()
        {
            env.push((name.to_string(), v));
        }
    }
    env
}

/// What the worker inside the container is asked to serve with: the launcher's policy and
/// sandbox settings, sent as the first line of the container's standard input (an engine
/// passes no other descriptor in), before the MCP stream.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Request {
    pub policy: PolicyConfig,
    /// The sandbox flags' settings, left to those paths the container shows.
    pub sources: Sources,
    /// The launcher's fingerprint of the policy files, which the worker must see too.
    pub policy_fingerprint: u64,
}

/// The host side: starts the container whose program serves MCP, and waits for it.
pub fn launch(
    policy: &PolicyConfig,
    sources: &Sources,
    config: &RunConfig,
    backend: BackendChoice,
) -> anyhow::Result<u8> {
    if let SandboxVar::Inside(name) = sandbox_var() {
        bail!(
            "already inside the container {name} (CORDON_SANDBOX is set): cordon does not launch a container from inside one; run `cordon mcp` without --backend here"
        );
    }
    // The worker's working directory is the project's real path; the fingerprint of the
    // policy files names them by path, so the host takes the same one.
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let real = std::fs::canonicalize(&cwd)
        .with_context(|| format!("{}: cannot resolve the working directory", cwd.display()))?;
    std::env::set_current_dir(&real)
        .with_context(|| format!("{}: cannot enter the working directory", real.display()))?;

    let binary = this_binary()?;
    // Refused here, before a container starts, rather than by the worker inside.
    drop(cordon_app::decide::Decider::new(policy)?);
    let mut mounts = binary.mounts;
    for p in policy.source_paths()? {
        if p.exists() && !mounts.iter().any(|m| m.to == p) {
            mounts.push(Mount {
                from: p.clone(),
                to: p,
                options: "ro".into(),
            });
        }
    }
    // `--settings FILE` is read inside as well.
    if let Some(file) = &sources.settings_file
        && !mounts.iter().any(|m| &m.to == file)
    {
        mounts.push(Mount {
            from: file.clone(),
            to: file.clone(),
            options: "ro".into(),
        });
    }
    // Where the container shows the host: the project, the other workspaces, and what
    // `--allow-write` opens (mounted at their own paths).
    let mut others = Vec::new();
    for w in policy.workspace_dirs()? {
        let w = std::fs::canonicalize(&w).unwrap_or(w);
        if !w.starts_with(&real) {
            others.push(w);
        }
    }
    // Not warned about here: the run below says what its plan warns of.
    let plan = cordon_app::plan::plan(config)?;
    let shown: Vec<PathBuf> = std::iter::once(real.clone())
        .chain(others.iter().cloned())
        .chain(plan.writable)
        .collect();
    let mut request = serde_json::to_vec(&Request {
        policy: policy.clone(),
        sources: sources.for_container(&real, &shown),
        policy_fingerprint: policy.fingerprint(),
    })?;
    request.push(b'\n');

    let mut argv = binary.argv;
    argv.extend(["mcp".into(), "--worker".into()]);
    // Workspaces beside the project: writable, with their protected files kept read-only,
    // as `--allow-write` gives them.
    let mut run_sources = sources.clone();
    run_sources
        .flags
        .allow_write
        .get_or_insert_with(Vec::new)
        .extend(others);
    let launch = Launch {
        argv,
        backend,
        worker: Some(Worker {
            mounts,
            env: policy_env(),
            input: request,
        }),
        ..Launch::default()
    };
    cordon_app::run::run(&run_sources, launch)
}

/// The worker side: the request its launcher sent, and the container it runs in, after
/// checking that it decides with the policy its launcher read.
pub fn inside() -> anyhow::Result<(Request, String)> {
    let SandboxVar::Inside(name) = sandbox_var() else {
        bail!(
            "--worker is for the server cordon starts inside its own container (CORDON_SANDBOX names it there); run `cordon mcp` without --worker"
        );
    };
    let request = read_request()?;
    if request.policy.fingerprint() != request.policy_fingerprint {
        bail!(
            "the policy files seen inside the container {name} differ from those the launcher read (a policy directory or settings file missing, or changed since); cordon will not decide with another policy; start `cordon mcp --backend …` again"
        );
    }
    // The worker runs commands without a sandbox of its own: only as the program of a
    // container cordon started, not wherever someone set the variable.
    if let Err(why) = started_by_an_engine() {
        bail!(
            "--worker: CORDON_SANDBOX names the container {name}, but this is not the program of one of cordon's containers ({why}); cordon runs commands without its sandbox only there; run `cordon mcp` without --worker"
        );
    }
    Ok((request, name))
}

/// The first line of standard input, read a byte at a time: whatever follows it is the MCP
/// stream, which must stay unread for the server.
fn read_request() -> anyhow::Result<Request> {
    use std::io::Read;
    let mut stdin = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        if stdin.read(&mut byte)? == 0 {
            bail!("standard input ended before the launcher's request");
        }
        if byte[0] == b'\n' {
            break;
        }
        if line.len() >= cordon_app::lines::MAX_LINE {
            bail!(
                "the launcher's request is longer than {} bytes",
                cordon_app::lines::MAX_LINE
            );
        }
        line.push(byte[0]);
    }
    serde_json::from_slice(&line)
        .context("the first line of standard input is not the request cordon's launcher sends")
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
