//! The `allowed-path` checker: file arguments must resolve inside the workspace.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use super::{Environment, Verdict};
use crate::types::{Decision, ToolCall};

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct AllowedPathConfig {
    /// Argument keys (dot notation for nested keys) that hold paths whatever their name.
    pub included_args: Vec<String>,
    /// Argument keys never treated as paths.
    pub excluded_args: Vec<String>,
}

/// Which string arguments are paths: listed ones, and those whose key says so. The strings
/// of a list are paths when the list's key says so (`paths: [".env"]`), however deep.
fn collect_paths<'a>(
    config: &AllowedPathConfig,
    prefix: &str,
    value: &'a Value,
    out: &mut Vec<(String, &'a str)>,
) {
    collect_paths_in(config, prefix, value, false, out);
}

fn collect_paths_in<'a>(
    config: &AllowedPathConfig,
    prefix: &str,
    value: &'a Value,
    in_path_list: bool,
    out: &mut Vec<(String, &'a str)>,
) {
    let children: Vec<(String, &Value, bool)> = match value {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let k_low = k.to_ascii_lowercase();
                let named_path = ["path", "directory", "file"]
                    .iter()
                    .any(|w| k_low.contains(w))
                    || k_low == "source"
                    || k_low == "destination";
                (k.clone(), v, named_path)
            })
            .collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v, in_path_list))
            .collect(),
        _ => return,
    };
    for (key, v, named_path) in children {
        let full = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        if config.excluded_args.contains(&full) {
            continue;
        }
        match v {
            Value::String(s) => {
                if config.included_args.contains(&full) || named_path {
                    out.push((full, s));
                }
            }
            Value::Array(_) => collect_paths_in(config, &full, v, named_path, out),
            _ => collect_paths_in(config, &full, v, false, out),
        }
    }
}

/// Resolves `..` and every symlink of the longest existing ancestor, so a link inside the
/// workspace that points out of it is seen for where it leads.
fn resolve(path: &Path, cwd: &Path) -> Option<PathBuf> {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    };
    let mut lexical = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other.as_os_str()),
        }
    }
    let mut existing = lexical.clone();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return Some(out);
        }
        let name = existing.file_name()?.to_os_string();
        rest.push(name);
        if !existing.pop() {
            return None;
        }
    }
}

/// What a path component means for safety: `.git` internals and `.env` files are never
/// touched; settings that make editors, agents or shells run things need a person's yes.
fn sensitive(segment: &str) -> Option<(Decision, &'static str)> {
    // Windows-style stream suffixes and trailing dots/spaces must not disguise a name.
    let cleaned = segment.split(':').next().unwrap_or(segment);
    let cleaned = cleaned.trim_end_matches([' ', '.']).to_ascii_lowercase();
    match cleaned.as_str() {
        ".git" => Some((Decision::Deny, "git's internals")),
        ".env" => Some((Decision::Deny, "a secrets file")),
        s if s.starts_with(".env.") => Some((Decision::Deny, "a secrets file")),
        ".vscode" | ".idea" => Some((Decision::AskUser, "editor settings, which can run tasks")),
        ".cordon" | ".claude" | ".gemini" | ".codex" | ".mcp.json" => Some((
            Decision::AskUser,
            "an agent's settings, which decide what it may do",
        )),
        ".bashrc" | ".bash_profile" | ".zshrc" | ".zprofile" | ".profile" | ".gitconfig"
        | ".gitmodules" => Some((
            Decision::AskUser,
            "a start-up file that runs on its own later",
        )),
        _ => None,
    }
}

pub(super) fn check(config: &AllowedPathConfig, call: &ToolCall, env: &Environment) -> Verdict {
    let mut paths = Vec::new();
    collect_paths(config, "", &call.args, &mut paths);
    let roots: Vec<PathBuf> = std::iter::once(&env.cwd)
        .chain(env.workspaces.iter())
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .collect();
    let mut verdict = Verdict {
        decision: Decision::Allow,
        reason: "every path is inside the workspace".into(),
    };
    for (arg, raw) in paths {
        let Some(resolved) = resolve(Path::new(raw), &env.cwd) else {
            return Verdict::deny(format!("cannot resolve path `{raw}` in argument `{arg}`"));
        };
        let Some(root) = roots.iter().find(|r| resolved.starts_with(r)) else {
            return Verdict::deny(format!(
                "path `{raw}` in argument `{arg}` is outside the workspace directories"
            ));
        };
        let inside = resolved.strip_prefix(root).unwrap_or(&resolved);
        let segments: Vec<String> = inside
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        for (i, seg) in segments.iter().enumerate() {
            // Plan mode writes its plans under .cordon/plans/; that is what the folder is for.
            let plans = seg == ".cordon" && segments.get(i + 1).is_some_and(|n| n == "plans");
            match sensitive(seg).filter(|_| !plans) {
                Some((Decision::Deny, what)) => {
                    return Verdict::deny(format!(
                        "path `{raw}` in argument `{arg}` is inside `{seg}` ({what}), which is protected"
                    ));
                }
                Some((d, what)) if verdict.decision == Decision::Allow => {
                    verdict = Verdict {
                        decision: d,
                        reason: format!("path `{raw}` in argument `{arg}` changes `{seg}`: {what}"),
                    };
                }
                _ => {}
            }
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn verdict(dir: &Path, args: Value) -> Decision {
        let env = Environment {
            cwd: dir.to_path_buf(),
            workspaces: vec![],
        };
        check(
            &AllowedPathConfig::default(),
            &ToolCall::new("write_file", args),
            &env,
        )
        .decision
    }

    /// Gemini CLI's `read_many_files {"paths": [".env"]}` is a read of `.env` as surely as
    /// `read_file` is.
    #[test]
    fn paths_in_a_list_of_paths_are_checked() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let ws = dir.path();
        for args in [
            json!({"paths": ["main.py", ".env"]}),
            json!({"paths": [["nested", ".env"]]}),
            json!({"file_paths": ["../outside"]}),
        ] {
            assert_eq!(verdict(ws, args.clone()), Decision::Deny, "{args}");
        }
        assert_eq!(
            verdict(ws, json!({"paths": ["main.py"], "include": ["*.md"]})),
            Decision::Allow
        );
        Ok(())
    }

    #[test]
    fn paths_must_stay_inside_the_workspace() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let ws = dir.path();
        std::fs::create_dir(ws.join("src"))?;
        assert_eq!(
            verdict(ws, json!({"file_path": "src/main.rs"})),
            Decision::Allow
        );
        assert_eq!(
            verdict(ws, json!({"file_path": "new/dir/x.rs"})),
            Decision::Allow
        );
        assert_eq!(
            verdict(ws, json!({"file_path": "../outside"})),
            Decision::Deny
        );
        assert_eq!(
            verdict(ws, json!({"file_path": "src/../../outside"})),
            Decision::Deny
        );
        assert_eq!(
            verdict(ws, json!({"file_path": "/etc/passwd"})),
            Decision::Deny
        );
        assert_eq!(
            verdict(ws, json!({"file_path": ".git/hooks/pre-commit"})),
            Decision::Deny
        );
        assert_eq!(verdict(ws, json!({"file_path": ".env"})), Decision::Deny);
        assert_eq!(
            verdict(ws, json!({"file_path": ".ENV.local"})),
            Decision::Deny
        );
        assert_eq!(
            verdict(ws, json!({"file_path": ".vscode/tasks.json"})),
            Decision::AskUser
        );
        // A symlink inside the workspace that leads out of it.
        std::os::unix::fs::symlink("/etc", ws.join("link"))?;
        assert_eq!(
            verdict(ws, json!({"file_path": "link/passwd"})),
            Decision::Deny
        );
        // Nested arguments whose key says they are paths.
        assert_eq!(
            verdict(ws, json!({"edits": [{"file": "/etc/x"}]})),
            Decision::Deny
        );
        Ok(())
    }
}
