//! cordon.toml through the real binary: layers, what each says, what an untrusted project and
//! managed locks are not allowed to say, and the errors a broken file gets.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{Sandbox, q, stderr, stdout};

/// A home directory and a managed settings file for one test, so no real settings apply.
struct Layers {
    home: PathBuf,
    managed: PathBuf,
}

impl Layers {
    fn new(sb: &Sandbox) -> Self {
        let home = sb.outside.join("home");
        std::fs::create_dir_all(home.join(".config/cordon")).expect("mkdir");
        Layers {
            managed: sb.outside.join("managed.toml"),
            home,
        }
    }

    fn user(&self, text: &str) {
        std::fs::write(self.home.join(".config/cordon/cordon.toml"), text).expect("write");
    }

    fn managed(&self, text: &str) {
        std::fs::write(&self.managed, text).expect("write");
    }

    fn apply(&self, cmd: &mut Command) {
        cmd.env("HOME", &self.home)
            .env_remove("XDG_CONFIG_HOME")
            .env("CORDON_MANAGED_SETTINGS", &self.managed);
    }

    fn run(&self, sb: &Sandbox, args: &[&str]) -> Output {
        let mut cmd = sb.command();
        self.apply(&mut cmd);
        cmd.args(args).output().expect("run")
    }

    fn config_show(&self, dir: &Path, extra: &[&str]) -> Output {
        let mut cmd = Command::new(common::cordon_bin());
        self.apply(&mut cmd);
        cmd.args(["config", "show"])
            .args(extra)
            .current_dir(dir)
            .output()
            .expect("config show")
    }
}

fn project(sb: &Sandbox, text: &str) {
    std::fs::create_dir_all(sb.ws.join(".cordon")).expect("mkdir");
    std::fs::write(sb.ws.join(".cordon/cordon.toml"), text).expect("write");
}

#[test]
fn each_layer_applies_to_a_run_and_an_untrusted_project_only_tightens() {
    let Some(sb) = Sandbox::new() else { return };
    let l = Layers::new(&sb);
    let secret = sb.outside.join("secret");
    std::fs::write(&secret, "s3cret-from-settings").expect("write");
    let shared = sb.outside.join("shared");
    let other = sb.outside.join("other");
    std::fs::create_dir_all(&shared).expect("mkdir");
    std::fs::create_dir_all(&other).expect("mkdir");
    l.user(&format!(
        "[filesystem]\ndeny_read = [{s:?}, \"~/no-such-dir\"]\nallow_write = [{w:?}]\n",
        s = secret.display().to_string(),
        w = shared.display().to_string()
    ));
    project(
        &sb,
        &format!(
            "[filesystem]\nallow_write = [{o:?}]\n",
            o = other.display().to_string()
        ),
    );
    let script = format!(
        "cat {s}; echo one > {w}/x; echo two > {o}/x; echo done",
        s = q(&secret),
        w = q(&shared),
        o = q(&other)
    );
    let o = l.run(&sb, &["-c", &script]);
    assert!(stdout(&o).contains("done"), "{}", stderr(&o));
    assert!(
        !stdout(&o).contains("s3cret"),
        "deny_read from the user's file"
    );
    assert!(
        shared.join("x").exists(),
        "allow_write from the user's file"
    );
    assert!(!other.join("x").exists(), "an untrusted project widened");
    assert!(
        stderr(&o).contains("settings left out: filesystem.allow_write from project"),
        "{}",
        stderr(&o)
    );
    // Trusted, the project's allow_write replaces the user's.
    let o = l.run(&sb, &["--trust-project", "-c", &script]);
    assert!(other.join("x").exists(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("s3cret"), "deny lists add up");
}

#[test]
fn managed_locks_hold_against_the_command_line() {
    let Some(sb) = Sandbox::new() else { return };
    let l = Layers::new(&sb);
    l.managed("[lock]\nonly_managed_domains = true\n");
    let o = l.run(
        &sb,
        &[
            "--allow-domain=example.com",
            "-c",
            "echo proxy=${ALL_PROXY:-none}",
        ],
    );
    assert!(stdout(&o).contains("proxy=none"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("network.allow_domains from command line: locked by managed settings (only_managed_domains)"),
        "{}",
        stderr(&o)
    );
    let o = l.config_show(&sb.ws, &[]);
    assert!(
        stdout(&o).contains("# locked by managed settings: only_managed_domains"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn config_show_says_where_each_value_came_from() {
    let Some(sb) = Sandbox::new() else { return };
    let l = Layers::new(&sb);
    l.managed("[network]\ndeny_domains = [\"evil.example\"]\n");
    l.user("[network]\nallow_domains = [\"github.com\"]\ndeny_domains = [\"worse.example\"]\n");
    project(&sb, "[limits]\ntimeout = 30\n");
    let o = l.config_show(&sb.ws, &[]);
    let out = stdout(&o);
    let user_file = l.home.join(".config/cordon/cordon.toml");
    for line in [
        format!(
            "network.allow_domains = [\"github.com\"]  # user {}",
            user_file.display()
        ),
        format!(
            "network.deny_domains += \"evil.example\"  # managed {}",
            l.managed.display()
        ),
        format!(
            "network.deny_domains += \"worse.example\"  # user {}",
            user_file.display()
        ),
        format!(
            "limits.timeout = 30.0  # project {}",
            sb.ws.join(".cordon/cordon.toml").display()
        ),
    ] {
        assert!(out.contains(&line), "{line}\n{out}");
    }
    let o = l.config_show(&sb.ws, &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["allow_domains"]["value"][0], "github.com");
    assert_eq!(v["allow_domains"]["from"]["layer"], "user");
    assert_eq!(v["deny_domains"].as_array().expect("list").len(), 2);
}

#[test]
fn a_broken_settings_file_is_named_with_its_line_and_the_key_meant() {
    let Some(sb) = Sandbox::new() else { return };
    let l = Layers::new(&sb);
    l.user("[network]\nallow_domains = []\nalow_private_ips = true\n");
    for o in [l.run(&sb, &["--", "true"]), l.config_show(&sb.ws, &[])] {
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(".config/cordon/cordon.toml"), "{err}");
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("did you mean `allow_private_ips`?"), "{err}");
    }
    l.user("");
    l.managed("[filesystem]\nallow_write = [\"relative/path\"]\n");
    let o = l.config_show(&sb.ws, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("filesystem.allow_write: `relative/path` is relative"),
        "{}",
        stderr(&o)
    );
}
