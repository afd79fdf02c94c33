//! Which policy decides: the flags or settings that name the policy files, read into an engine.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use cordon_policy::{
    ApprovalMode, CheckOptions, Environment, PolicyEngine, PolicySet, PolicySources, SettingsRules,
    load,
};

use crate::user_policy_dir;

/// Where the policy comes from and how it is asked: what `--mode`, `--policy-dir`,
/// `--workspace` and the other policy flags say, as plain values.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct PolicyConfig {
    /// Approval mode: default, autoEdit, plan or yolo.
    pub mode: ApprovalMode,
    /// Nobody can answer questions: ask_user becomes deny.
    pub non_interactive: bool,
    /// The user tier's policy directories or files; none means `~/.config/cordon/policies`.
    pub policy_dirs: Vec<PathBuf>,
    /// Extension policy directories; extensions may only deny or ask.
    pub extension_dirs: Vec<PathBuf>,
    /// Workspace directories (none: the current directory). File arguments must stay inside
    /// these, and their `.cordon/policies` form the workspace tier.
    pub workspaces: Vec<PathBuf>,
    /// Let the workspace's own policy files allow things.
    pub trust_workspace: bool,
    /// Leave out cordon's built-in default policies.
    pub no_defaults: bool,
    /// The default tier's policy directories or files, replacing the built-in defaults.
    pub default_dirs: Vec<PathBuf>,
    /// Tools to allow without asking (Gemini CLI's `tools.allowed`).
    pub allowed_tools: Vec<String>,
    /// Tools never to run (Gemini CLI's `tools.exclude`).
    pub excluded_tools: Vec<String>,
    /// Other tool names whose `command` argument is a shell script.
    pub shell_tools: Vec<String>,
}

/// `/etc/cordon/policies`, unless a packager or a test points elsewhere. The directory is
/// refused anyway if anyone but root can write it.
fn admin_dir() -> PathBuf {
    std::env::var_os("CORDON_ADMIN_POLICY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/cordon/policies"))
}

/// cordon's own settings and policy directories (the user's and the administrator's) and its
/// state (the guard journal): a sandboxed command must not rewrite the rules it runs under, or
/// what undoes its plants, even where it may write around them.
pub fn own_settings_dirs() -> Vec<PathBuf> {
    user_policy_dir()
        .into_iter()
        .chain([admin_dir()])
        .filter_map(|policies| policies.parent().map(Path::to_path_buf))
        .chain(crate::user_state_dir())
        .collect()
}

impl PolicyConfig {
    /// Every file and directory the policy is read from (whether or not it exists): a
    /// `cordon mcp` worker in a container must see each of them, at the same path.
    pub fn source_paths(&self) -> anyhow::Result<Vec<PathBuf>> {
        let env = self.environment()?;
        let sources = self.sources_without_settings(&env)?;
        let places = crate::settings::Places::from(&env.cwd);
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
            // cordon runs every command it decides with bash (`cordon_sandbox::shell`).
            shell: cordon_policy::shell::Dialect::Bash,
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
    pub fn settings(&self, env: &Environment) -> anyhow::Result<crate::settings::Settings> {
        let flags = crate::settings::LayerValues {
            allowed_tools: crate::settings::some(&self.allowed_tools),
            excluded_tools: self.excluded_tools.clone(),
            ..Default::default()
        };
        crate::settings::load(
            &crate::settings::Places::from(&env.cwd),
            flags,
            self.trust_workspace,
        )
    }

    /// The tool settings: cordon.toml's `[policy]` tables merged under these flags.
    fn tool_settings(s: &crate::settings::Settings) -> SettingsRules {
        SettingsRules {
            allowed_tools: crate::settings::value(s.allowed_tools.clone()).unwrap_or_default(),
            excluded_tools: crate::settings::all(s.excluded_tools.clone()),
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

    /// What the policy files hold, whatever their times: for a copy of them elsewhere (a
    /// container's mount, a pod's ConfigMap) to be checked against these.
    pub fn content_fingerprint(&self) -> u64 {
        self.source_paths().map_or(0, |paths| {
            crate::settings::content_fingerprint(paths.iter().map(PathBuf::as_path))
        })
    }

    /// Loads every source and builds the engine; a policy that does not load is a bad call.
    pub fn engine(&self) -> anyhow::Result<PolicyEngine> {
        self.engine_and_settings().map(|(engine, _)| engine)
    }

    /// The engine and the merged settings it was built with, read once.
    pub fn engine_and_settings(&self) -> anyhow::Result<(PolicyEngine, crate::settings::Settings)> {
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
