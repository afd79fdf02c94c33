//! Starting a command the way the Seatbelt backend does, on any Unix, with stand-ins for
//! `/usr/bin/sandbox-exec` (checks the argument shape, then runs the command without a
//! sandbox) and `/usr/bin/log` (prints the recorded fixture). What this cannot show is that
//! macOS enforces the profile; docs/PLATFORMS.md says where that stands.
//!
//! One test function: writing and then executing scripts while other test threads fork can
//! make the exec fail with "text file busy".

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cordon_sandbox::seatbelt::{ExecError, IgnoreViolations, Options, Programs, generate, run};
use cordon_sandbox::{Isolation, Limits, NetworkMode, SandboxSpec};

const FAKE_SANDBOX_EXEC: &str = r#"#!/bin/sh
# A stand-in for sandbox-exec: the profile inline, parameters, `--`, then the command.
[ "$1" = "-p" ] || { echo "stand-in: expected -p first, got $1" >&2; exit 90; }
case "$2" in "(version 1)"*) ;; *) echo "stand-in: not a profile" >&2; exit 91;; esac
shift 2
while [ "$1" != "--" ]; do
  case "$1" in -D?*=*) ;; *) echo "stand-in: unexpected $1" >&2; exit 92;; esac
  shift
done
shift
exec "$@"
"#;

fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn spec(cwd: &Path, argv: &[&str]) -> SandboxSpec {
    SandboxSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: cwd.to_path_buf(),
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("FROM_SPEC".into(), "yes".into()),
        ],
        writable: Vec::new(),
        read_only: Vec::new(),
        network: NetworkMode::None,
        hidden: Vec::new(),
        reopened: Vec::new(),
        limits: Limits::default(),
        cgroups: Vec::new(),
        unix_sockets: Vec::new(),
        isolation: Isolation::Auto,
        allow_local_binding: false,
        inbound: None,
        own_terminal: false,
        cwd_identity: None,
    }
}

#[test]
fn a_run_gets_its_own_tmpdir_only_the_specs_environment_and_its_denials() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let ws = root.join("ws");
    std::fs::create_dir(&ws).expect("mkdir");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seatbelt-log.ndjson");
    let programs = Programs {
        sandbox_exec: script(&root, "sandbox-exec", FAKE_SANDBOX_EXEC),
        log: script(
            &root,
            "log",
            &format!(
                "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}/log-args'\ncat '{}'\n",
                root.display(),
                fixture.display()
            ),
        ),
    };
    let tag = "fixture-run";
    let tmpdir = root.join("run-tmp");
    let options = Options {
        tag: tag.into(),
        tmpdir: tmpdir.clone(),
        hidden_globs: Vec::new(),
        choice: Default::default(),
    };
    let ignore = IgnoreViolations::default();

    // A failing command: its TMPDIR existed and was private, the environment is the spec's,
    // and the log was asked for this run's denials.
    let failing = spec(
        &ws,
        &[
            "/bin/sh",
            "-c",
            r#"test -d "$TMPDIR" && echo "$TMPDIR" > tmp && stat -c %a "$TMPDIR" >> tmp; env > env; exit 3"#,
        ],
    );
    let profile = generate(&failing, &options).expect("profile");
    let ended = run(&failing, &profile, &tmpdir, tag, &ignore, &programs).expect("runs");
    assert_eq!((ended.code, ended.timed_out), (3, false));
    let tmp = std::fs::read_to_string(ws.join("tmp")).expect("the command wrote");
    assert_eq!(tmp, format!("{}\n700\n", tmpdir.display()));
    assert!(!tmpdir.exists(), "the run's TMPDIR is removed after it");
    let env = std::fs::read_to_string(ws.join("env")).expect("env");
    assert!(env.contains("FROM_SPEC=yes"), "{env}");
    assert!(
        !env.contains("CARGO_MANIFEST_DIR"),
        "only the spec's environment reaches the command: {env}"
    );
    let args = std::fs::read_to_string(root.join("log-args")).expect("log was asked");
    assert_eq!(
        args.lines().collect::<Vec<_>>(),
        [
            "show",
            "--style",
            "ndjson",
            "--last",
            "1m",
            "--predicate",
            "eventMessage CONTAINS \"cordon-fixture-run\""
        ]
    );
    assert_eq!(ended.violations.len(), 6, "{:?}", ended.violations);
    assert!(ended.violations.iter().all(|v| v.exact));

    // A command that succeeds: the log is not read.
    std::fs::remove_file(root.join("log-args")).expect("rm");
    let ok = spec(&ws, &["/bin/sh", "-c", "exit 0"]);
    let ended = run(&ok, &profile, &tmpdir, tag, &ignore, &programs).expect("runs");
    assert_eq!(ended.code, 0);
    assert!(ended.violations.is_empty());
    assert!(!root.join("log-args").exists());

    // A timeout kills the command.
    let mut slow = spec(&ws, &["/bin/sleep", "5"]);
    slow.limits.timeout = Some(Duration::from_millis(200));
    let ended = run(&slow, &profile, &tmpdir, tag, &ignore, &programs).expect("runs");
    assert!(ended.timed_out);
    assert_eq!(ended.code, 128 + 9);

    // Without sandbox-exec nothing runs, and the error says why.
    let missing = Programs {
        sandbox_exec: root.join("no-such-sandbox-exec"),
        ..programs.clone()
    };
    match run(&ok, &profile, &tmpdir, tag, &ignore, &missing) {
        Err(e @ ExecError::Spawn(..)) => {
            assert!(e.to_string().contains("only on macOS"), "{e}");
            assert_eq!(e.exit_code(), cordon_sandbox::exit::SETUP_FAILED);
        }
        other => panic!("{other:?}"),
    }
    assert!(!tmpdir.exists());
}
