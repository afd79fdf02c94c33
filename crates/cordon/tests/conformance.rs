//! The policy conformance suite: every case in `tests/conformance/*.toml` (at the repository
//! root) is decided by the real `cordon` binary through `cordon check --jsonl`.
//!
//! A case file has a `[setup]` table (which policies to load, flags) and `[[case]]` entries
//! (a call and the decision it must get). See `tests/conformance/README.md`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Setup {
    /// Load cordon's built-in policies (default: true).
    defaults: Option<bool>,
    /// User-tier policy text.
    policy: Option<String>,
    /// Policy files (relative to `tests/`) copied into the user-tier directory.
    #[serde(default)]
    policy_files: Vec<String>,
    /// Policy files (relative to `tests/`) loaded into the default tier instead of cordon's
    /// built-in policies.
    #[serde(default)]
    default_policy_files: Vec<String>,
    workspace_policy: Option<String>,
    extension_policy: Option<String>,
    admin_policy: Option<String>,
    #[serde(default)]
    trust_workspace: bool,
    #[serde(default)]
    non_interactive: bool,
    mode: Option<String>,
    /// Extra command-line flags.
    #[serde(default)]
    flags: Vec<String>,
    /// Files to create in the workspace (path → content); a value starting with `->` makes a
    /// symlink to the rest.
    #[serde(default)]
    files: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    tool: String,
    /// Shorthand for `args = { command = "…" }`.
    command: Option<String>,
    args: Option<toml::Table>,
    mode: Option<String>,
    server: Option<String>,
    annotations: Option<toml::Table>,
    /// allow, deny, ask_user, or not_allow (ask_user or deny).
    expect: String,
    /// Part of the reason the decision must give.
    reason_contains: Option<String>,
    #[allow(dead_code)]
    note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Suite {
    #[serde(default)]
    setup: Setup,
    case: Vec<Case>,
}

fn repo_tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests")
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

/// Runs one suite file; returns (cases run, failure messages), or `None` if skipped.
fn run_suite(path: &Path) -> Option<(usize, Vec<String>)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let suite: Suite = toml::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let setup = &suite.setup;

    if setup.admin_policy.is_some() && !is_root() {
        let why = format!(
            "{name}: skipped: admin-tier cases need root (the admin directory must be root-owned)"
        );
        assert!(
            std::env::var_os("CORDON_TEST_NO_SKIP").is_none(),
            "{why}, and CORDON_TEST_NO_SKIP is set"
        );
        eprintln!("{why}");
        return None;
    }

    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path();
    let home = root.join("home");
    let ws = root.join("ws");
    let user = root.join("user-policies");
    let admin = root.join("admin-policies");
    for d in [&home, &ws, &user] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    if let Some(p) = &setup.policy {
        let p = p.replace("{tests}", &repo_tests_dir().display().to_string());
        std::fs::write(user.join("policy.toml"), p).expect("write policy");
    }
    let defaults = root.join("default-policies");
    for (files, dir) in [
        (&setup.policy_files, &user),
        (&setup.default_policy_files, &defaults),
    ] {
        for f in files {
            std::fs::create_dir_all(dir).expect("mkdir");
            let src = repo_tests_dir().join(f);
            let dst = dir.join(Path::new(f).file_name().expect("file name"));
            std::fs::copy(&src, &dst)
                .unwrap_or_else(|e| panic!("{name}: copy {}: {e}", src.display()));
        }
    }
    if let Some(p) = &setup.workspace_policy {
        let d = ws.join(".cordon/policies");
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("workspace.toml"), p).expect("write");
    }
    let mut args: Vec<String> = vec!["check".into(), "--jsonl".into()];
    if let Some(p) = &setup.extension_policy {
        let d = root.join("extension-policies");
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(d.join("extension.toml"), p).expect("write");
        args.extend(["--extension-policy-dir".into(), d.display().to_string()]);
    }
    if let Some(p) = &setup.admin_policy {
        std::fs::create_dir_all(&admin).expect("mkdir");
        std::fs::write(admin.join("admin.toml"), p).expect("write");
    }
    for (file, content) in &setup.files {
        let p = ws.join(file);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        match content.strip_prefix("->") {
            Some(target) => std::os::unix::fs::symlink(target, &p).expect("symlink"),
            None => std::fs::write(&p, content).expect("write"),
        }
    }
    args.extend(["--policy-dir".into(), user.display().to_string()]);
    if !setup.default_policy_files.is_empty() {
        args.extend([
            "--default-policy-dir".into(),
            defaults.display().to_string(),
        ]);
    } else if setup.defaults == Some(false) {
        args.push("--no-defaults".into());
    }
    if setup.trust_workspace {
        args.push("--trust-workspace".into());
    }
    if setup.non_interactive {
        args.push("--non-interactive".into());
    }
    if let Some(m) = &setup.mode {
        args.extend(["--mode".into(), m.clone()]);
    }
    args.extend(
        setup
            .flags
            .iter()
            .map(|f| f.replace("{tests}", &repo_tests_dir().display().to_string())),
    );

    let mut input = String::new();
    for case in &suite.case {
        let mut args_obj = match &case.args {
            Some(t) => serde_json::to_value(t).expect("args"),
            None => json!({}),
        };
        if let Some(c) = &case.command {
            args_obj["command"] = Value::String(c.clone());
        }
        let mut req = json!({ "tool": case.tool, "args": args_obj });
        if let Some(m) = &case.mode {
            req["mode"] = json!(m);
        }
        if let Some(s) = &case.server {
            req["server"] = json!(s);
        }
        if let Some(a) = &case.annotations {
            req["annotations"] = serde_json::to_value(a).expect("annotations");
        }
        input.push_str(&req.to_string());
        input.push('\n');
    }

    let mut child = Command::new(env!("CARGO_BIN_EXE_cordon"))
        .args(&args)
        .current_dir(&ws)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .env("CORDON_ADMIN_POLICY_DIR", &admin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cordon");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write requests");
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Some((
            suite.case.len(),
            vec![format!(
                "{name}: cordon exited {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )],
        ));
    }
    let replies: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("reply is JSON"))
        .collect();
    assert_eq!(
        replies.len(),
        suite.case.len(),
        "{name}: one reply per request"
    );

    let mut failures = Vec::new();
    for (i, (case, reply)) in suite.case.iter().zip(&replies).enumerate() {
        let got = reply["decision"].as_str().unwrap_or("<none>");
        let ok = match case.expect.as_str() {
            "not_allow" => got == "ask_user" || got == "deny",
            e @ ("allow" | "deny" | "ask_user") => got == e,
            other => panic!("{name} case {}: unknown expectation `{other}`", i + 1),
        };
        let reason = reply["reason"].as_str().unwrap_or("");
        let reason_ok = case
            .reason_contains
            .as_ref()
            .is_none_or(|r| reason.contains(r.as_str()));
        if !ok || !reason_ok {
            let what = case
                .command
                .clone()
                .unwrap_or_else(|| format!("{:?}", case.args));
            failures.push(format!(
                "{name} case {} ({} {what}, mode {:?}): expected {}{}, got {reply}",
                i + 1,
                case.tool,
                case.mode
                    .as_deref()
                    .or(setup.mode.as_deref())
                    .unwrap_or("default"),
                case.expect,
                case.reason_contains
                    .as_ref()
                    .map(|r| format!(" with reason containing {r:?}"))
                    .unwrap_or_default(),
            ));
        }
    }
    Some((suite.case.len(), failures))
}

#[test]
fn conformance_suite() {
    let dir = repo_tests_dir().join("conformance");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/conformance exists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    let mut total = 0;
    let mut obfuscation = 0;
    let mut failures = Vec::new();
    for f in &files {
        if let Some((n, mut fails)) = run_suite(f) {
            total += n;
            if f.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("shell-obfuscation"))
            {
                obfuscation += n;
            }
            failures.append(&mut fails);
        }
    }
    eprintln!(
        "conformance: {total} cases in {} files ({obfuscation} shell-obfuscation cases)",
        files.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {total} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        total >= 150,
        "the suite must keep at least 150 cases, has {total}"
    );
    assert!(
        obfuscation >= 60,
        "the suite must keep at least 60 shell-obfuscation cases, has {obfuscation}"
    );
}
