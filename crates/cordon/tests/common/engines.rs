//! Container engines for the tests: whether Docker or Podman can run here, and the test
//! image, made from the host's static busybox (no registry is reachable from CI). A machine
//! without them skips the tests that need them, saying why, unless `CORDON_TEST_NO_SKIP` is
//! set (CI), where a skip is a failure.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use super::stderr;

/// busybox with the host's bash beside it: cordon runs the command lines it decided only with
/// bash (`cordon_sandbox::shell`), in a container too.
pub const IMAGE: &str = "cordon-test-busybox:3";

/// busybox alone: an image without bash.
pub const NO_BASH_IMAGE: &str = "cordon-test-busybox-nobash:2";

/// The engines the tests run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eng {
    Docker,
    Podman,
}

impl Eng {
    pub fn name(self) -> &'static str {
        match self {
            Eng::Docker => "docker",
            Eng::Podman => "podman",
        }
    }

    /// The engine's readiness: `Ok(Some(conf))` when Podman needs the tests' containers.conf.
    pub fn ready(self) -> &'static Result<Option<PathBuf>, String> {
        static DOCKER: OnceLock<Result<Option<PathBuf>, String>> = OnceLock::new();
        static PODMAN: OnceLock<Result<Option<PathBuf>, String>> = OnceLock::new();
        match self {
            Eng::Docker => DOCKER.get_or_init(|| make_image(self)),
            Eng::Podman => PODMAN.get_or_init(|| make_image(self)),
        }
    }

    pub fn conf(self) -> Option<PathBuf> {
        self.ready().clone().ok().flatten()
    }

    /// The engine as the tests run it.
    pub fn command(self, conf: Option<&Path>) -> Command {
        let mut cmd = Command::new(self.name());
        if let Some(conf) = conf {
            cmd.env("CONTAINERS_CONF", conf);
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    pub fn run(self, args: &[&str]) -> Output {
        self.command(self.conf().as_deref())
            .args(args)
            .output()
            .expect("run the engine")
    }
}

/// Podman where its defaults do not work (inside another container, as in CI): runc, and
/// resource limits no higher than the host allows.
const PODMAN_CONF: &str = "[containers]
default_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]
[engine]
runtime = \"runc\"
";

/// Makes the test image for `engine` once per test run: `Err` says why it cannot be had here.
fn make_image(engine: Eng) -> Result<Option<PathBuf>, String> {
    let name = engine.name();
    let version = engine
        .command(None)
        .arg("version")
        .output()
        .map_err(|e| format!("{name} is not installed ({e})"))?;
    if !version.status.success() {
        return Err(format!(
            "the {name} engine cannot be reached: {}",
            stderr(&version).trim()
        ));
    }
    let present = |image: &str| {
        engine
            .command(None)
            .args(["image", "inspect", image])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    for (image, bash) in [(IMAGE, true), (NO_BASH_IMAGE, false)] {
        if !present(image) {
            import_image(engine, image, bash)?;
        }
    }
    let probe = |conf: Option<&Path>| {
        engine
            .command(conf)
            .args(["run", "--rm", "--init", "--network", "none", IMAGE, "true"])
            .output()
            .expect("run the engine")
    };
    let first = probe(None);
    if first.status.success() {
        return Ok(None);
    }
    if engine == Eng::Podman {
        let conf = std::env::temp_dir().join("cordon-test-containers.conf");
        std::fs::write(&conf, PODMAN_CONF).map_err(|e| e.to_string())?;
        if probe(Some(&conf)).status.success() {
            return Ok(Some(conf));
        }
    }
    Err(format!(
        "the busybox image does not run under {name} (is /bin/busybox static? install busybox-static; for podman also catatonit): {}",
        stderr(&first)
    ))
}

/// A root file system holding the host's static busybox, and with `bash` the host's bash and
/// the libraries it loads, imported as `image`.
fn import_image(engine: Eng, image: &str, bash: bool) -> Result<(), String> {
    let busybox = Path::new("/bin/busybox");
    if !busybox.is_file() {
        return Err("/bin/busybox is missing (install busybox-static)".into());
    }
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let r = root.path();
    for d in ["bin", "tmp", "etc", "root", "proc", "dev", "sys", "home"] {
        std::fs::create_dir_all(r.join(d)).map_err(|e| e.to_string())?;
    }
    std::fs::set_permissions(r.join("tmp"), std::fs::Permissions::from_mode(0o1777))
        .map_err(|e| e.to_string())?;
    std::fs::copy(busybox, r.join("bin/busybox")).map_err(|e| e.to_string())?;
    let list = Command::new(busybox)
        .arg("--list")
        .output()
        .map_err(|e| e.to_string())?;
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        if applet != "busybox" && !applet.is_empty() {
            std::os::unix::fs::symlink("busybox", r.join("bin").join(applet))
                .map_err(|e| e.to_string())?;
        }
    }
    if bash {
        copy_with_libraries(Path::new("/bin/bash"), r)?;
    }
    std::fs::write(r.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n")
        .map_err(|e| e.to_string())?;
    std::fs::write(r.join("etc/group"), "root:x:0:\n").map_err(|e| e.to_string())?;
    let tar = Command::new("tar")
        .arg("-C")
        .arg(r)
        .args(["-c", "."])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("tar: {e}"))?;
    let import = engine
        .command(None)
        // A `PATH` of its own, as every real image has: a pod gets none from this machine.
        .args([
            "import",
            "--change",
            "ENV PATH=/usr/local/bin:/usr/bin:/bin",
            "-",
            image,
        ])
        .stdin(tar.stdout.expect("tar's output"))
        .output()
        .map_err(|e| e.to_string())?;
    if !import.status.success() {
        return Err(format!(
            "{} import failed: {}",
            engine.name(),
            stderr(&import)
        ));
    }
    Ok(())
}

/// Copies `program` and the shared objects `ldd` names for it to the same paths under `root`.
fn copy_with_libraries(program: &Path, root: &Path) -> Result<(), String> {
    let ldd = Command::new("ldd")
        .arg(program)
        .output()
        .map_err(|e| format!("ldd: {e}"))?;
    if !ldd.status.success() {
        return Err(format!("ldd {}: {}", program.display(), stderr(&ldd)));
    }
    let libraries: Vec<PathBuf> = String::from_utf8_lossy(&ldd.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    for file in std::iter::once(program.to_path_buf()).chain(libraries) {
        let to = root.join(file.strip_prefix("/").unwrap_or(&file));
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        std::fs::copy(&file, &to).map_err(|e| format!("copy {}: {e}", file.display()))?;
    }
    Ok(())
}
