//! What the sandbox test binaries share: a scratch host layout and a way to run `cordon run`
//! in it, with namespaces or with Landlock alone.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

pub mod harness;
#[allow(unused_imports)]
pub(crate) use harness::{skip, tests};

/// How many runs `Mode::Warm` sent through `cordon exec` went warm, and how many ran cold
/// because their flags keep them so.
pub static WARM_RUNS: AtomicUsize = AtomicUsize::new(0);
pub static COLD_RUNS: AtomicUsize = AtomicUsize::new(0);
/// How many runs the policy refused in every mode, run again from a script file.
pub static REFUSED_RUNS: AtomicUsize = AtomicUsize::new(0);

/// The exit status and error output `Sandbox::run` gives a run `exec`'s policy refused.
const REFUSED: i32 = 126;
const REFUSED_SAYS: &str = "refused by the policy:";

/// How `cordon run` is asked to wall the command off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The full sandbox: namespaces, mount view, Landlock, seccomp.
    Namespaces,
    /// What runs where user namespaces are unavailable: Landlock and seccomp alone.
    LandlockOnly,
    /// The full sandbox, kept warm by `cordon exec` and given the command as a `run` request
    /// (`Sandbox::run` speaks the protocol).
    Warm,
}

pub struct Sandbox {
    _tmp: tempfile::TempDir,
    /// The command's working directory (writable).
    pub ws: PathBuf,
    /// A directory outside the workspace, standing in for the rest of the host.
    pub outside: PathBuf,
    pub mode: Mode,
}

impl Sandbox {
    /// A scratch host layout; the test is skipped (see [`skip`]) where this machine cannot run
    /// sandboxes.
    pub fn new() -> Self {
        Self::with_mode(Mode::Namespaces)
    }

    pub fn with_mode(mode: Mode) -> Self {
        // Not under /tmp: every run has a private /tmp, where `outside` would be missing
        // rather than walled off, and an attempt on it could not fail (and under /tmp exec's
        // runs are cold).
        let tmp = tempfile::tempdir_in("/var/tmp").expect("temp dir");
        let ws = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&ws).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        let sb = Sandbox {
            _tmp: tmp,
            ws,
            outside,
            mode,
        };
        let probe = sb.run(&["--", "true"]);
        if !probe.status.success() {
            skip(format!(
                "`cordon run -- true` ({mode:?}) failed here: {}",
                stderr(&probe)
            ));
        }
        sb
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new(cordon_bin());
        cmd.arg("run").current_dir(&self.ws);
        if self.mode == Mode::LandlockOnly {
            cmd.env("CORDON_SANDBOX_LANDLOCK_ONLY", "1");
        }
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_env(args, &[])
    }

    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        if self.mode == Mode::Warm {
            return self.run_warm(args, env);
        }
        self.command()
            .args(args)
            .envs(env.iter().copied())
            .output()
            .expect("run cordon")
    }

    /// `cordon run ARGS` as `cordon exec --jsonl FLAGS` given one `run` request, its events
    /// put back together as `cordon run`'s output: the command's standard output and error,
    /// its exit status, and with `--report FILE` the report. Panics where `exec` gives no
    /// result, so an attempt never passes on a run that did not happen; and where the run was
    /// not warm although nothing in its flags keeps it cold.
    ///
    /// A line the policy refuses whatever the mode (one that writes an agent's control files,
    /// say) never reaches the sandbox that way; so that the sandbox is still tried, it is then
    /// sent again as a script file beside the workspace that bash runs, which the policy
    /// cannot read into.
    fn run_warm(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let o = self.run_warm_once(args, env);
        if o.status.code() != Some(REFUSED) || !o.stderr.starts_with(REFUSED_SAYS.as_bytes()) {
            return o;
        }
        let Some(i) = args.iter().position(|a| *a == "-c") else {
            return o;
        };
        REFUSED_RUNS.fetch_add(1, Ordering::Relaxed);
        let n = REFUSED_RUNS.load(Ordering::Relaxed);
        let file = self
            .ws
            .parent()
            .expect("scratch root")
            .join(format!("refused-{n}.sh"));
        std::fs::write(&file, args[i + 1]).expect("write the script");
        let by_file = format!("bash {}", q(&file));
        let mut again: Vec<&str> = args.to_vec();
        again[i + 1] = &by_file;
        self.run_warm_once(&again, env)
    }

    fn run_warm_once(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        use std::io::Write;
        use std::os::unix::process::ExitStatusExt;
        let split = args
            .iter()
            .position(|a| *a == "--" || *a == "-c")
            .unwrap_or_else(|| panic!("no command in {args:?}"));
        let command = match args[split] {
            "-c" => args[split + 1].to_string(),
            // `exec`: the program is the shell's process, as `cordon run -- PROGRAM` starts it.
            _ => std::iter::once("exec".to_string())
                .chain(
                    args[split + 1..]
                        .iter()
                        .map(|a| format!("'{}'", a.replace('\'', "'\\''"))),
                )
                .collect::<Vec<_>>()
                .join(" "),
        };
        let mut flags: Vec<&str> = args[..split].to_vec();
        let report = flags.iter().position(|f| *f == "--report").map(|i| {
            let file = flags[i + 1].to_string();
            flags.drain(i..i + 2);
            file
        });
        let mut child = Command::new(cordon_bin())
            .args(["exec", "--jsonl", "--mode", "yolo"])
            .args(&flags)
            .envs(env.iter().copied())
            .current_dir(&self.ws)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start cordon exec");
        let request = serde_json::json!({"type": "run", "id": "w", "command": command});
        let mut stdin = child.stdin.take().expect("stdin");
        writeln!(stdin, "{request}").expect("send the request");
        drop(stdin);
        let o = child.wait_with_output().expect("cordon exec");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut exited = None;
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            let event: serde_json::Value = serde_json::from_str(line).expect("an event");
            match event["type"].as_str() {
                Some("output") => {
                    let data = event["data"].as_str().unwrap_or_default().as_bytes();
                    match event["stream"].as_str() {
                        Some("stderr") => err.extend_from_slice(data),
                        _ => out.extend_from_slice(data),
                    }
                }
                Some("exited") => exited = Some(event),
                _ => {}
            }
        }
        let exited = exited.unwrap_or_else(|| {
            panic!(
                "cordon exec {flags:?} gave no result for {command:?}:\n{}\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        });
        if exited["refused"] == true {
            let reason = exited["reason"].as_str().unwrap_or_default();
            return Output {
                status: std::process::ExitStatus::from_raw(REFUSED << 8),
                stdout: Vec::new(),
                stderr: format!("{REFUSED_SAYS} {reason}").into_bytes(),
            };
        }
        let cold_flags = [
            "--allow-domain",
            "--allow-unix-socket",
            "--memory",
            "--cpus",
            "--max-processes",
        ];
        let kept_cold = flags.iter().any(|f| cold_flags.contains(f));
        assert!(
            exited["warm"] == true || kept_cold,
            "the run of {command:?} with {flags:?} was not warm: {exited}"
        );
        let counter = if exited["warm"] == true {
            &WARM_RUNS
        } else {
            &COLD_RUNS
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Some(file) = report {
            let report = serde_json::json!({
                "exit_code": exited["exit_code"],
                "signal": exited["signal"],
                "timed_out": exited["timed_out"],
                "setup_error": exited["setup_error"],
                "weaker": exited["weaker"],
                "blocked": exited["violations"],
                "env_withheld": exited["env_withheld"],
            });
            std::fs::write(file, report.to_string()).expect("write the report");
        }
        err.extend_from_slice(&o.stderr);
        let code = exited["exit_code"].as_i64().unwrap_or(125) as i32;
        Output {
            status: std::process::ExitStatus::from_raw((code & 0xff) << 8),
            stdout: out,
            stderr: err,
        }
    }

    pub fn sh(&self, script: &str) -> Output {
        self.run(&["-c", script])
    }
}

/// The binary under test: `CORDON_BIN` when CI runs this suite as an unprivileged user from a
/// copied location, else the one cargo built.
pub fn cordon_bin() -> PathBuf {
    std::env::var_os("CORDON_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_cordon")),
        PathBuf::from,
    )
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A path quoted for `sh`.
pub fn q(p: &Path) -> String {
    format!("'{}'", p.display())
}
pub mod engines;
pub mod terminal;
