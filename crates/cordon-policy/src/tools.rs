//! What cordon knows about tool names: built-in tools, aliases, and which tools run shells.

/// Tools whose `command` argument is a shell script.
pub const DEFAULT_SHELL_TOOLS: &[&str] = &["run_shell_command", "ShellTool"];

/// Names of the tools agents built on Gemini CLI and cordon's own MCP server expose. Used to
/// warn about rule names one typo away from one of these.
pub const KNOWN_TOOLS: &[&str] = &[
    "glob",
    "write_todos",
    "write_file",
    "google_web_search",
    "web_fetch",
    "replace",
    "run_shell_command",
    "grep_search",
    "search_file_content",
    "read_many_files",
    "read_file",
    "list_directory",
    "activate_skill",
    "ask_user",
    "tracker_create_task",
    "tracker_update_task",
    "tracker_get_task",
    "tracker_list_tasks",
    "tracker_add_dependency",
    "tracker_visualize",
    "get_internal_docs",
    "enter_plan_mode",
    "exit_plan_mode",
    "update_topic",
    "complete_task",
    "invoke_agent",
    "read_mcp_resource",
    "list_mcp_resources",
    "codebase_investigator",
    "cli_help",
    "save_memory",
];

/// Old and new names of the same tool; a rule for either governs both.
const ALIASES: &[(&str, &str)] = &[("search_file_content", "grep_search")];

/// The names a call is tried under: its own, its alias, and for `invoke_agent` the agent's name
/// (so a rule about `codebase_investigator` governs invoking that agent).
pub fn names_for_call<'a>(name: &'a str, args: &'a serde_json::Value) -> Vec<&'a str> {
    let mut names = vec![name];
    for (a, b) in ALIASES {
        if name == *a {
            names.push(b);
        } else if name == *b {
            names.push(a);
        }
    }
    if name == "invoke_agent"
        && let Some(agent) = args.get("agent_name").and_then(|v| v.as_str())
    {
        names.push(agent);
    }
    names
}

/// A known tool name this one is probably a typo of.
pub fn likely_typo(name: &str) -> Option<&'static str> {
    if name.contains('*') || name.starts_with("mcp_") || name.starts_with("discovered_tool_") {
        return None;
    }
    if KNOWN_TOOLS.contains(&name) || ALIASES.iter().any(|(a, b)| *a == name || *b == name) {
        return None;
    }
    KNOWN_TOOLS
        .iter()
        .map(|k| (strsim::osa_distance(name, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_are_caught_but_real_names_are_not() {
        assert_eq!(likely_typo("grob"), Some("glob"));
        assert_eq!(likely_typo("replce"), Some("replace"));
        assert_eq!(likely_typo("glob"), None);
        assert_eq!(likely_typo("my_custom_thing"), None);
        assert_eq!(likely_typo("mcp_github_x"), None);
    }
}
