//! Flag groups more than one command takes, and what each means to the application core:
//! the policy flags are a [`PolicyConfig`], a call's flags a [`ToolCall`]; the sandbox flags
//! (sandbox.rs) are the command line's layer of the settings, the backend flags a
//! `BackendChoice`.
//!
//! The structs here have plain comments, not doc comments: clap would show a doc comment as
//! the `about` of each (deferred) subcommand that takes the struct.

#[cfg(unix)]
mod sandbox;

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use cordon_policy::{ApprovalMode, ToolCall};
use serde_json::Value;

pub use cordon_app::policy::PolicyConfig;
#[cfg(unix)]
pub use sandbox::{BackendFlags, NetFlags, RunArgs, SandboxFlags, SessionFlags};

fn parse_mode(s: &str) -> Result<ApprovalMode, String> {
    ApprovalMode::parse(s)
        .ok_or_else(|| format!("unknown mode `{s}`; use default, autoEdit, plan or yolo"))
}

// The flags that choose which rules apply, shared by `check` and `policy …`.
#[derive(Debug, Args, Clone)]
pub struct PolicyFlags {
    /// Approval mode: default, autoEdit, plan or yolo.
    #[arg(long, default_value = "default", value_parser = parse_mode)]
    pub mode: ApprovalMode,
    /// Nobody can answer questions: ask_user becomes deny.
    #[arg(long)]
    non_interactive: bool,
    /// Policy directory or file for the user tier (repeatable); replaces ~/.config/cordon/policies.
    #[arg(long = "policy-dir", value_name = "DIR")]
    pub policy_dirs: Vec<PathBuf>,
    /// Extension policy directory (repeatable); extensions may only deny or ask.
    #[arg(long = "extension-policy-dir", value_name = "DIR")]
    extension_dirs: Vec<PathBuf>,
    /// Workspace directory (repeatable; default: the current directory). File arguments must stay
    /// inside these, and their .cordon/policies form the workspace tier.
    #[arg(long = "workspace", value_name = "DIR")]
    workspaces: Vec<PathBuf>,
    /// Let the workspace's own policy files allow things (by default they may only deny or ask).
    #[arg(long)]
    trust_workspace: bool,
    /// Leave out cordon's built-in default policies.
    #[arg(long)]
    no_defaults: bool,
    /// Policy directory or file for the default tier (repeatable); replaces cordon's built-in
    /// defaults, e.g. with the defaults another agent ships.
    #[arg(
        long = "default-policy-dir",
        value_name = "DIR",
        conflicts_with = "no_defaults"
    )]
    default_dirs: Vec<PathBuf>,
    /// A tool to allow without asking, as in Gemini CLI's tools.allowed (repeatable);
    /// `run_shell_command(git status)` allows only that command prefix.
    #[arg(long = "allowed-tool", value_name = "TOOL")]
    allowed_tools: Vec<String>,
    /// A tool never to run, as in Gemini CLI's tools.exclude (repeatable).
    #[arg(long = "exclude-tool", value_name = "TOOL")]
    excluded_tools: Vec<String>,
    /// Another tool name whose `command` argument is a shell script (repeatable).
    #[arg(long = "shell-tool", value_name = "TOOL")]
    shell_tools: Vec<String>,
}

// One call given on the command line.
#[derive(Debug, Args, Clone)]
pub struct CallFlags {
    /// The tool's name, e.g. run_shell_command, read_file, mcp_github_create_issue.
    #[arg(long, value_name = "NAME")]
    tool: Option<String>,
    /// The call's arguments as a JSON object.
    #[arg(long, value_name = "JSON")]
    args: Option<String>,
    /// The MCP server the tool comes from.
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
    /// The tool's annotations as a JSON object (e.g. {"readOnlyHint":true}).
    #[arg(long, value_name = "JSON")]
    annotations: Option<String>,
    /// A shell command line to decide, as an agent's shell tool would run it:
    /// `cordon check 'git status && rm -rf ~'`, or its words after `--`. The same as
    /// `--tool run_shell_command --args '{"command": …}'`.
    #[arg(
        value_name = "COMMAND",
        trailing_var_arg = true,
        conflicts_with_all = ["tool", "args", "server", "annotations"]
    )]
    command: Vec<String>,
}

impl PolicyFlags {
    /// These flags as plain values, for the application core.
    pub fn config(&self) -> PolicyConfig {
        PolicyConfig {
            mode: self.mode,
            non_interactive: self.non_interactive,
            policy_dirs: self.policy_dirs.clone(),
            extension_dirs: self.extension_dirs.clone(),
            workspaces: self.workspaces.clone(),
            trust_workspace: self.trust_workspace,
            no_defaults: self.no_defaults,
            default_dirs: self.default_dirs.clone(),
            allowed_tools: self.allowed_tools.clone(),
            excluded_tools: self.excluded_tools.clone(),
            shell_tools: self.shell_tools.clone(),
        }
    }
}

pub fn parse_json_object(what: &str, text: &str) -> anyhow::Result<serde_json::Map<String, Value>> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => bail!(
            "{what} must be a JSON object, not {}",
            cordon_app::json_kind(&other)
        ),
        Err(e) => bail!("{what} is not valid JSON: {e}"),
    }
}

impl CallFlags {
    /// The shell command given as words: one word is a whole command line; several are a
    /// program and its arguments, quoted back into one line so that each stays one word.
    fn script(&self) -> anyhow::Result<Option<String>> {
        match self.command.as_slice() {
            [] => Ok(None),
            [line] => Ok(Some(line.clone())),
            words => shlex::try_join(words.iter().map(String::as_str))
                .map(Some)
                .map_err(|e| anyhow::anyhow!("the command's words cannot be quoted: {e}")),
        }
    }

    pub fn call(&self) -> anyhow::Result<ToolCall> {
        if let Some(script) = self.script()? {
            return Ok(ToolCall::new(
                "run_shell_command".to_string(),
                serde_json::json!({ "command": script }),
            ));
        }
        let Some(tool) = &self.tool else {
            bail!(
                "say what to decide: a shell command (`cordon check 'git status'`), --tool NAME \
                 with --args JSON, or --jsonl to read calls from standard input"
            )
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

    use super::{PolicyConfig, PolicyFlags};

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        policy: PolicyFlags,
    }

    fn parse(args: &[std::ffi::OsString]) -> PolicyFlags {
        let argv = std::iter::once("cordon".into()).chain(args.iter().cloned());
        Wrapper::try_parse_from(argv).expect("parses").policy
    }

    /// `cordon mcp`'s worker must decide as its launcher: every flag arrives as given in the
    /// typed request it is sent.
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
        let trip = |flags: &PolicyFlags| {
            let sent = serde_json::to_string(&flags.config()).expect("serialises");
            let got: PolicyConfig = serde_json::from_str(&sent).expect("reads back");
            assert_eq!(format!("{:?}", flags.config()), format!("{got:?}"));
        };
        trip(&parse(&given));
        trip(&parse(&["--no-defaults".into()]));
        // Every flag given made it into the config, so the trip above carried each one.
        let config = format!("{:?}", parse(&given).config());
        for value in [
            "AutoEdit",
            "/p one",
            "/e",
            "ws",
            "/d",
            "git status",
            "web_fetch",
            "bash",
        ] {
            assert!(config.contains(value), "{value} in {config}");
        }
    }
}
