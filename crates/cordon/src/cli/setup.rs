//! Turning flags into policy sources, an engine, and tool calls.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use cordon_policy::{
    CheckOptions, Environment, PolicyEngine, PolicySet, PolicySources, SettingsRules, ToolCall,
    load,
};
use serde_json::Value;

use super::{CallFlags, PolicyFlags, push_each};

/// `/etc/cordon/policies`, unless a packager or a test points elsewhere. The directory is
/// refused anyway if anyone but root can write it.
fn admin_dir() -> PathBuf {
    std::env::var_os("CORDON_ADMIN_POLICY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/cordon/policies"))
}

/// cordon's own settings and policy directories (the user's and the administrator's): a
/// sandboxed command must not rewrite the rules it runs under, even where it may write around
/// them.
pub fn own_settings_dirs() -> Vec<PathBuf> {
    user_policy_dir()
        .into_iter()
        .chain([admin_dir()])
        .filter_map(|policies| policies.parent().map(Path::to_path_buf))
        .collect()
}

pub use cordon_app::{user_policy_dir, user_settings_dir};

impl PolicyFlags {
    /// These flags as the command line that gives them, for a `cordon mcp` worker that must
    /// decide exactly as its launcher would.
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        let mut out: Vec<std::ffi::OsString> = vec!["--mode".into(), self.mode.as_str().into()];
        if self.non_interactive {
            out.push("--non-interactive".into());
        }
        push_each(&mut out, "--policy-dir", &self.policy_dirs);
        push_each(&mut out, "--extension-policy-dir", &self.extension_dirs);
        push_each(&mut out, "--workspace", &self.workspaces);
        push_each(&mut out, "--default-policy-dir", &self.default_dirs);
        push_each(&mut out, "--allowed-tool", &self.allowed_tools);
        push_each(&mut out, "--exclude-tool", &self.excluded_tools);
        push_each(&mut out, "--shell-tool", &self.shell_tools);
        if self.trust_workspace {
            out.push("--trust-workspace".into());
        }
        if self.no_defaults {
            out.push("--no-defaults".into());
        }
        out
    }

    /// Every file and directory the policy is read from (whether or not it exists): a
    /// `cordon mcp` worker in a container must see each of them, at the same path.
    pub fn source_paths(&self) -> anyhow::Result<Vec<PathBuf>> {
        let env = self.environment()?;
        let sources = self.sources_without_settings(&env)?;
        let places = cordon_app::settings::Places::from(&env.cwd);
        Ok(sources
            .user_dirs
            .iter()
            .chain(&sources.extension_dirs)
            .chain(&sources.default_dirs)
            .chain(&sources.workspace_dirs)
            .chain(sources.admin_dir.as_ref())
            .cloned()
            .chain(places.files().into_iter().map(Path::to_path_buf))
            .map(|p| env.cwd.join(p))
            .collect())
    }

    /// The workspace directories, absolute.
    pub fn workspace_dirs(&self) -> anyhow::Result<Vec<PathBuf>> {
        Ok(self.environment()?.workspaces)
    }
    pub fn options(&self) -> CheckOptions {
        CheckOptions {
            mode: self.mode,
            non_interactive: self.non_interactive,
        }
    }

    pub fn environment(&self) -> anyhow::Result<Environment> {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        let workspaces = if self.workspaces.is_empty() {
            vec![cwd.clone()]
        } else {
            self.workspaces.iter().map(|w| cwd.join(w)).collect()
        };
        for w in &workspaces {
            if !w.is_dir() {
                bail!("--workspace {}: not a directory", w.display());
            }
        }
        Ok(Environment { cwd, workspaces })
    }

    /// cordon.toml's layers merged under these flags (the workspace's file counts as trusted
    /// only with --trust-workspace).
    pub fn settings(&self, env: &Environment) -> anyhow::Result<cordon_app::settings::Settings> {
        let flags = cordon_app::settings::LayerValues {
            allowed_tools: cordon_app::settings::some(&self.allowed_tools),
            excluded_tools: self.excluded_tools.clone(),
            ..Default::default()
        };
        cordon_app::settings::load(
            &cordon_app::settings::Places::from(&env.cwd),
            flags,
            self.trust_workspace,
        )
    }

    /// The tool settings: cordon.toml's `[policy]` tables merged under these flags.
    fn tool_settings(s: &cordon_app::settings::Settings) -> SettingsRules {
        SettingsRules {
            allowed_tools: cordon_app::settings::value(s.allowed_tools.clone()).unwrap_or_default(),
            excluded_tools: cordon_app::settings::all(s.excluded_tools.clone()),
        }
    }

    pub fn sources(&self, env: &Environment) -> anyhow::Result<PolicySources> {
        Ok(PolicySources {
            settings: Self::tool_settings(&self.settings(env)?),
            ..self.sources_without_settings(env)?
        })
    }

    /// The policy sources, with the tool settings of the flags alone.
    fn sources_without_settings(&self, env: &Environment) -> anyhow::Result<PolicySources> {
        let user_dirs = if self.policy_dirs.is_empty() {
            user_policy_dir().into_iter().collect()
        } else {
            self.policy_dirs.clone()
        };
        Ok(PolicySources {
            builtin: !self.no_defaults && self.default_dirs.is_empty(),
            default_dirs: self.default_dirs.clone(),
            extension_dirs: self.extension_dirs.clone(),
            workspace_dirs: env
                .workspaces
                .iter()
                .map(|w| w.join(".cordon").join("policies"))
                .collect(),
            trust_workspace: self.trust_workspace,
            user_dirs,
            admin_dir: Some(admin_dir()),
            settings: SettingsRules {
                excluded_tools: self.excluded_tools.clone(),
                allowed_tools: self.allowed_tools.clone(),
            },
            shell_tools: self.shell_tools.clone(),
            required_dirs: self
                .policy_dirs
                .iter()
                .chain(&self.extension_dirs)
                .chain(&self.default_dirs)
                .cloned()
                .collect(),
        })
    }

    /// A fingerprint of every file the engine is built from (policy directories, settings
    /// layers): a long-running `check --jsonl` rebuilds its engine when it changes.
    pub fn fingerprint(&self) -> u64 {
        self.source_paths().map_or(0, |paths| {
            cordon_app::settings::fingerprint(paths.iter().map(PathBuf::as_path))
        })
    }

    /// Loads every source and builds the engine; a policy that does not load is a bad call.
    pub fn engine(&self) -> anyhow::Result<PolicyEngine> {
        self.engine_and_settings().map(|(engine, _)| engine)
    }

    /// The engine and the merged settings it was built with, read once.
    pub fn engine_and_settings(
        &self,
    ) -> anyhow::Result<(PolicyEngine, cordon_app::settings::Settings)> {
        let env = self.environment()?;
        let settings = self.settings(&env)?;
        let set: PolicySet = load(&PolicySources {
            settings: Self::tool_settings(&settings),
            ..self.sources_without_settings(&env)?
        });
        for w in set.issues.iter().filter(|i| !i.is_error()) {
            eprintln!("cordon: {w}");
        }
        let engine = PolicyEngine::new(set, env).map_err(|errors| {
            let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
            anyhow::anyhow!(
                "the policy files have {} error(s); cordon will not decide with a policy it cannot read in full:\n{}",
                errors.len(),
                list.join("\n")
            )
        })?;
        Ok((engine, settings))
    }
}

pub fn parse_json_object(what: &str, text: &str) -> anyhow::Result<serde_json::Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => bail!("{what} must be a JSON object, not {}", kind(&other)),
        Err(e) => bail!("{what} is not valid JSON: {e}"),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl CallFlags {
    pub fn call(&self) -> anyhow::Result<ToolCall> {
        let Some(tool) = &self.tool else {
            bail!("--tool NAME is required (or use --jsonl)")
        };
        if tool.is_empty() {
            bail!("--tool cannot be empty");
        }
        let args = match &self.args {
            Some(a) => Value::Object(parse_json_object("--args", a)?),
            None => Value::Object(Default::default()),
        };
        let mut call = ToolCall::new(tool.clone(), args);
        call.server = self.server.clone();
        if let Some(a) = &self.annotations {
            call.annotations = Some(parse_json_object("--annotations", a)?);
        }
        Ok(call)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::PolicyFlags;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        policy: PolicyFlags,
    }

    fn parse(args: &[std::ffi::OsString]) -> PolicyFlags {
        let argv = std::iter::once("cordon".into()).chain(args.iter().cloned());
        Wrapper::try_parse_from(argv).expect("parses").policy
    }

    /// `cordon mcp`'s worker must decide as its launcher: every flag arrives as given.
    #[test]
    fn every_policy_flag_survives_the_trip_to_a_worker() {
        let given: Vec<std::ffi::OsString> = [
            "--mode",
            "autoEdit",
            "--non-interactive",
            "--policy-dir",
            "/p one",
            "--policy-dir",
            "/p2",
            "--extension-policy-dir",
            "/e",
            "--workspace",
            "ws",
            "--trust-workspace",
            "--default-policy-dir",
            "/d",
            "--allowed-tool",
            "run_shell_command(git status)",
            "--exclude-tool",
            "web_fetch",
            "--shell-tool",
            "bash",
        ]
        .iter()
        .map(Into::into)
        .collect();
        let flags = parse(&given);
        let again = parse(&flags.to_args());
        assert_eq!(format!("{flags:?}"), format!("{again:?}"));
        let no_defaults = parse(&["--no-defaults".into()]);
        assert_eq!(
            format!("{no_defaults:?}"),
            format!("{:?}", parse(&no_defaults.to_args()))
        );
    }
}
