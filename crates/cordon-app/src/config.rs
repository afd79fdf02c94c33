//! A run's configuration: where it comes from ([`Sources`]: the settings files' places and the
//! command line as their last layer) and what it is once they are merged ([`RunConfig`]).
//!
//! Flags are one settings layer among the others, merged once, here. What a child process of
//! cordon needs to merge again (a run's proxy follows edited settings; each run of `exec`
//! reads the settings as they are when it starts) is the [`Sources`], sent to it typed, never
//! the merged values written back as flags.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::bounds;
use crate::settings::{self, Layer, LayerValues, Places, Settings, Sourced, all, value};

/// Where a run's settings come from.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sources {
    /// `--profile NAME`: one of [`settings::PROFILES`], applied over the files.
    pub profile: Option<String>,
    /// `--settings FILE`, absolute: a cordon.toml or another tool's settings, read as one.
    pub settings_file: Option<PathBuf>,
    /// The command line (or an embedding program): the last and strongest layer.
    pub flags: LayerValues,
    /// Let the project's `.cordon/cordon.toml` widen what the sandbox allows.
    pub trust_project: bool,
    /// `--network host`: no settings key says this.
    pub host_network: bool,
    /// `--resolve NAME=ADDRESS`, for the proxy: no settings key says this either.
    pub resolve: Vec<String>,
    /// `cordon run --agent NAME`: the agent's own directories and hosts, added to what the
    /// settings allow ([`crate::agents::profile`]).
    #[serde(default)]
    pub agent: Option<crate::agents::Agent>,
}

impl Sources {
    /// `--settings` is read from wherever the run's process stands, which for `exec`'s and
    /// `mcp`'s runs is the directory each run asked for: it is named absolutely once.
    pub fn with_settings_file(mut self, file: Option<PathBuf>) -> anyhow::Result<Self> {
        self.settings_file = match file {
            Some(f) if f.is_relative() => Some(
                std::env::current_dir()
                    .context("cannot read the current directory")?
                    .join(f),
            ),
            other => other,
        };
        Ok(self)
    }

    /// Where each layer's file is looked for, seen from `cwd`.
    pub fn places(&self, cwd: &Path) -> Places {
        Places {
            profile: self.profile.clone(),
            given: self.settings_file.clone(),
            ..Places::from(cwd)
        }
    }

    /// Every layer merged, seen from this process's working directory; `also_trusted` trusts
    /// the project's file as the policy's `--trust-workspace` does.
    pub fn settings(&self, also_trusted: bool) -> anyhow::Result<Settings> {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        settings::load(
            &self.places(&cwd),
            self.flags.clone(),
            self.trust_project || also_trusted,
        )
    }

    /// The merged configuration of a run.
    pub fn resolve(&self) -> anyhow::Result<RunConfig> {
        self.resolve_trusting(false)
    }

    /// As [`Sources::resolve`], trusting the project's file also when `also_trusted` (the
    /// policy's `--trust-workspace`, for the choices a server makes for all its runs).
    pub fn resolve_trusting(&self, also_trusted: bool) -> anyhow::Result<RunConfig> {
        RunConfig::from_settings(self.settings(also_trusted)?, self)
    }

    /// These sources for a `cordon mcp` worker in a container that shows the host only at
    /// `shown` (absolute): path flags elsewhere name what the container does not have at all,
    /// so they are left out rather than fail to resolve there; Unix sockets are not passed in.
    pub fn for_container(&self, cwd: &Path, shown: &[PathBuf]) -> Sources {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let inside = |p: &PathBuf| {
            let abs = match (p.strip_prefix("~"), &home) {
                (Ok(rest), Some(home)) => home.join(rest),
                _ => cwd.join(p),
            };
            shown.iter().any(|s| abs.starts_with(s))
        };
        let mut out = self.clone();
        out.flags.deny_read.retain(inside);
        out.flags.deny_write.retain(inside);
        // An empty list in a layer would say "none", not "nothing said".
        out.flags.allow_read = out
            .flags
            .allow_read
            .take()
            .map(|mut list| {
                list.retain(inside);
                list
            })
            .filter(|list| !list.is_empty());
        out.flags.allow_unix_sockets = None;
        out
    }

    /// The places runs may write besides the working directory, as given (`--allow-write`).
    pub fn allow_write(&self) -> &[PathBuf] {
        self.flags.allow_write.as_deref().unwrap_or_default()
    }
}

/// Commands one `exec` or `mcp` session runs at once unless the settings say otherwise. An
/// agent runs a few side by side (a server, a watcher, a build, tests), and cordon's own
/// throughput is measured with 16 in flight; the session's processes are the same whatever
/// this is, and a sixteenth of half the smallest usual `pid_max` (32768) is 1024 each.
pub const DEFAULT_MAX_COMMANDS: u64 = 16;

/// The processes all commands of one session may have together unless the settings say
/// otherwise: half the host's `pid_max`, so that whatever they do, the host keeps the other
/// half for itself (`pid_max` counts threads too, and a full table stops every fork).
pub fn default_session_processes() -> u64 {
    // The kernel's own default where /proc cannot tell (another OS).
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(32_768);
    (pid_max / 2).max(1)
}

/// What holds for a whole `exec` or `mcp` session rather than for one run: how many commands
/// run at once, and how many processes they may have together. Each run gets an equal share
/// of the processes ([`SessionLimits::share`]) as an upper bound on its own process limit, so
/// that the session's runs together stay within it on every backend that bounds a run's
/// processes, with no control group for the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionLimits {
    pub max_commands: u64,
    pub max_processes: u64,
}

impl SessionLimits {
    /// From the merged settings, with the defaults where they say nothing.
    pub fn from_config(config: &RunConfig) -> SessionLimits {
        SessionLimits {
            max_commands: config.max_commands.unwrap_or(DEFAULT_MAX_COMMANDS),
            max_processes: config
                .max_session_processes
                .unwrap_or_else(default_session_processes),
        }
    }

    /// The most processes each run may have: its equal share of the session's (one at least).
    pub fn share(&self) -> u64 {
        (self.max_processes / self.max_commands.max(1)).max(1)
    }
}

/// Which hosts a run may reach, merged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetConfig {
    pub allow_domains: Vec<String>,
    pub deny_domains: Vec<String>,
    pub allow_private_ips: bool,
    pub upstream_proxy: Option<String>,
    pub resolve: Vec<String>,
}

impl NetConfig {
    fn from_settings(s: &Settings, resolve: &[String]) -> Self {
        NetConfig {
            allow_domains: value(s.allow_domains.clone()).unwrap_or_default(),
            deny_domains: all(s.deny_domains.clone()),
            allow_private_ips: value(s.allow_private_ips.clone()).unwrap_or(false),
            upstream_proxy: value(s.upstream_proxy.clone()),
            resolve: resolve.to_vec(),
        }
    }

    /// Whether any host is allowed (then a run needs a proxy).
    pub fn any_allowed(&self) -> bool {
        !self.allow_domains.is_empty()
    }

    pub fn rules(&self) -> anyhow::Result<cordon_net::Rules> {
        let parse = |flag: &str, list: &[String]| -> anyhow::Result<Vec<cordon_net::DomainRule>> {
            list.iter()
                .map(|r| r.parse().map_err(|e| anyhow::anyhow!("{flag} {e}")))
                .collect()
        };
        Ok(cordon_net::Rules {
            allow: parse("--allow-domain", &self.allow_domains)?,
            deny: parse("--deny-domain", &self.deny_domains)?,
            allow_private_ips: self.allow_private_ips,
        })
    }

    /// `--resolve`: the addresses to answer for names instead of asking DNS.
    pub fn resolve_table(
        &self,
    ) -> anyhow::Result<std::collections::HashMap<String, Vec<std::net::IpAddr>>> {
        let mut table: std::collections::HashMap<String, Vec<std::net::IpAddr>> =
            Default::default();
        for entry in &self.resolve {
            let (name, addr) = entry
                .split_once('=')
                .with_context(|| format!("--resolve {entry:?}: write NAME=ADDRESS"))?;
            let name = cordon_net::rules::normalise_name(name)
                .map_err(|e| anyhow::anyhow!("--resolve {entry:?}: {e}"))?;
            let addr: std::net::IpAddr = addr
                .parse()
                .with_context(|| format!("--resolve {entry:?}: `{addr}` is not an IP address"))?;
            table.entry(name).or_default().push(addr);
        }
        Ok(table)
    }

    pub fn upstream(&self) -> anyhow::Result<Option<cordon_net::Upstream>> {
        self.upstream_proxy
            .as_deref()
            .map(|u| {
                u.parse()
                    .map_err(|e| anyhow::anyhow!("--upstream-proxy {e}"))
            })
            .transpose()
    }

    /// The proxy's configuration; every value is checked, so a typo is an error.
    pub fn proxy_config(&self) -> anyhow::Result<cordon_net::ProxyConfig> {
        let mut config = cordon_net::ProxyConfig::new(self.rules()?);
        config.resolve = self.resolve_table()?;
        config.upstream = self.upstream()?;
        Ok(config)
    }
}

/// A run's configuration, every settings layer merged under the command line.
#[derive(Debug, Clone, Default)]
pub struct RunConfig {
    pub allow_write: Vec<PathBuf>,
    /// Only those that exist (or are patterns, or were given as flags): a shared settings file
    /// may name paths this machine lacks.
    pub deny_write: Vec<PathBuf>,
    pub deny_read: Vec<PathBuf>,
    pub allow_read: Vec<PathBuf>,
    /// The credential stores not hidden (by name).
    pub expose_credentials: Vec<String>,
    pub allow_unix_sockets: Vec<PathBuf>,
    pub host_network: bool,
    pub allow_local_binding: bool,
    pub fail_if_unavailable: bool,
    /// Names (or `*` patterns) passed besides the allowlist, each with who asked for it.
    pub keep_env: Vec<cordon_sandbox::env::Keep>,
    pub deny_env: Vec<String>,
    pub max_processes: Option<u64>,
    pub memory: Option<u64>,
    pub cpu_time: Option<u64>,
    /// Thousandths of a CPU.
    pub cpus: Option<u64>,
    /// Seconds, held to [`bounds::TIMEOUT`] where they were read.
    pub timeout: Option<f64>,
    /// `limits.max_commands`: for the session, not for one run ([`SessionLimits`]).
    pub max_commands: Option<u64>,
    /// `limits.max_session_processes`: for the session too.
    pub max_session_processes: Option<u64>,
    pub net: NetConfig,
    /// `sandbox.backend`, `container.image` and `container.profile`.
    pub backend: Option<String>,
    pub container_image: Option<String>,
    pub container_profile: Option<String>,
    /// `ignore_violations`: denials not worth reporting, `~/` expanded.
    pub ignore_violations: cordon_sandbox::seatbelt::IgnoreViolations,
    /// What the merge left out, and why, for a warning.
    pub left_out: Vec<String>,
    /// Where it came from, for whatever follows the settings through the run (its proxy).
    pub sources: Sources,
    /// `--agent`: its directories of commands, hooks and the like, read-only in the run.
    pub agent_controls: Vec<PathBuf>,
    /// Package managers' caches of the project's own ([`crate::caches`]).
    pub private_caches: bool,
    /// `--agent`: its settings files, read just before the run, where what would run or allow
    /// something after it is undone.
    pub agent_settings: Option<cordon_sandbox::kept::SettingsFiles>,
}

impl RunConfig {
    fn from_settings(s: Settings, sources: &Sources) -> anyhow::Result<Self> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let expand = |p: &String| match (p.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(p),
        };
        let ignore_violations = cordon_sandbox::seatbelt::IgnoreViolations {
            rules: s
                .ignore_violations
                .iter()
                .map(|r| {
                    (
                        r.value.command.clone(),
                        r.value.paths.iter().map(expand).collect(),
                    )
                })
                .collect(),
        };
        // A shared settings file may name paths this machine lacks (~/.aws); nothing to
        // protect there. The command line's own paths must exist, as before.
        let present = |list: Vec<Sourced<PathBuf>>| -> Vec<PathBuf> {
            list.into_iter()
                .filter(|p| {
                    p.from.layer == Layer::Flags
                        || cordon_sandbox::pattern::is_wild(p.value.as_os_str())
                        || std::fs::symlink_metadata(&p.value).is_ok()
                })
                .map(|p| p.value)
                .collect()
        };
        let mut net = NetConfig::from_settings(&s, &sources.resolve);
        let mut allow_write = value(s.allow_write).unwrap_or_default();
        let mut left_out = s.left_out;
        let mut keep_env: Vec<cordon_sandbox::env::Keep> = s
            .keep_env
            .map(|kept| {
                let by = match kept.from.layer {
                    Layer::Flags => "--keep-env".to_string(),
                    _ => format!("env.keep in {}", kept.from),
                };
                kept.value
                    .into_iter()
                    .map(|name| cordon_sandbox::env::Keep::new(name, by.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let mut expose_credentials = value(s.expose_credentials).unwrap_or_default();
        let (mut agent_controls, mut agent_settings) = (Vec::new(), None);
        let caches_setting = value(s.private_caches);
        let mut private_caches = caches_setting.unwrap_or(false);
        if let Some(agent) = sources.agent {
            let profile = crate::agents::profile::profile(
                agent,
                home.as_deref()
                    .context("HOME is not set; --agent needs it")?,
                std::env::var_os("CODEX_HOME")
                    .filter(|h| !h.is_empty())
                    .map(PathBuf::from)
                    .as_deref(),
            );
            for dir in &profile.dirs {
                std::fs::create_dir_all(dir).with_context(|| {
                    format!("--agent {}: cannot make {}", agent.name(), dir.display())
                })?;
            }
            agent_settings = Some(cordon_sandbox::kept::SettingsFiles {
                paths: profile.settings_files,
                harmless: profile
                    .harmless_keys
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            });
            agent_controls = profile.control_dirs;
            // An agent installs packages as it works; unless the settings say otherwise,
            // into the project's caches rather than the host's.
            private_caches = caches_setting.unwrap_or(true);
            allow_write.extend(profile.dirs);
            expose_credentials.push(profile.credentials.to_string());
            let by = format!("--agent {}", agent.name());
            keep_env.extend(
                profile
                    .keep_env
                    .iter()
                    .map(|name| cordon_sandbox::env::Keep::new(*name, by.clone())),
            );
            keep_env.extend(
                profile
                    .settings_env
                    .iter()
                    .map(|name| cordon_sandbox::env::Keep::scrubbed(*name, by.clone())),
            );
            if s.locks.only_managed_domains {
                left_out.push(format!(
                    "--agent {}: its hosts ({}), as the managed settings allow only their own (only_managed_domains)",
                    agent.name(),
                    profile.domains.join(", ")
                ));
            } else {
                net.allow_domains
                    .extend(profile.domains.iter().map(|d| d.to_string()));
            }
        }
        Ok(RunConfig {
            net,
            allow_write,
            deny_write: present(s.deny_write),
            deny_read: present(s.deny_read),
            allow_read: value(s.allow_read).unwrap_or_default(),
            expose_credentials,
            allow_unix_sockets: value(s.allow_unix_sockets).unwrap_or_default(),
            host_network: sources.host_network,
            allow_local_binding: value(s.allow_local_binding).unwrap_or(false),
            fail_if_unavailable: value(s.fail_if_unavailable).unwrap_or(false),
            keep_env,
            deny_env: all(s.deny_env),
            max_processes: value(s.max_processes),
            memory: value(s.memory)
                .map(|m| bounds::memory(&m).map_err(anyhow::Error::msg))
                .transpose()?,
            cpu_time: value(s.cpu_time),
            cpus: value(s.cpus).map(|c| (c * 1000.0).round() as u64),
            timeout: value(s.timeout),
            max_commands: value(s.max_commands),
            max_session_processes: value(s.max_session_processes),
            backend: value(s.backend),
            container_image: value(s.container_image),
            container_profile: value(s.container_profile),
            ignore_violations,
            left_out,
            sources: sources.clone(),
            agent_controls,
            agent_settings,
            private_caches,
        })
    }

    /// What the run keeps of the environment besides the allowlist, and withholds from it.
    pub fn env_rules(&self) -> anyhow::Result<cordon_sandbox::env::EnvRules> {
        Ok(cordon_sandbox::env::EnvRules::new(
            self.keep_env.clone(),
            &self.deny_env,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::Sources;
    use crate::settings::LayerValues;

    /// A `cordon mcp` worker gets the path settings for what its container shows, and no
    /// others: elsewhere there is nothing inside to resolve them against.
    #[test]
    fn a_container_worker_keeps_the_path_flags_for_what_it_shows() {
        let p = |list: &[&str]| list.iter().map(PathBuf::from).collect::<Vec<_>>();
        let sources = Sources {
            flags: LayerValues {
                deny_read: p(&["secret", "/elsewhere/keys"]),
                deny_write: p(&["/ws/.env", "/other/x"]),
                allow_read: Some(p(&["/extra/pub"])),
                allow_unix_sockets: Some(p(&["/run/some.sock"])),
                allow_write: Some(p(&["/extra"])),
                ..LayerValues::default()
            },
            ..Sources::default()
        };
        let shown = p(&["/ws", "/extra"]);
        let kept = sources.for_container(Path::new("/ws"), &shown).flags;
        assert_eq!(kept.deny_read, p(&["secret"]));
        assert_eq!(kept.deny_write, p(&["/ws/.env"]));
        assert_eq!(kept.allow_read, Some(p(&["/extra/pub"])));
        assert_eq!(kept.allow_unix_sockets, None);
        assert_eq!(kept.allow_write, Some(p(&["/extra"])));
        // A list left empty says nothing, rather than "none".
        let outside = sources.for_container(Path::new("/ws"), &p(&["/ws"])).flags;
        assert_eq!(outside.allow_read, None);
    }
}
