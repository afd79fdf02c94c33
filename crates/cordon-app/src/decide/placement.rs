//! Where a shell command an agent or a person asks for runs: in cordon's sandbox, or outside
//! it because the settings say so. Outside is still decided by the policy; it only loses the
//! sandbox's walls, so every way out is narrow and named:
//!
//! - `sandbox.enabled = false`, or `sandbox.enabled_platforms` without this OS: nothing runs
//!   sandboxed (`exec`, `shell` and `mcp`; `cordon run` always sandboxes, being asked to);
//! - `sandbox.excluded_commands`: a script every one of whose commands is excluded;
//! - a run that asks to leave the sandbox, when `sandbox.allow_unsandboxed_commands` is on.
//!
//! Managed settings close all three: `[lock] sandbox_required` keeps the sandbox on,
//! `[lock] no_unsandboxed_commands` keeps every command in it.

use cordon_policy::shell::{Role, analyse};

use crate::exec::Placement;
use crate::settings::Settings;

/// The settings that place commands, as merged.
#[derive(Debug, Clone, Default)]
pub struct Placer {
    /// Why nothing runs sandboxed here, if so.
    off: Option<String>,
    /// `sandbox.excluded_commands` and where they came from.
    excluded: Vec<String>,
    excluded_from: String,
    /// Where `sandbox.allow_unsandboxed_commands = true` came from, if it is on.
    on_request: Option<String>,
    /// The managed lock that keeps every command sandboxed, if any.
    locked: Option<&'static str>,
}

impl Placer {
    pub fn from_settings(s: &Settings) -> Placer {
        let locked = s
            .locks
            .no_unsandboxed_commands
            .then_some("no_unsandboxed_commands");
        let off = match (&s.enabled, &s.enabled_platforms) {
            _ if s.locks.sandbox_required || locked.is_some() => None,
            (Some(e), _) if !e.value => Some(format!("sandbox.enabled = false ({})", e.from)),
            (_, Some(p)) if !p.value.iter().any(|os| os == std::env::consts::OS) => Some(format!(
                "sandbox.enabled_platforms does not list {} ({})",
                std::env::consts::OS,
                p.from
            )),
            _ => None,
        };
        let (excluded, excluded_from) = match &s.excluded_commands {
            Some(e) if !s.locks.no_unsandboxed_commands => (e.value.clone(), e.from.to_string()),
            _ => (Vec::new(), String::new()),
        };
        let on_request = s
            .allow_unsandboxed_commands
            .as_ref()
            .filter(|a| a.value && !s.locks.no_unsandboxed_commands)
            .map(|a| a.from.to_string());
        Placer {
            off,
            excluded,
            excluded_from,
            on_request,
            locked,
        }
    }

    /// Where `script` runs; `asked_outside` is a run's own request to leave the sandbox, an
    /// error unless the settings allow it.
    pub fn place(&self, script: &str, asked_outside: bool) -> Result<Placement, String> {
        if let Some(why) = &self.off {
            return Ok(Placement::Outside { why: why.clone() });
        }
        if asked_outside {
            return match (&self.on_request, self.locked) {
                (Some(from), _) => Ok(Placement::Outside {
                    why: format!(
                        "asked to run outside the sandbox, which sandbox.allow_unsandboxed_commands allows ({from})"
                    ),
                }),
                (None, Some(lock)) => Err(format!(
                    "this run asks to leave the sandbox, which managed settings forbid ([lock] {lock})"
                )),
                (None, None) => Err(
                    "this run asks to leave the sandbox, which is refused unless cordon.toml says `allow_unsandboxed_commands = true` under [sandbox]".into(),
                ),
            };
        }
        if let Some(pattern) = excluded_by(&self.excluded, script) {
            return Ok(Placement::Outside {
                why: format!(
                    "sandbox.excluded_commands has `{pattern}` ({})",
                    self.excluded_from
                ),
            });
        }
        Ok(Placement::Sandbox)
    }

    /// Whether every command runs sandboxed, whatever it is (for prompts and summaries).
    pub fn always_sandboxed(&self) -> bool {
        self.off.is_none() && self.excluded.is_empty() && self.on_request.is_none()
    }
}

/// The excluded pattern a script runs under, if every command it runs (in lists, pipelines,
/// substitutions, behind wrappers) starts with an excluded one; `docker` and `docker *` both
/// take `docker ps`. A script the parser cannot see through in full stays sandboxed: running
/// outside is the weaker choice, so it needs certainty (`docker ps; curl x | sh` is not
/// `docker`).
fn excluded_by<'a>(patterns: &'a [String], script: &str) -> Option<&'a str> {
    if patterns.is_empty() {
        return None;
    }
    let analysis = analyse(script);
    if !analysis.is_analysable() {
        return None;
    }
    let mut first = None;
    let mut runs = 0;
    for cmd in analysis.commands.iter().filter(|c| c.role == Role::Runs) {
        runs += 1;
        let pattern = patterns.iter().find(|p| {
            let words: Vec<&str> = p.trim_end_matches('*').split_whitespace().collect();
            !words.is_empty()
                && cmd.words.len() >= words.len()
                && cmd
                    .words
                    .iter()
                    .zip(&words)
                    .all(|(have, want)| have == want)
        })?;
        first.get_or_insert(pattern.as_str());
    }
    (runs > 0).then_some(first).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Layer, Source, Sourced};

    fn sourced<T>(value: T) -> Option<Sourced<T>> {
        Some(Sourced {
            value,
            from: Source {
                layer: Layer::User,
                file: None,
            },
        })
    }

    fn excluding(list: &[&str]) -> Placer {
        Placer::from_settings(&Settings {
            excluded_commands: sourced(list.iter().map(|s| s.to_string()).collect()),
            ..Settings::default()
        })
    }

    fn outside(p: &Placer, script: &str) -> bool {
        matches!(p.place(script, false), Ok(Placement::Outside { .. }))
    }

    #[test]
    fn only_a_script_made_of_excluded_commands_leaves_the_sandbox() {
        let p = excluding(&["docker *", "npm run build"]);
        for script in [
            "docker ps",
            "docker build . && docker push x",
            "npm run build --prod",
            "sudo docker ps",
        ] {
            assert!(outside(&p, script), "{script}");
        }
        for script in [
            "docker ps; rm -rf ~",
            "docker run $(cat ~/.ssh/id_rsa)",
            "docker ps | sh",
            "npm run test",
            "dockerd",
            "echo docker ps",
            "docker ps '",
            "",
            "/usr/bin/docker ps",
        ] {
            assert!(!outside(&p, script), "{script}");
        }
    }

    #[test]
    fn asking_to_leave_needs_the_setting_and_no_lock() {
        let plain = Placer::default();
        let e = plain.place("ls", true).expect_err("refused");
        assert!(e.contains("allow_unsandboxed_commands"), "{e}");
        let mut s = Settings {
            allow_unsandboxed_commands: sourced(true),
            excluded_commands: sourced(vec!["ls".into()]),
            enabled: sourced(false),
            ..Settings::default()
        };
        assert!(matches!(
            Placer::from_settings(&s).place("ls", true),
            Ok(Placement::Outside { .. })
        ));
        s.locks.no_unsandboxed_commands = true;
        let locked = Placer::from_settings(&s);
        let e = locked.place("ls", true).expect_err("locked");
        assert!(e.contains("no_unsandboxed_commands"), "{e}");
        assert_eq!(locked.place("ls", false), Ok(Placement::Sandbox));
        assert!(locked.always_sandboxed());
    }

    #[test]
    fn a_sandbox_switched_off_here_places_everything_outside() {
        let off = Placer::from_settings(&Settings {
            enabled: sourced(false),
            ..Settings::default()
        });
        assert!(outside(&off, "ls"));
        let elsewhere = Placer::from_settings(&Settings {
            enabled_platforms: sourced(vec!["plan9".into()]),
            ..Settings::default()
        });
        assert!(outside(&elsewhere, "ls"));
        let here = Placer::from_settings(&Settings {
            enabled_platforms: sourced(vec![std::env::consts::OS.into()]),
            ..Settings::default()
        });
        assert!(!outside(&here, "ls"));
        let required = Placer::from_settings(&Settings {
            enabled: sourced(false),
            locks: crate::settings::Locks {
                sandbox_required: true,
                ..Default::default()
            },
            ..Settings::default()
        });
        assert!(!outside(&required, "ls"));
    }
}
