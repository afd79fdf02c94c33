//! One `cordon.toml` as written: every key optional, unknown keys refused with a suggestion.

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bounds;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "cordon.toml",
    description = "cordon's settings: managed (/etc/cordon), user (~/.config/cordon), project (.cordon)"
)]
pub struct SettingsFile {
    pub sandbox: Option<SandboxTable>,
    pub filesystem: Option<FilesystemTable>,
    pub network: Option<NetworkTable>,
    pub env: Option<EnvTable>,
    pub limits: Option<LimitsTable>,
    pub ignore_violations: Option<Vec<IgnoreRule>>,
    pub container: Option<ContainerTable>,
    pub policy: Option<PolicyTable>,
    /// Managed settings only: what no other layer may change.
    pub lock: Option<LockTable>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxTable {
    /// `false`: the commands `cordon exec`, `shell` and `mcp` run go outside the sandbox (still
    /// decided by the policy). `cordon run` always sandboxes.
    pub enabled: Option<bool>,
    /// Refuse to run rather than fall back to Landlock and seccomp alone where user namespaces
    /// are unavailable.
    pub fail_if_unavailable: Option<bool>,
    /// The platforms (`linux`, `macos`) on which the sandbox is on; elsewhere it is as if
    /// `enabled = false`.
    pub enabled_platforms: Option<Vec<String>>,
    /// Commands that run outside the sandbox, still under policy: a script goes outside only
    /// when every command in it starts with one of these (`docker` takes `docker ps`).
    pub excluded_commands: Option<Vec<String>>,
    /// A shell command that will run in the sandbox need not ask (the defaults' asks only).
    pub auto_allow_if_sandboxed: Option<bool>,
    /// A run may ask to leave the sandbox (`"unsandboxed": true`); the policy still decides.
    pub allow_unsandboxed_commands: Option<bool>,
    /// What enforces `cordon run` when no `--backend` flag or `CORDON_SANDBOX` says:
    /// `linux`, `seatbelt`, `docker`, `podman`, `container` (either engine) or `kubernetes`
    /// (which, for now, only prints its manifests with `--dry-run`).
    pub backend: Option<String>,
}

/// The container backends' choices, where no flag or `CORDON_SANDBOX_*` variable makes them.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContainerTable {
    /// The image (as `--image`).
    pub image: Option<String>,
    /// Hardening and limits: `dev`, `safe`, `tight` or `offline` (as `--container-profile`).
    pub profile: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesystemTable {
    pub allow_write: Option<Vec<String>>,
    pub deny_write: Option<Vec<String>>,
    pub deny_read: Option<Vec<String>>,
    pub allow_read: Option<Vec<String>>,
    /// Credential stores (by name: `ssh`, `aws`, `docker`, …; `cordon explain` lists them)
    /// that commands and tools may read. Every other one is hidden and refused. A project's
    /// file may not expose any unless the project is trusted.
    pub expose_credentials: Option<Vec<String>>,
    /// npm, Yarn, pip, cargo and go get caches of the project's own, kept between its runs
    /// under cordon's cache directory, instead of the home directory's (which the sandbox keeps
    /// read-only, and which a command could poison for later builds on the host).
    pub private_caches: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkTable {
    pub allow_domains: Option<Vec<String>>,
    pub deny_domains: Option<Vec<String>>,
    pub allow_private_ips: Option<bool>,
    pub allow_local_binding: Option<bool>,
    pub allow_unix_sockets: Option<Vec<String>>,
    pub upstream_proxy: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvTable {
    /// Variables passed besides the built-in allowlist: a name passes whatever it holds, a
    /// pattern with `*` only what does not look like a credential.
    pub keep: Option<Vec<String>>,
    /// Variables withheld even where the allowlist or a `keep` pattern would pass them:
    /// patterns with `*`, case ignored.
    pub deny: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsTable {
    /// Processes (and threads) at once, 1 to 4194304.
    #[serde(default, deserialize_with = "bounds::limits_max_processes")]
    #[schemars(range(min = 1, max = 4_194_304))]
    pub max_processes: Option<u64>,
    /// `512M`, `4G`: 1M to 1048576G.
    #[serde(default, deserialize_with = "bounds::limits_memory")]
    pub memory: Option<String>,
    /// CPU seconds per process, 1 to 31536000 (a year).
    #[serde(default, deserialize_with = "bounds::limits_cpu_time")]
    #[schemars(range(min = 1, max = 31_536_000))]
    pub cpu_time: Option<u64>,
    /// A share of the CPUs, 0.001 to 4096.
    #[serde(default, deserialize_with = "bounds::limits_cpus")]
    #[schemars(range(min = 0.001, max = 4096))]
    pub cpus: Option<f64>,
    /// Seconds each command may run, 0.001 to 31536000 (a year).
    #[serde(default, deserialize_with = "bounds::limits_timeout")]
    #[schemars(range(min = 0.001, max = 31_536_000))]
    pub timeout: Option<f64>,
    /// Commands one `cordon exec` or `cordon mcp` session may run at once, 1 to 256 (default
    /// 16); one more is refused until one has ended. Read when the session starts.
    #[serde(default, deserialize_with = "bounds::limits_max_commands")]
    #[schemars(range(min = 1, max = 256))]
    pub max_commands: Option<u64>,
    /// Processes (and threads) all commands of one `exec` or `mcp` session may have together,
    /// 1 to 4194304 (default: half the host's pid_max). Each command may have at most this
    /// divided by `max_commands`. Read when the session starts.
    #[serde(default, deserialize_with = "bounds::limits_max_session_processes")]
    #[schemars(range(min = 1, max = 4_194_304))]
    pub max_session_processes: Option<u64>,
}

/// Tool settings for the policy, as Gemini CLI's `tools.allowed` and `tools.exclude`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyTable {
    /// Allowed without asking: a tool name, or `run_shell_command(command prefix)`.
    pub allowed_tools: Option<Vec<String>>,
    /// Never run, in the same forms.
    pub excluded_tools: Option<Vec<String>>,
}

/// Paths a command's own failures touch that are not worth reporting (`npm` writing its logs).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IgnoreRule {
    /// A command pattern: `npm *`, or `*` for every command.
    pub command: String,
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LockTable {
    /// Only the managed `network.allow_domains` count.
    pub only_managed_domains: Option<bool>,
    /// Only the managed `filesystem.allow_read` count.
    pub only_managed_read_paths: Option<bool>,
    /// `sandbox.enabled` and `sandbox.fail_if_unavailable` cannot be turned off.
    pub sandbox_required: Option<bool>,
    /// No command runs outside the sandbox: `excluded_commands` and
    /// `allow_unsandboxed_commands` from other layers are ignored.
    pub no_unsandboxed_commands: Option<bool>,
}

/// Reads one settings file; the error names the file, the line and the key, and suggests the
/// key meant when one is misspelt.
pub fn parse(path: &Path, text: &str) -> anyhow::Result<SettingsFile> {
    toml::from_str(text).map_err(|e| {
        let mut message = format!("{}: {}", path.display(), e.to_string().trim_end());
        if let Some(hint) = did_you_mean(&e.to_string()) {
            message.push_str(&format!("\n{hint}"));
        }
        anyhow::anyhow!(message)
    })
}

/// From toml's "unknown field `x`, expected one of `a`, `b`": the closest expected name.
fn did_you_mean(error: &str) -> Option<String> {
    let rest = error.split("unknown field `").nth(1)?;
    let (unknown, rest) = rest.split_once('`')?;
    let expected = rest.split("expected").nth(1)?;
    let best = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|k| (strsim::osa_distance(unknown, k), k))
        .min()?;
    (best.0 <= 3 || best.1.contains(unknown) || unknown.contains(best.1))
        .then(|| format!("did you mean `{}`?", best.1))
}

/// The JSON Schema of `cordon.toml`, for editors (Taplo, Even Better TOML).
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(SettingsFile)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_key_is_named_with_its_line_and_the_key_meant() {
        let text = "[network]\nallow_domains = [\"a.com\"]\nalow_private_ips = true\n";
        let e = parse(Path::new("/x/cordon.toml"), text)
            .expect_err("unknown key")
            .to_string();
        assert!(e.starts_with("/x/cordon.toml: "), "{e}");
        assert!(e.contains("line 3"), "{e}");
        assert!(e.contains("did you mean `allow_private_ips`?"), "{e}");
        let e = parse(Path::new("c.toml"), "[sandbx]\n")
            .expect_err("table")
            .to_string();
        assert!(e.contains("did you mean `sandbox`?"), "{e}");
        let e = parse(Path::new("c.toml"), "[limits]\nmemory = 5\n")
            .expect_err("type")
            .to_string();
        assert!(e.contains("memory") && e.contains("line 2"), "{e}");
    }

    #[test]
    fn every_key_reads() {
        let text = r#"
            [sandbox]
            enabled = true
            fail_if_unavailable = true
            enabled_platforms = ["linux"]
            excluded_commands = ["docker *"]
            auto_allow_if_sandboxed = true
            allow_unsandboxed_commands = false
            [filesystem]
            allow_write = ["~/.cache"]
            deny_write = ["./.env"]
            deny_read = ["~/.ssh"]
            allow_read = ["~/.ssh/known_hosts"]
            [network]
            allow_domains = ["github.com"]
            deny_domains = ["evil.com"]
            allow_private_ips = false
            allow_local_binding = true
            allow_unix_sockets = ["/run/x.sock"]
            upstream_proxy = "http://127.0.0.1:3128"
            [env]
            keep = ["GH_TOKEN"]
            deny = ["MYCORP_*"]
            [limits]
            max_processes = 100
            memory = "1G"
            cpu_time = 60
            cpus = 1.5
            timeout = 30
            [[ignore_violations]]
            command = "npm *"
            paths = ["~/.npm/_logs"]
            [policy]
            allowed_tools = ["run_shell_command(git status)"]
            excluded_tools = ["web_fetch"]
            [lock]
            only_managed_domains = true
            only_managed_read_paths = true
            sandbox_required = true
            no_unsandboxed_commands = true
        "#;
        let f = parse(Path::new("c.toml"), text).expect("parse");
        assert_eq!(f.limits.expect("limits").cpus, Some(1.5));
        assert_eq!(f.lock.expect("lock").sandbox_required, Some(true));
    }
}
