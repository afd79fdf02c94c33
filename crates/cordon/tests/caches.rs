//! Package managers under the `dev` profile: npm, pip, cargo and go install from a registry
//! stand-in on 127.0.0.1 (`tests/caches/registry.py`) with only its host allowed, into caches
//! of the project's own, and the home directory's caches are never written.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use common::{Sandbox, skip, stderr, stdout};

/// The registry stand-in, stopped when dropped.
struct Registry {
    child: Child,
    port: u16,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn registry(dir: &Path) -> Registry {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/caches/registry.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(dir)
        .arg("registry.test")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|_| skip("python3 is not installed"));
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the registry's port");
    let port = line.trim().parse().expect("a port");
    Registry { child, port }
}

/// A home directory of the test's own, with the caches each tool would use made empty, as on
/// a machine where they have been used.
const HOST_CACHES: &[&str] = &[
    ".npm",
    ".cache/pip",
    ".cargo/registry",
    ".cargo/git",
    "go/pkg/mod",
    ".cache/go-build",
];

fn home(sb: &Sandbox) -> PathBuf {
    let home = sb.outside.join("home");
    for c in HOST_CACHES {
        std::fs::create_dir_all(home.join(c)).expect("mkdir");
    }
    home
}

/// `cordon run` in the workspace with `home` as HOME, the stand-in's host allowed and `flags`.
fn run(sb: &Sandbox, home: &Path, reg: &Registry, flags: &[&str], script: &str) -> Output {
    // The toolchains stay where the real home has them.
    let rustup = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".rustup")))
        .expect("a rustup home");
    sb.command()
        .env("HOME", home)
        .env("RUSTUP_HOME", rustup)
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("npm_config_update_notifier", "false")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("CARGO_HOME")
        .env_remove("npm_config_cache")
        .env_remove("PIP_CACHE_DIR")
        .args([
            "--allow-domain=registry.test",
            "--allow-private-ips",
            "--resolve=registry.test=127.0.0.1",
            "--timeout=300",
        ])
        .args(flags)
        .args(["-c", &script.replace("PORT", &reg.port.to_string())])
        .output()
        .expect("cordon run")
}

fn need(program: &str) {
    if Command::new(program).arg("--version").output().is_err() {
        skip(format!("{program} is not installed"));
    }
}

/// The one directory under `home`'s cordon cache that holds projects' caches.
fn project_caches(home: &Path) -> PathBuf {
    let projects = home.join(".cache/cordon/projects");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&projects)
        .unwrap_or_else(|e| panic!("{}: {e}", projects.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.remove(0)
}

fn is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|mut d| d.next().is_none())
        .unwrap_or(false)
}

fn npm_pip_cargo_and_go_install_into_the_projects_own_caches() {
    need("npm");
    need("cargo");
    need("go");
    let sb = Sandbox::new();
    let home = home(&sb);
    let reg = registry(&sb.outside.join("registry"));
    let python = String::from_utf8(
        Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3")
            .stdout,
    )
    .expect("utf-8");
    let dev = ["--profile", "dev"];

    // Without caches of its own, npm has nowhere to write: the home directory is read-only.
    std::fs::write(
        sb.ws.join("package.json"),
        r#"{"name":"app","version":"1.0.0"}"#,
    )
    .expect("write");
    let npm = "npm install --no-audit --no-fund --registry http://registry.test:PORT/ tiny";
    let o = run(&sb, &home, &reg, &["--profile", "workspace-write"], npm);
    assert!(!o.status.success(), "npm had a cache: {}", stderr(&o));

    let o = run(&sb, &home, &reg, &dev, npm);
    assert!(o.status.success(), "npm: {}\n{}", stdout(&o), stderr(&o));
    assert!(sb.ws.join("node_modules/tiny/index.js").is_file());
    // What it downloaded stays for the project's next run: installed again offline.
    std::fs::remove_dir_all(sb.ws.join("node_modules")).expect("rm");
    let o = run(
        &sb,
        &home,
        &reg,
        &dev,
        "npm install --offline --no-audit --no-fund --registry http://registry.test:PORT/ tiny",
    );
    assert!(o.status.success(), "npm offline: {}", stderr(&o));

    let o = run(
        &sb,
        &home,
        &reg,
        &dev,
        &format!(
            "{} -m pip install --index-url http://registry.test:PORT/simple/ --trusted-host registry.test --target deps tinypy",
            python.trim()
        ),
    );
    assert!(o.status.success(), "pip: {}\n{}", stdout(&o), stderr(&o));
    assert!(sb.ws.join("deps/tinypy/__init__.py").is_file());

    let app = sb.ws.join("app");
    std::fs::create_dir_all(app.join("src")).expect("mkdir");
    std::fs::create_dir_all(app.join(".cargo")).expect("mkdir");
    std::fs::write(
        app.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ntiny = { version = \"0.1\", registry = \"stand-in\" }\n",
    )
    .expect("write");
    std::fs::write(
        app.join("src/main.rs"),
        "fn main() { println!(\"{}\", tiny::who()); }\n",
    )
    .expect("write");
    std::fs::write(
        app.join(".cargo/config.toml"),
        format!(
            "[registries.stand-in]\nindex = \"sparse+http://registry.test:{}/index/\"\n",
            reg.port
        ),
    )
    .expect("write");
    let o = run(&sb, &home, &reg, &dev, "cd app && cargo run -q");
    assert!(o.status.success(), "cargo: {}\n{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("tiny from the stand-in"),
        "{}",
        stdout(&o)
    );

    let app = sb.ws.join("goapp");
    std::fs::create_dir_all(&app).expect("mkdir");
    std::fs::write(
        app.join("go.mod"),
        "module app\n\ngo 1.19\n\nrequire tiny.test/tiny v1.0.0\n",
    )
    .expect("write");
    std::fs::write(
        app.join("main.go"),
        "package main\n\nimport (\n\t\"fmt\"\n\t\"tiny.test/tiny\"\n)\n\nfunc main() { fmt.Println(tiny.Who()) }\n",
    )
    .expect("write");
    let o = run(
        &sb,
        &home,
        &reg,
        &dev,
        "cd goapp && GOPROXY=http://registry.test:PORT GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local go build -o app . && ./app",
    );
    assert!(o.status.success(), "go: {}\n{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("tiny from the stand-in"),
        "{}",
        stdout(&o)
    );

    // Each tool wrote its own cache under the project's, and never the home directory's.
    let caches = project_caches(&home);
    for (tool, sub) in [
        ("npm", "npm/_cacache"),
        ("pip", "pip"),
        ("cargo", "cargo/registry"),
        ("go modules", "go/pkg/mod"),
        ("go builds", "go-build"),
    ] {
        assert!(
            !is_empty(&caches.join(sub)),
            "{tool} left nothing in {}",
            caches.join(sub).display()
        );
    }
    for c in HOST_CACHES {
        assert!(is_empty(&home.join(c)), "~/{c} was written");
    }
}

/// What a run is told about its caches: `explain` names the directory and the variables, the
/// run gets them, and they are the same from a subdirectory of the project.
fn the_caches_are_the_projects_and_explain_says_where() {
    let sb = Sandbox::new();
    let home = home(&sb);
    std::fs::create_dir_all(sb.ws.join(".git")).expect("mkdir");
    std::fs::create_dir_all(sb.ws.join("sub")).expect("mkdir");
    let explain = |dir: &Path, flags: &[&str]| {
        let o = Command::new(common::cordon_bin())
            .args(["explain", "--json"])
            .args(flags)
            .args(["--", "true"])
            .current_dir(dir)
            .env("HOME", &home)
            .env_remove("XDG_CACHE_HOME")
            .output()
            .expect("explain");
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_str::<serde_json::Value>(&stdout(&o)).expect("json")
    };
    let plain = explain(&sb.ws, &[]);
    assert!(plain["package_caches"].is_null(), "{plain}");
    let dev = explain(&sb.ws, &["--profile", "dev"]);
    let dir = dev["package_caches"]["dir"]
        .as_str()
        .expect("dir")
        .to_string();
    assert!(dir.starts_with(&home.join(".cache/cordon/projects").display().to_string()));
    assert_eq!(
        explain(&sb.ws.join("sub"), &["--profile", "dev"])["package_caches"]["dir"],
        dev["package_caches"]["dir"],
        "one project, one place"
    );
    // An agent installs packages as it works: its runs get them too, unless the settings say
    // otherwise.
    let agent = explain(&sb.ws, &["--agent", "claude-code"]);
    assert_eq!(agent["package_caches"]["dir"], dev["package_caches"]["dir"]);
    std::fs::create_dir_all(sb.ws.join(".cordon")).expect("mkdir");
    std::fs::write(
        sb.ws.join(".cordon/cordon.toml"),
        "[filesystem]\nprivate_caches = false\n",
    )
    .expect("write");
    let off = explain(&sb.ws, &["--agent", "claude-code"]);
    assert!(off["package_caches"].is_null(), "{off}");
    std::fs::remove_dir_all(sb.ws.join(".cordon")).expect("rm");
    let o = sb
        .command()
        .env("HOME", &home)
        .env_remove("XDG_CACHE_HOME")
        .args([
            "--profile",
            "dev",
            "-c",
            "echo $npm_config_cache $PIP_CACHE_DIR $CARGO_HOME $GOMODCACHE $GOCACHE",
        ])
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", stderr(&o));
    let said = stdout(&o);
    let seen: Vec<&str> = said.split_whitespace().collect();
    assert_eq!(seen.len(), 5, "{said}");
    for (var, path) in ["npm", "pip", "cargo", "go/pkg/mod", "go-build"]
        .iter()
        .zip(&seen)
    {
        assert_eq!(*path, format!("{dir}/{var}"), "{said}");
        assert!(Path::new(path).is_dir(), "{path} was made");
    }
}

common::tests!(
    "caches.rs":
    npm_pip_cargo_and_go_install_into_the_projects_own_caches,
    the_caches_are_the_projects_and_explain_says_where,
);
