//! Turning flags into policy sources, an engine, and tool calls.

use anyhow::bail;
use cordon_policy::ToolCall;
use serde_json::Value;

use super::{CallFlags, PolicyFlags, push_each};

pub use cordon_app::policy::{PolicyConfig, own_settings_dirs};
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
