//! "Always allow": an answer the user gave once, kept as a rule in `auto-saved.toml`.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::shell::{self, Role};
use crate::types::{ApprovalMode, ToolCall};

/// Tools whose approval must be narrowed to what was approved (a path, a command): allowing
/// `run_shell_command` outright because one `ls` was approved would allow everything.
const NEEDS_NARROWING: &[&str] = &[
    "glob",
    "grep_search",
    "search_file_content",
    "read_many_files",
    "read_file",
    "list_directory",
    "write_file",
    "replace",
    "run_shell_command",
    "ShellTool",
];

/// Modes from the least to the most permissive. An approval given in one mode holds in it and
/// every more permissive one.
const BY_PERMISSIVENESS: [ApprovalMode; 4] = [
    ApprovalMode::Plan,
    ApprovalMode::Default,
    ApprovalMode::AutoEdit,
    ApprovalMode::Yolo,
];

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The `[[rule]]` that allows calls like this one from now on.
fn rule_text(call: &ToolCall, mode: ApprovalMode) -> Result<String, String> {
    let mut lines = vec!["[[rule]]".to_string()];
    if let Some(server) = &call.server {
        let short = call
            .name
            .strip_prefix(&format!("mcp_{server}_"))
            .unwrap_or(&call.name);
        lines.push(format!("toolName = {}", toml_string(short)));
        lines.push(format!("mcpName = {}", toml_string(server)));
    } else {
        lines.push(format!("toolName = {}", toml_string(&call.name)));
    }
    if matches!(call.name.as_str(), "run_shell_command" | "ShellTool") {
        let command = call
            .args
            .get("command")
            .and_then(|c| c.as_str())
            .ok_or("the call has no `command`")?;
        let analysis = shell::analyse(command);
        if !analysis.is_analysable() {
            return Err(format!(
                "the command cannot be analysed ({}), so it cannot be allowed for good",
                analysis.problems[0]
            ));
        }
        // Each command as it was approved, words and all: `npm install` approved must not
        // allow `npm exec …` (a prefix matches the words that follow it too, so `npm install`
        // still allows `npm install left-pad`; that is what was approved, with more to install).
        let mut approved: Vec<String> = Vec::new();
        let mut redirects = false;
        for c in analysis.commands.iter().filter(|c| c.role == Role::Runs) {
            if shell::danger(c).is_some() {
                return Err(format!(
                    "`{}` is dangerous; approve it each time instead",
                    c.text
                ));
            }
            redirects |= !c.writes.is_empty();
            if c.name().is_some() && !approved.contains(&c.text) {
                approved.push(c.text.clone());
            }
        }
        let list: Vec<String> = approved.iter().map(|r| toml_string(r)).collect();
        lines.push(format!("commandPrefix = [{}]", list.join(", ")));
        if redirects {
            lines.push("allowRedirection = true".into());
        }
    } else if let Some(path) = call.args.get("file_path").and_then(|p| p.as_str()) {
        let field = format!(
            "\"file_path\":{}",
            serde_json::Value::String(path.to_string())
        );
        lines.push(format!(
            "argsPattern = {}",
            toml_string(&format!("\\x00{}\\x00", regex::escape(&field)))
        ));
    } else if NEEDS_NARROWING.contains(&call.name.as_str()) {
        return Err(format!(
            "`{}` can only be allowed for good for a specific file or command",
            call.name
        ));
    }
    lines.push("decision = \"allow\"".into());
    lines.push("priority = 950".into());
    let from = BY_PERMISSIVENESS
        .iter()
        .position(|m| *m == mode)
        .unwrap_or(0);
    let modes: Vec<String> = BY_PERMISSIVENESS[from..]
        .iter()
        .map(|m| format!("\"{m}\""))
        .collect();
    lines.push(format!("modes = [{}]", modes.join(", ")));
    Ok(lines.join("\n") + "\n")
}

/// Appends an "always allow" rule for calls like `call` to `dir/auto-saved.toml`, and returns
/// the file and the rule. The file is replaced atomically, so a crash never leaves half a rule
/// behind.
pub fn remember_always_allow(
    dir: &Path,
    call: &ToolCall,
    mode: ApprovalMode,
) -> Result<(PathBuf, String), String> {
    let rule = rule_text(call, mode)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join("auto-saved.toml");
    let existing = match super::read_settings_text(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    if existing.contains(&rule) {
        return Ok((path, rule));
    }
    let mut text = existing;
    if !text.is_empty() && !text.ends_with("\n\n") {
        text.push_str(if text.ends_with('\n') { "\n" } else { "\n\n" });
    }
    text.push_str(&rule);
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("cannot create a file in {}: {e}", dir.display()))?;
    tmp.write_all(text.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| format!("cannot write {}: {e}", tmp.path().display()))?;
    tmp.persist(&path)
        .map_err(|e| format!("cannot replace {}: {e}", path.display()))?;
    Ok((path, rule))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shell_approvals_are_narrowed_to_the_commands_approved() {
        let call = ToolCall::new(
            "run_shell_command",
            json!({"command": "git status && ls -la > out"}),
        );
        let text = rule_text(&call, ApprovalMode::Default).unwrap_or_default();
        assert!(
            text.contains("commandPrefix = [\"git status\", \"ls -la\"]"),
            "{text}"
        );
        assert!(text.contains("allowRedirection = true"));
        assert!(text.contains("modes = [\"default\", \"autoEdit\", \"yolo\"]"));
        let rm = ToolCall::new("run_shell_command", json!({"command": "rm -rf x"}));
        assert!(rule_text(&rm, ApprovalMode::Default).is_err());
        let broad = ToolCall::new("read_file", json!({}));
        assert!(rule_text(&broad, ApprovalMode::Default).is_err());
    }
}
