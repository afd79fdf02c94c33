//! Where rules come from: built-in defaults, extensions, the workspace, the user, the
//! administrator, and settings; and what is wrong with them.

mod diagnostic;
mod file;
mod remember;
mod text;

use std::path::{Path, PathBuf};

pub use diagnostic::{IssueKind, LoadIssue, Severity};
pub use file::{ParsedFile, parse_policy_text, parse_policy_text_with};
pub use remember::remember_always_allow;
pub use text::read_settings_text;

use crate::checkers::CheckerRule;
use crate::rule::{CommandCondition, Matcher, Rule, RuleSource, ToolPattern};
use crate::types::{ApprovalMode, Decision, Tier};

/// The built-in policy files, compiled into the binary.
pub const BUILTIN_POLICIES: &[(&str, &str)] = &[
    ("read-only.toml", include_str!("../defaults/read-only.toml")),
    ("write.toml", include_str!("../defaults/write.toml")),
    ("shell.toml", include_str!("../defaults/shell.toml")),
    ("plan.toml", include_str!("../defaults/plan.toml")),
    ("yolo.toml", include_str!("../defaults/yolo.toml")),
    (
        "discovered.toml",
        include_str!("../defaults/discovered.toml"),
    ),
    (
        "non-interactive.toml",
        include_str!("../defaults/non-interactive.toml"),
    ),
];

/// [`BUILTIN_POLICIES`] as [`parse_builtin`] reads them, written out by a test
/// (`compiled_builtins_are_the_parsed_ones`, which also fails when this is stale). Reading the
/// TOML took most of a hook call's decision: a one-shot process pays it on every call.
const COMPILED: &str = include_str!("../defaults/compiled.json");

/// One built-in file, parsed.
#[derive(serde::Serialize, serde::Deserialize)]
struct Compiled {
    name: String,
    rules: Vec<Rule>,
    checkers: Vec<CheckerRule>,
}

/// The built-in policies: from their compiled form, or, should that not read (which its test
/// rules out), from their text, so that they are the same rules either way.
fn builtin(compiled: &str) -> Vec<ParsedFile> {
    match serde_json::from_str::<Vec<Compiled>>(compiled) {
        Ok(files) if files.len() == BUILTIN_POLICIES.len() => files
            .into_iter()
            .map(|f| ParsedFile {
                rules: f.rules,
                checkers: f.checkers,
                issues: Vec::new(),
            })
            .collect(),
        _ => BUILTIN_POLICIES
            .iter()
            .map(|(name, text)| parse_builtin(name, text))
            .collect(),
    }
}

fn parse_builtin(name: &str, text: &str) -> ParsedFile {
    parse_policy_text(text, None, &format!("builtin:{name}"), Tier::Default)
}

/// Rules that come from settings rather than policy files. They sit in the user tier at the
/// priorities Gemini CLI gives them, so files and settings written for it rank the same here.
#[derive(Debug, Clone, Default)]
pub struct SettingsRules {
    /// Tools never to run (`tools.exclude`): deny at 4.400.
    pub excluded_tools: Vec<String>,
    /// Tools to run without asking (`tools.allowed`): allow at 4.300. `run_shell_command(git
    /// status)` allows that command prefix only, and then every other shell command is denied.
    pub allowed_tools: Vec<String>,
}

/// Everything the engine is built from.
#[derive(Debug, Clone, Default)]
pub struct PolicySources {
    /// Load cordon's built-in default policies (tier 1).
    pub builtin: bool,
    /// More tier-1 policy directories (another agent's shipped defaults).
    pub default_dirs: Vec<PathBuf>,
    /// Tier 2. Allow rules and yolo-mode rules from extensions are ignored: an extension may
    /// only make things stricter.
    pub extension_dirs: Vec<PathBuf>,
    /// Tier 3: `<workspace>/.cordon/policies`.
    pub workspace_dirs: Vec<PathBuf>,
    /// A workspace's own files come with the repository, so their allow rules only count once
    /// the user trusts it; deny and ask rules always count.
    pub trust_workspace: bool,
    /// Tier 4: `~/.config/cordon/policies`, or the directories given with `--policy-dir`.
    pub user_dirs: Vec<PathBuf>,
    /// Tier 5: `/etc/cordon/policies`. Refused unless only root can write it.
    pub admin_dir: Option<PathBuf>,
    pub settings: SettingsRules,
    /// Directories that were named explicitly: a missing one is an error, not an empty tier.
    pub required_dirs: Vec<PathBuf>,
    /// Tools besides `run_shell_command` whose `command` argument is a shell script; rules
    /// for them may use commandPrefix, commandRegex and heuristic.
    pub shell_tools: Vec<String>,
}

/// The rules and checkers from every source, and every problem found on the way.
#[derive(Debug, Default)]
pub struct PolicySet {
    pub rules: Vec<Rule>,
    pub checkers: Vec<CheckerRule>,
    pub issues: Vec<LoadIssue>,
    /// Tools besides `run_shell_command` whose `command` is a shell script, as the sources
    /// named them; the rules were checked against the same list.
    pub shell_tools: Vec<String>,
}

impl PolicySet {
    pub fn has_errors(&self) -> bool {
        self.issues.iter().any(LoadIssue::is_error)
    }

    fn add(&mut self, parsed: ParsedFile) {
        self.rules.extend(parsed.rules);
        self.checkers.extend(parsed.checkers);
        self.issues.extend(parsed.issues);
    }
}

fn issue(kind: IssueKind, file: &Path, message: String, hint: Option<String>) -> LoadIssue {
    LoadIssue {
        severity: diagnostic::Severity::Error,
        kind,
        file: Some(file.to_path_buf()),
        line: 0,
        column: 0,
        message,
        hint,
    }
}

/// Loads every source in tier order.
pub fn load(sources: &PolicySources) -> PolicySet {
    let mut set = PolicySet {
        shell_tools: sources.shell_tools.clone(),
        ..Default::default()
    };
    if sources.builtin {
        for parsed in builtin(COMPILED) {
            set.add(parsed);
        }
    }
    for dir in &sources.default_dirs {
        load_dir(&mut set, dir, Tier::Default, sources);
    }
    for dir in &sources.extension_dirs {
        load_dir(&mut set, dir, Tier::Extension, sources);
    }
    for dir in &sources.workspace_dirs {
        load_dir(&mut set, dir, Tier::Workspace, sources);
    }
    for dir in &sources.user_dirs {
        load_dir(&mut set, dir, Tier::User, sources);
    }
    if let Some(dir) = &sources.admin_dir {
        match admin_dir_problem(dir) {
            Some(problem) => set.issues.push(problem),
            None => load_dir(&mut set, dir, Tier::Admin, sources),
        }
    }
    add_settings_rules(&mut set, &sources.settings);
    restrict_untrusted(&mut set, sources.trust_workspace);
    set
}

/// The `.toml` files of a directory in name order (or the file itself).
fn policy_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml") && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

fn load_dir(set: &mut PolicySet, dir: &Path, tier: Tier, sources: &PolicySources) {
    let files = match policy_files(dir) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if sources.required_dirs.iter().any(|d| d == dir) {
                set.issues.push(issue(
                    IssueKind::Read,
                    dir,
                    "policy directory does not exist".into(),
                    Some("check the path given with --policy-dir".into()),
                ));
            }
            return;
        }
        Err(e) => {
            set.issues.push(issue(
                IssueKind::Read,
                dir,
                format!("cannot read policy directory: {e}"),
                None,
            ));
            return;
        }
    };
    for file in files {
        if tier == Tier::Admin
            && let Some(problem) = admin_file_problem(&file)
        {
            set.issues.push(problem);
            continue;
        }
        match read_settings_text(&file) {
            Ok(text) => {
                let name = file
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let label = format!("{tier}:{name}");
                set.add(parse_policy_text_with(
                    &text,
                    Some(&file),
                    &label,
                    tier,
                    &sources.shell_tools,
                ));
            }
            Err(e) => set.issues.push(issue(
                IssueKind::Read,
                &file,
                format!("cannot read policy file: {e}"),
                None,
            )),
        }
    }
}

/// Administrator rules outrank everything; a directory anyone else can write would let them
/// replace those rules. Refused with what to run to fix it.
fn admin_dir_problem(dir: &Path) -> Option<LoadIssue> {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            return Some(issue(
                IssueKind::Read,
                dir,
                format!("cannot inspect admin policy directory: {e}"),
                None,
            ));
        }
    };
    if !meta.is_dir() {
        return Some(issue(
            IssueKind::Permissions,
            dir,
            "admin policy path is not a directory".into(),
            None,
        ));
    }
    ownership_problem(dir, meta.uid(), meta.mode(), "directory")
}

fn admin_file_problem(file: &Path) -> Option<LoadIssue> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(file) {
        Ok(meta) => ownership_problem(file, meta.uid(), meta.mode(), "file"),
        Err(e) => Some(issue(
            IssueKind::Read,
            file,
            format!("cannot inspect admin policy file: {e}"),
            None,
        )),
    }
}

fn ownership_problem(path: &Path, uid: u32, mode: u32, what: &str) -> Option<LoadIssue> {
    let shown = path.display();
    if uid != 0 {
        return Some(issue(
            IssueKind::Permissions,
            path,
            format!("refusing admin policies: the {what} is owned by uid {uid}, not root"),
            Some(format!("run: sudo chown root:root \"{shown}\"")),
        ));
    }
    if mode & 0o022 != 0 {
        return Some(issue(
            IssueKind::Permissions,
            path,
            format!(
                "refusing admin policies: the {what} is writable by group or others (mode {:o})",
                mode & 0o7777
            ),
            Some(format!("run: sudo chmod g-w,o-w \"{shown}\"")),
        ));
    }
    None
}

fn settings_rule(tool: ToolPattern, decision: Decision, priority: u16, label: &str) -> Rule {
    Rule {
        name: None,
        matcher: Matcher::for_tools(vec![tool]),
        decision,
        priority,
        tier: Tier::User,
        allow_redirection: false,
        deny_message: None,
        checker: None,
        source: RuleSource {
            file: None,
            line: 0,
            label: label.to_string(),
        },
    }
}

/// One tool setting: a tool name (or `mcp_server_*`), or `run_shell_command(command prefix)`
/// (`ShellTool(…)` as Gemini CLI also writes it), as a pattern and the prefix's words.
fn tool_setting(entry: &str) -> Result<(ToolPattern, Option<Vec<String>>), String> {
    let (name, args) = match entry.split_once('(') {
        Some((n, rest)) if rest.ends_with(')') => (n, Some(&rest[..rest.len() - 1])),
        Some(_) => return Err("unbalanced parenthesis".into()),
        None => (entry, None),
    };
    let name = if name == "ShellTool" {
        "run_shell_command"
    } else {
        name
    };
    let pattern = ToolPattern::parse(name, None)?;
    match (args, name) {
        (None, _) => Ok((pattern, None)),
        (Some(prefix), "run_shell_command") => match shlex::split(prefix) {
            Some(words) if !words.is_empty() => Ok((pattern, Some(words))),
            _ => Err("the command prefix is empty or has an unclosed quote".into()),
        },
        // Other tools' arguments are not narrowed by settings: refuse rather than widen.
        (Some(_), _) => Err("only run_shell_command takes a command prefix".into()),
    }
}

fn add_settings_rules(set: &mut PolicySet, settings: &SettingsRules) {
    let bad = |entry: &str, why: String| LoadIssue {
        severity: diagnostic::Severity::Error,
        kind: IssueKind::Rule,
        file: None,
        line: 0,
        column: 0,
        message: format!("tool setting `{entry}`: {why}"),
        hint: Some(
            "give a tool name, `mcp_server_*`, or `run_shell_command(command prefix)`".into(),
        ),
    };
    for t in &settings.excluded_tools {
        match tool_setting(t) {
            Ok((pattern, prefix)) => {
                let mut rule =
                    settings_rule(pattern, Decision::Deny, 400, "settings (excluded tools)");
                rule.matcher.command = prefix.map(|words| CommandCondition::Prefix(vec![words]));
                set.rules.push(rule);
            }
            Err(why) => set.issues.push(bad(t, why)),
        }
    }
    let mut narrowed = false;
    for t in &settings.allowed_tools {
        match tool_setting(t) {
            Ok((pattern, prefix)) => {
                let mut rule =
                    settings_rule(pattern, Decision::Allow, 300, "settings (allowed tools)");
                narrowed |= prefix.is_some();
                rule.matcher.command = prefix.map(|words| CommandCondition::Prefix(vec![words]));
                set.rules.push(rule);
            }
            Err(why) => set.issues.push(bad(t, why)),
        }
    }
    if narrowed {
        // Listing shell commands means: only these. Everything else is denied just below them.
        set.rules.push(settings_rule(
            ToolPattern::Exact("run_shell_command".into()),
            Decision::Deny,
            299,
            "settings (allowed tools: only the listed shell commands)",
        ));
    }
}

/// Extensions, and workspaces the user has not trusted, may only make things stricter.
fn restrict_untrusted(set: &mut PolicySet, trust_workspace: bool) {
    let mut ignored = Vec::new();
    set.rules.retain(|r| {
        let untrusted = r.tier == Tier::Extension || (r.tier == Tier::Workspace && !trust_workspace);
        let loosens = r.decision == Decision::Allow
            || (r.tier == Tier::Extension && r.matcher.modes.as_ref().is_some_and(|m| m.contains(&ApprovalMode::Yolo)));
        if untrusted && loosens {
            let why = if r.tier == Tier::Extension {
                "an extension's rule that allows (or applies in yolo mode) is ignored: extensions may only restrict".to_string()
            } else {
                "this workspace's allow rule is ignored because the workspace is not trusted".to_string()
            };
            let hint = (r.tier == Tier::Workspace).then(|| "pass --trust-workspace if you trust this repository's policies".to_string());
            ignored.push(LoadIssue {
                severity: diagnostic::Severity::Warning,
                kind: IssueKind::Ignored,
                file: r.source.file.clone(),
                line: r.source.line,
                column: 1,
                message: why,
                hint,
            });
            return false;
        }
        true
    });
    set.issues.extend(ignored);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The built-in policies' compiled form is what their text says. After a change to a
    /// built-in file or to what a rule holds, `CORDON_BLESS=1 cargo test -p cordon-policy
    /// compiled_builtins` writes it anew.
    #[test]
    fn compiled_builtins_are_the_parsed_ones() {
        let files: Vec<Compiled> = BUILTIN_POLICIES
            .iter()
            .map(|(name, text)| {
                let parsed = parse_builtin(name, text);
                assert!(parsed.issues.is_empty(), "{name}: {:#?}", parsed.issues);
                Compiled {
                    name: name.to_string(),
                    rules: parsed.rules,
                    checkers: parsed.checkers,
                }
            })
            .collect();
        let want = serde_json::to_string_pretty(&files).expect("serialise") + "\n";
        if want == COMPILED {
            return;
        }
        if std::env::var_os("CORDON_BLESS").is_some() {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/defaults/compiled.json");
            std::fs::write(&path, want).expect("write compiled.json");
            return;
        }
        panic!(
            "src/defaults/compiled.json is not what the built-in policies parse to; \
             write it anew with CORDON_BLESS=1 cargo test -p cordon-policy compiled_builtins"
        );
    }

    /// Read back, the compiled form holds everything it was written from, and it is what
    /// `load` uses; text that does not read falls back to the policies' own text.
    #[test]
    fn compiled_builtins_read_back_whole() {
        let read: Vec<Compiled> = serde_json::from_str(COMPILED).expect("compiled.json reads");
        let again = serde_json::to_string_pretty(&read).expect("serialise") + "\n";
        assert_eq!(again, COMPILED);
        let rules = |files: Vec<ParsedFile>| -> String {
            let all: Vec<&Rule> = files.iter().flat_map(|f| &f.rules).collect();
            serde_json::to_string(&all).expect("serialise")
        };
        assert_eq!(rules(builtin("not JSON")), rules(builtin(COMPILED)));
        assert!(!builtin(COMPILED).iter().all(|f| f.rules.is_empty()));
    }

    #[test]
    fn builtin_policies_load_cleanly() {
        let set = load(&PolicySources {
            builtin: true,
            ..Default::default()
        });
        assert!(set.issues.is_empty(), "{:#?}", set.issues);
        assert!(set.rules.len() > 10);
    }

    /// Built-in patterns are compiled when first used, not at load: each must compile, and
    /// pass what a pattern someone wrote is held to.
    #[test]
    fn every_builtin_pattern_compiles_and_passes_the_user_checks() {
        let mut seen = 0;
        for (name, text) in BUILTIN_POLICIES {
            let as_user = parse_policy_text(text, None, name, Tier::User);
            assert!(as_user.issues.is_empty(), "{name}: {:#?}", as_user.issues);
            for rule in parse_policy_text(text, None, name, Tier::Default).rules {
                let patterns =
                    rule.matcher
                        .args_pattern
                        .iter()
                        .chain(match &rule.matcher.command {
                            Some(CommandCondition::Regex { re, .. }) => Some(re),
                            _ => None,
                        });
                for p in patterns {
                    assert!(matches!(p, crate::rule::Pattern::Later { .. }), "{name}");
                    assert!(p.regex().is_some(), "{name}: {p:?}");
                    seen += 1;
                }
            }
        }
        assert!(seen >= 2, "the built-in patterns were found");
    }

    #[test]
    fn world_writable_admin_dir_is_refused() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::write(
            dir.path().join("a.toml"),
            "[[rule]]\ntoolName=\"*\"\ndecision=\"deny\"\npriority=1\n",
        )?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777))?;
        let set = load(&PolicySources {
            admin_dir: Some(dir.path().to_path_buf()),
            ..Default::default()
        });
        assert!(set.rules.is_empty());
        let e = set
            .issues
            .first()
            .map(ToString::to_string)
            .unwrap_or_default();
        // As root the mode is what is wrong; as anyone else, already the owner is.
        let root =
            std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0);
        if root.unwrap_or(false) {
            assert!(
                e.contains("writable by group or others") && e.contains("chmod g-w,o-w"),
                "{e}"
            );
        } else {
            assert!(
                e.contains("refusing admin policies") && e.contains("not root"),
                "{e}"
            );
        }
        Ok(())
    }

    #[test]
    fn untrusted_workspace_allow_rules_are_ignored() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::write(
            dir.path().join("p.toml"),
            "[[rule]]\ntoolName=\"*\"\ndecision=\"allow\"\npriority=1\n[[rule]]\ntoolName=\"x\"\ndecision=\"deny\"\npriority=1\n",
        )?;
        let sources = PolicySources {
            workspace_dirs: vec![dir.path().to_path_buf()],
            ..Default::default()
        };
        let set = load(&sources);
        assert_eq!(set.rules.len(), 1);
        assert_eq!(set.rules[0].decision, Decision::Deny);
        let set = load(&PolicySources {
            trust_workspace: true,
            ..sources
        });
        assert_eq!(set.rules.len(), 2);
        Ok(())
    }
}
