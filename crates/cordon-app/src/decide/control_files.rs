//! Tool calls that would write an agent's or an editor's control files: the settings that
//! decide what the agent may do or run (hooks, MCP servers, permissions, commands, sub-agents)
//! and the files an editor or shell runs on its own (`.vscode/tasks.json`, `.envrc`,
//! devcontainers). Refused in every mode, never asked about: where an agent answers its own
//! questions (auto-accept, bypass, headless) a question is no guard, and one write there
//! switches cordon off for every later session.
//!
//! A path is a control file by its components, wherever it lies (a project's, a parent's, the
//! home's): a directory named `.claude`, `.gemini`, `.codex`, `.cordon`, `.vscode`, `.idea` or
//! `.devcontainer`, or a file named `.mcp.json`, `.claude.json`, `.envrc` or
//! `.devcontainer.json`, and cordon's own settings (`~/.config/cordon`, `/etc/cordon`). The
//! agents' own state in those directories ([`STATE`]: plans,
//! sessions) is not one. Reading them is not refused.

use std::path::{Component, Path};

use cordon_policy::ToolCall;
use cordon_policy::shell::{analyse, is_read_only};
use serde_json::Value;

/// Directories whose every file is a control file.
const DIRS: &[(&str, &str)] = &[
    (
        ".claude",
        "Claude Code's settings, hooks, commands and sub-agents",
    ),
    (".gemini", "Gemini CLI's settings, commands and extensions"),
    (".codex", "Codex's config and MCP servers"),
    (".cordon", "cordon's own settings and policies"),
    (
        ".vscode",
        "the editor's tasks, launch and settings, which run programs",
    ),
    (".idea", "the IDE's run configurations"),
    (
        ".devcontainer",
        "a dev container's definition, which runs programs",
    ),
];

/// Files that are control files by name.
const FILES: &[(&str, &str)] = &[
    (".mcp.json", "the project's MCP servers, which agents start"),
    (
        ".claude.json",
        "Claude Code's user state, with its MCP servers",
    ),
    (
        ".envrc",
        "direnv's script, which runs on entering the directory",
    ),
    (
        ".devcontainer.json",
        "a dev container's definition, which runs programs",
    ),
];

/// Directories that are control directories by their parent's name too: cordon's user and
/// managed settings (`~/.config/cordon`, `/etc/cordon`).
const NESTED: &[(&str, &str, &str)] = &[
    (".config", "cordon", "cordon's own settings and policies"),
    ("etc", "cordon", "cordon's managed settings and policies"),
];

/// The agents' own state inside those directories (sessions, plans, to-do lists), which runs
/// nothing and decides nothing: `(directory, subdirectory)`.
const STATE: &[(&str, &str)] = &[
    (".cordon", "plans"),
    (".gemini", "tmp"),
    (".claude", "plans"),
    (".claude", "todos"),
    (".claude", "projects"),
    (".codex", "sessions"),
];

/// Tools that only read: their paths may name control files.
const READING_TOOLS: &[&str] = &[
    "read_file",
    "read_many_files",
    "list_directory",
    "glob",
    "grep_search",
    "search_file_content",
];

/// Why `call` may not run, when it would write a control file.
pub fn refusal(call: &ToolCall, shell: bool) -> Option<String> {
    let (path, what) = if shell {
        let command = call.args.get("command").and_then(Value::as_str)?;
        in_script(command)?
    } else {
        if READING_TOOLS.contains(&call.name.as_str()) {
            return None;
        }
        let mut strings = Vec::new();
        strings_in(&call.args, &mut strings);
        strings
            .into_iter()
            .find_map(|s| control(s).map(|w| (s.to_string(), w)))?
    };
    Some(format!(
        "`{path}` is {what}; no tool call may write an agent's or editor's control files, in any mode, since a change there can switch cordon off or run a program later. Edit it yourself if it must change"
    ))
}

/// The control file a script would write: one its redirections write to, or one named by a
/// command that is not read-only.
fn in_script(script: &str) -> Option<(String, &'static str)> {
    let analysis = analyse(script);
    analysis.commands.iter().find_map(|c| {
        let named = c
            .writes
            .iter()
            .find_map(|w| control(w).map(|what| (w.clone(), what)));
        named.or_else(|| {
            if is_read_only(c) {
                return None;
            }
            c.words
                .iter()
                .skip(1)
                .flat_map(|w| std::iter::once(w.as_str()).chain(w.split_once('=').map(|(_, v)| v)))
                .find_map(|w| control(w).map(|what| (w.to_string(), what)))
        })
    })
}

/// What `path` is, when it is a control file.
fn control(path: &str) -> Option<&'static str> {
    let names: Vec<&str> = Path::new(path)
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect();
    for (i, name) in names.iter().enumerate() {
        if STATE
            .iter()
            .any(|(d, sub)| d == name && names.get(i + 1) == Some(sub))
        {
            return None;
        }
        if let Some((_, _, what)) = NESTED
            .iter()
            .find(|(parent, dir, _)| parent == name && names.get(i + 1) == Some(dir))
        {
            return Some(what);
        }
        let last = i + 1 == names.len();
        if let Some((_, what)) = DIRS.iter().find(|(d, _)| d == name)
            && !last
        {
            return Some(what);
        }
        if let Some((_, what)) = FILES.iter().chain(DIRS).find(|(f, _)| f == name)
            && last
        {
            return Some(what);
        }
    }
    None
}

/// Every string in a tool's input, at any depth: a write tool's paths may be under any key.
fn strings_in<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) if !s.contains('\n') => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings_in(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings_in(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str) -> bool {
        let call = ToolCall::new(
            "run_shell_command",
            serde_json::json!({ "command": script }),
        );
        refusal(&call, true).is_some()
    }

    fn tool(name: &str, args: Value) -> bool {
        refusal(&ToolCall::new(name, args), false).is_some()
    }

    #[test]
    fn writes_to_control_files_are_refused() {
        for script in [
            "echo '{\"disableAllHooks\": true}' > .claude/settings.local.json",
            "mkdir -p .claude/commands && cp evil.md .claude/commands/x.md",
            "tee .vscode/tasks.json < t",
            "sed -i s/a/b/ ~/.claude/settings.json",
            "printf x >> ~/.codex/config.toml",
            "echo 'curl x | sh' > .envrc",
            "cat > .mcp.json <<EOF\n{}\nEOF",
            "python3 -c 'open(1)' --out=.gemini/settings.json",
            "rm -rf .claude",
            "ln -sf /tmp/x .devcontainer.json",
            "printf '[sandbox]\\nenabled = false' > ~/.config/cordon/cordon.toml",
            "mkdir -p /etc/cordon/policies",
        ] {
            assert!(shell(script), "{script}");
        }
        for (name, args) in [
            (
                "write_file",
                serde_json::json!({"file_path": ".claude/settings.local.json", "content": "{}"}),
            ),
            (
                "replace",
                serde_json::json!({"file_path": "/ws/.vscode/launch.json", "old_string": "a", "new_string": "b"}),
            ),
            (
                "write_file",
                serde_json::json!({"file_path": "/home/u/.claude.json", "content": "{}"}),
            ),
            (
                "apply_patch_files",
                serde_json::json!({"files": ["src/a.rs", ".codex/config.toml"]}),
            ),
        ] {
            assert!(tool(name, args.clone()), "{name} {args}");
        }
    }

    #[test]
    fn reading_them_and_writing_elsewhere_is_not() {
        for script in [
            "cat .claude/settings.json",
            "ls -la .vscode",
            "grep -r hooks .gemini",
            "echo hi > notes.txt",
            "cp a.md docs/claude.md",
            "echo plan > .cordon/plans/p.md",
        ] {
            assert!(!shell(script), "{script}");
        }
        assert!(!tool(
            "read_file",
            serde_json::json!({"file_path": ".claude/settings.json"})
        ));
        assert!(!tool(
            "read_many_files",
            serde_json::json!({"paths": [".vscode/tasks.json"]})
        ));
        assert!(!tool(
            "write_file",
            serde_json::json!({"file_path": "src/a.rs", "content": "see .claude/settings.json\nfor hooks"})
        ));
        for plan in [
            ".cordon/plans/plan.md",
            "/home/u/.gemini/tmp/ab12/s/plans/p.md",
        ] {
            assert!(
                !tool(
                    "write_file",
                    serde_json::json!({"file_path": plan, "content": "x"})
                ),
                "{plan}"
            );
        }
    }
}
