//! `cordon setup AGENT`: the agent's own settings edited so that cordon decides its tool calls
//! (the hook), runs its commands (`cordon mcp` as an MCP server), and its built-in shell tool is
//! off in favour of cordon's. Files are edited in place: comments, order and everything else
//! stay as they were (a concrete syntax tree, not a parse and a rewrite), a copy of each file
//! is kept beside it before it changes, and `--remove` takes out what setup put in.
//!
//! What setup added that the user might have had anyway (the built-in shell switched off) is
//! remembered in cordon's state directory, so that `--remove` takes out only what setup added.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstArray, CstInputValue, CstObject, CstRootNode};
use serde_json::{Value, json};

use super::Agent;

/// How one file is changed: set up, or (with `remove`) undone, taking out of lists only the
/// entries setup remembers adding.
struct Ctx {
    remove: bool,
    remembered: Vec<(String, String)>,
    /// Objects and lists setup made, by dotted path: taken out again once empty.
    created: std::cell::RefCell<Vec<String>>,
}

impl Ctx {
    fn made(&self, path: &[&str]) {
        self.created.borrow_mut().push(path.join("."));
    }
}

/// What setup remembers of a file beside the list entries it added: `(CREATED, path)` for an
/// object or list it made, and `(CREATED, "")` for the file itself.
const CREATED: &str = "created";

/// `(ORIGINAL, text)`: the file as it was before setup first changed it. Removal that leaves
/// the same settings writes this text back, so the file is as it was to the byte.
const ORIGINAL: &str = "original";

/// Whose settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// This project's (`.claude/`, `.gemini/` in the working directory).
    Project,
    /// The user's (`~/.claude/`, `~/.gemini/`).
    User,
}

/// One file setup changes: its text before (`None`: it does not exist) and after.
#[derive(Debug)]
pub struct FileEdit {
    pub path: PathBuf,
    pub before: Option<String>,
    /// `None`: the file goes (setup made it, and removing leaves nothing in it).
    pub after: Option<String>,
    /// What this edit adds that the user may also have had: `(array path, entry)`.
    added: Vec<(String, String)>,
}

impl FileEdit {
    pub fn changes(&self) -> bool {
        self.before != self.after
    }

    /// The change as a unified diff.
    pub fn diff(&self) -> String {
        let before = self.before.clone().unwrap_or_default();
        let name = self.path.display().to_string();
        let after = self.after.clone().unwrap_or_default();
        similar::TextDiff::from_lines(&before, &after)
            .unified_diff()
            .header(
                &if self.before.is_some() {
                    name.clone()
                } else {
                    "/dev/null".into()
                },
                &if self.after.is_some() {
                    name.clone()
                } else {
                    "/dev/null".into()
                },
            )
            .to_string()
    }
}

/// Where things are for one setup.
#[derive(Debug)]
pub struct Places {
    /// The project (the working directory).
    pub project: PathBuf,
    pub home: PathBuf,
    /// The `cordon` to run: its absolute path.
    pub cordon: PathBuf,
    /// Where setup remembers what it added.
    pub state: PathBuf,
}

/// The edits setup (or, with `remove`, its undoing) makes for `agent` in `scope`.
pub fn plan(
    agent: Agent,
    scope: Scope,
    places: &Places,
    remove: bool,
) -> anyhow::Result<Vec<FileEdit>> {
    let base = match scope {
        Scope::Project => places.project.clone(),
        Scope::User => places.home.clone(),
    };
    let cordon = places.cordon.to_str().context(
        "cordon's own path is not UTF-8; it cannot be written into the agent's settings",
    )?;
    if cordon.contains(' ') || cordon.contains('"') || cordon.contains('\'') {
        bail!(
            "cordon's path {cordon} holds a space or a quote; the agent runs hooks through a shell, so put cordon where its path has neither"
        );
    }
    let mut edits = Vec::new();
    // A project's files are the project's to plant: a link among them could send setup's
    // edit anywhere the user may write. The user's own may be links (dotfiles).
    let linked = |file: &Path| -> anyhow::Result<()> {
        if scope == Scope::User {
            return Ok(());
        }
        for p in file.ancestors().take_while(|p| *p != base.as_path()) {
            if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()) {
                bail!(
                    "{} is a symbolic link; cordon setup does not edit a project's settings through one (it could lead anywhere); replace it with the file or directory itself",
                    p.display()
                );
            }
        }
        Ok(())
    };
    match agent {
        Agent::ClaudeCode => {
            let hook = json!({
                // cordon's own MCP tools are decided by `cordon mcp` itself.
                "matcher": "^(?!mcp__cordon__)",
                "hooks": [{"type": "command", "command": format!("{cordon} hook claude-code")}],
            });
            let server = json!({"command": cordon, "args": ["mcp"]});
            let settings = base.join(".claude/settings.json");
            linked(&settings)?;
            edits.push(edit(&settings, places, remove, |doc, ctx, adds| {
                hook_entry(
                    doc,
                    &["hooks", "PreToolUse"],
                    &hook,
                    "hook claude-code",
                    ctx,
                )?;
                adds.extend(list_entry(doc, &["permissions", "deny"], "Bash", ctx)?);
                match scope {
                    // cordon's MCP server decides its own calls: Claude Code need not ask too.
                    // A project's settings cannot grant that (Claude Code takes a project's
                    // allow rules only from a folder it trusts), so there it asks once.
                    Scope::User => adds.extend(list_entry(
                        doc,
                        &["permissions", "allow"],
                        "mcp__cordon",
                        ctx,
                    )?),
                    Scope::Project => {
                        adds.extend(list_entry(doc, &["enabledMcpjsonServers"], "cordon", ctx)?)
                    }
                }
                Ok(())
            })?);
            // Claude Code reads a project's MCP servers from `.mcp.json`, the user's from
            // `~/.claude.json`.
            let servers = match scope {
                Scope::Project => base.join(".mcp.json"),
                Scope::User => base.join(".claude.json"),
            };
            linked(&servers)?;
            edits.push(edit(&servers, places, remove, |doc, ctx, _| {
                server_entry(doc, &server, ctx)
            })?);
        }
        Agent::GeminiCli => {
            let hook = json!({
                "matcher": "^(?!mcp_cordon_)",
                // Gemini CLI's `tools.exclude` would take cordon's own `run_shell_command`
                // with its own: the hook refuses Gemini CLI's instead.
                "hooks": [{"type": "command", "name": "cordon",
                           "command": format!("{cordon} hook gemini-cli --no-own-shell")}],
            });
            let server = json!({"command": cordon, "args": ["mcp"]});
            let settings = base.join(".gemini/settings.json");
            linked(&settings)?;
            edits.push(edit(&settings, places, remove, |doc, ctx, _| {
                hook_entry(doc, &["hooks", "BeforeTool"], &hook, "hook gemini-cli", ctx)?;
                server_entry(doc, &server, ctx)?;
                Ok(())
            })?);
        }
    }
    Ok(edits)
}

/// The edit of one file: `change` applied to its tree.
fn edit(
    path: &Path,
    places: &Places,
    remove: bool,
    change: impl FnOnce(&CstObject, &Ctx, &mut Vec<(String, String)>) -> anyhow::Result<()>,
) -> anyhow::Result<FileEdit> {
    let before = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("{}: cannot read it", path.display())),
    };
    let text = before.clone().unwrap_or_default();
    let source = if text.trim().is_empty() {
        "{}\n"
    } else {
        &text
    };
    let root = CstRootNode::parse(source, &ParseOptions::default()).map_err(|e| {
        anyhow::anyhow!(
            "{}: not JSON that cordon can edit ({e}); fix it, or edit it by hand",
            path.display()
        )
    })?;
    if root.object_value().is_none() {
        bail!(
            "{}: the settings are not a JSON object; cordon edits only objects",
            path.display()
        );
    }
    let doc = root.object_value_or_set();
    let remembered = remembered(places, path);
    let original_kept = remembered.iter().any(|(kind, _)| kind == ORIGINAL);
    let ctx = Ctx {
        remove,
        remembered: if remove { remembered } else { Vec::new() },
        created: Default::default(),
    };
    let mut added = Vec::new();
    change(&doc, &ctx, &mut added)?;
    if remove {
        // What setup made and removing has left empty goes too, deepest first.
        let mut made: Vec<&String> = ctx
            .remembered
            .iter()
            .filter(|(kind, p)| kind == CREATED && !p.is_empty())
            .map(|(_, p)| p)
            .collect();
        made.sort_by_key(|p| std::cmp::Reverse(p.matches('.').count()));
        for p in made {
            let parts: Vec<&str> = p.split('.').collect();
            let (last, parents) = parts.split_last().context("an empty settings path")?;
            let Some(parent) = parents
                .iter()
                .try_fold(doc.clone(), |o, k| o.object_value(k))
            else {
                continue;
            };
            if let Some(prop) = parent.get(last) {
                let empty = prop
                    .value()
                    .and_then(|v| v.to_serde_value())
                    .is_some_and(|v| {
                        v.as_array().is_some_and(Vec::is_empty)
                            || v.as_object().is_some_and(serde_json::Map::is_empty)
                    });
                if empty {
                    prop.remove();
                }
            }
        }
    } else {
        added.extend(
            ctx.created
                .into_inner()
                .into_iter()
                .map(|p| (CREATED.to_string(), p)),
        );
        if before.is_none() {
            added.push((CREATED.to_string(), String::new()));
        }
    }
    let mut after = root.to_string();
    if before.is_none() && !after.ends_with('\n') {
        after.push('\n');
    }
    if remove {
        let original = ctx
            .remembered
            .iter()
            .find(|(kind, _)| kind == ORIGINAL)
            .map(|(_, text)| text);
        if let Some(original) = original
            && value_of(original) == value_of(&after)
        {
            after = original.clone();
        }
    } else if let Some(text) = &before
        && !original_kept
        && !added.is_empty()
    {
        added.push((ORIGINAL.to_string(), text.clone()));
    }
    let made_the_file = ctx
        .remembered
        .contains(&(CREATED.to_string(), String::new()));
    let emptied = doc.properties().is_empty();
    Ok(FileEdit {
        path: path.to_path_buf(),
        before,
        after: (!(remove && made_the_file && emptied)).then_some(after),
        added,
    })
}

/// The settings `text` holds, for comparing two texts.
fn value_of(text: &str) -> Option<Value> {
    CstRootNode::parse(text, &ParseOptions::default())
        .ok()?
        .value()?
        .to_serde_value()
}

/// The object at `path` under `doc`, made where missing (and remembered as made).
fn object_at(doc: &CstObject, path: &[&str], ctx: &Ctx) -> CstObject {
    let mut here = doc.clone();
    for (i, key) in path.iter().enumerate() {
        if here.get(key).is_none() {
            ctx.made(&path[..=i]);
        }
        here = here.object_value_or_set(key);
    }
    here
}

/// `entry` in the string list at `path`: added when missing (returned, to be remembered as
/// setup's); on removal, taken out only if setup remembers adding it.
fn list_entry(
    doc: &CstObject,
    path: &[&str],
    entry: &str,
    ctx: &Ctx,
) -> anyhow::Result<Option<(String, String)>> {
    let (last, parents) = path.split_last().context("an empty settings path")?;
    let key = (path.join("."), entry.to_string());
    if ctx.remove && !ctx.remembered.contains(&key) {
        return Ok(None);
    }
    if ctx.remove && !path_exists(doc, parents) {
        return Ok(None);
    }
    let parent = object_at(doc, parents, ctx);
    let list: CstArray = match parent.get(last).and_then(|p| p.value()) {
        Some(v) => v.as_array().with_context(|| {
            format!(
                "`{}` is not a list; cordon adds `{entry}` only to a list",
                path.join(".")
            )
        })?,
        None if ctx.remove => return Ok(None),
        None => {
            ctx.made(path);
            parent.array_value_or_set(last)
        }
    };
    let found = list
        .elements()
        .into_iter()
        .find(|e| e.to_serde_value() == Some(Value::String(entry.to_string())));
    match (found, ctx.remove) {
        (Some(node), true) => {
            node.remove();
            Ok(None)
        }
        (None, false) => {
            list.append(CstInputValue::String(entry.to_string()));
            Ok(Some(key))
        }
        _ => Ok(None),
    }
}

/// cordon's hook group in the event list at `path`: earlier ones of cordon's (a command of a
/// `cordon` binary that ends with `marker`) are replaced, or with `remove` taken out.
fn hook_entry(
    doc: &CstObject,
    path: &[&str],
    hook: &Value,
    marker: &str,
    ctx: &Ctx,
) -> anyhow::Result<()> {
    let remove = ctx.remove;
    let (last, parents) = path.split_last().context("an empty settings path")?;
    if remove && !path_exists(doc, parents) {
        return Ok(());
    }
    let parent = object_at(doc, parents, ctx);
    let list = match parent.get(last).and_then(|p| p.value()) {
        Some(v) => v
            .as_array()
            .with_context(|| format!("`{}` is not a list of hook groups", path.join(".")))?,
        None if remove => return Ok(()),
        None => {
            ctx.made(path);
            parent.array_value_or_set(last)
        }
    };
    for group in list.elements() {
        let ours = group.to_serde_value().is_some_and(|g| {
            g["hooks"].as_array().is_some_and(|hooks| {
                hooks
                    .iter()
                    .any(|h| h["command"].as_str().is_some_and(|c| is_cordons(c, marker)))
            })
        });
        if ours {
            group.remove();
        }
    }
    if !remove {
        list.append(input(hook));
    }
    Ok(())
}

/// Whether the objects at `path` exist (on removal nothing is made).
fn path_exists(doc: &CstObject, path: &[&str]) -> bool {
    path.iter()
        .try_fold(doc.clone(), |o, k| o.object_value(k))
        .is_some()
}

/// Whether `command` runs a `cordon` binary with `marker` for arguments.
fn is_cordons(command: &str, marker: &str) -> bool {
    command.split_once(' ').is_some_and(|(program, rest)| {
        Path::new(program)
            .file_name()
            .is_some_and(|n| n == "cordon")
            && rest.trim().starts_with(marker)
    })
}

/// `mcpServers.cordon`: set, or with `remove` taken out when it runs a `cordon` binary.
fn server_entry(doc: &CstObject, server: &Value, ctx: &Ctx) -> anyhow::Result<()> {
    let remove = ctx.remove;
    let servers = match doc.get("mcpServers") {
        Some(p) if p.object_value().is_none() => bail!("`mcpServers` is not an object"),
        Some(p) => p.object_value_or_set(),
        None if remove => return Ok(()),
        None => {
            ctx.made(&["mcpServers"]);
            doc.object_value_or_set("mcpServers")
        }
    };
    match (servers.get("cordon"), remove) {
        (Some(existing), true) => {
            let ours = existing
                .value()
                .and_then(|v| v.to_serde_value())
                .is_some_and(|v| {
                    v["command"]
                        .as_str()
                        .is_some_and(|c| Path::new(c).file_name().is_some_and(|n| n == "cordon"))
                });
            if ours {
                existing.remove();
            }
        }
        (Some(existing), false) => existing.set_value(input(server)),
        (None, false) => {
            servers.append("cordon", input(server));
        }
        (None, true) => {}
    }
    Ok(())
}

/// A JSON value as the syntax tree takes it.
fn input(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(input).collect()),
        Value::Object(o) => {
            CstInputValue::Object(o.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
    }
}

/// Where setup remembers what it added to `file`.
fn record(places: &Places, file: &Path) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    file.hash(&mut h);
    places.state.join(format!("setup-{:016x}.json", h.finish()))
}

fn remembered(places: &Places, file: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(record(places, file))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Writes each changed file, after keeping a copy of what was there
/// (`FILE.cordon-backup.SECONDS`); returns the copies made.
pub fn apply(edits: &[FileEdit], places: &Places, remove: bool) -> anyhow::Result<Vec<PathBuf>> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut backups = Vec::new();
    for e in edits.iter().filter(|e| e.changes()) {
        if let Some(dir) = e.path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("{}: cannot make the directory", dir.display()))?;
        }
        if let Some(before) = &e.before {
            backups.push(keep_copy(&e.path, stamp, before)?);
        }
        let Some(after) = &e.after else {
            std::fs::remove_file(&e.path)
                .with_context(|| format!("{}: cannot remove it", e.path.display()))?;
            continue;
        };
        // Written beside it, under a fresh name of its own (a link planted at a name cordon
        // would pick is not written through), and renamed over it: the agent never reads half
        // a file.
        let dir = e.path.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::Builder::new()
            .prefix(".cordon-setup-")
            .tempfile_in(dir)
            .with_context(|| format!("{}: cannot write a file here", dir.display()))?;
        std::io::Write::write_all(&mut tmp, after.as_bytes())
            .with_context(|| format!("{}: cannot write", tmp.path().display()))?;
        if let Ok(meta) = std::fs::metadata(&e.path) {
            let _ = tmp.as_file().set_permissions(meta.permissions());
        }
        tmp.persist(&e.path)
            .with_context(|| format!("{}: cannot replace it", e.path.display()))?;
    }
    for e in edits {
        let path = record(places, &e.path);
        if remove {
            let _ = std::fs::remove_file(&path);
        } else if !e.added.is_empty() {
            std::fs::create_dir_all(&places.state)
                .with_context(|| format!("{}: cannot make it", places.state.display()))?;
            let mut all = remembered(places, &e.path);
            all.extend(e.added.iter().cloned());
            all.sort();
            all.dedup();
            std::fs::write(&path, serde_json::to_string(&all)?)
                .with_context(|| format!("{}: cannot write", path.display()))?;
        }
    }
    Ok(backups)
}

/// A copy of `text`, the file at `path` before this change, beside it under the first free
/// name `PATH.cordon-backup.SECONDS[.N]`. Only a new file is made: whatever already has a name
/// (an earlier copy, or a link planted there) is passed over, never written through.
fn keep_copy(path: &Path, stamp: u64, text: &str) -> anyhow::Result<PathBuf> {
    for n in 0..100 {
        let mut name = path.to_path_buf().into_os_string();
        name.push(format!(".cordon-backup.{stamp}"));
        if n > 0 {
            name.push(format!(".{n}"));
        }
        let backup = PathBuf::from(name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&backup)
        {
            Ok(mut f) => {
                std::io::Write::write_all(&mut f, text.as_bytes())
                    .with_context(|| format!("{}: cannot keep a copy", backup.display()))?;
                return Ok(backup);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("{}: cannot keep a copy", backup.display()));
            }
        }
    }
    bail!(
        "{}: a hundred backup names are taken already; remove old {}.cordon-backup.* files",
        path.display(),
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places(dir: &Path) -> Places {
        Places {
            project: dir.join("project"),
            home: dir.join("home"),
            cordon: PathBuf::from("/opt/bin/cordon"),
            state: dir.join("state"),
        }
    }

    fn setup(places: &Places, agent: Agent, remove: bool) -> Vec<FileEdit> {
        let edits = plan(agent, Scope::Project, places, remove).expect("plans");
        apply(&edits, places, remove).expect("applies");
        edits
    }

    fn read(p: &Path) -> Value {
        let text = std::fs::read_to_string(p).expect("read");
        CstRootNode::parse(&text, &ParseOptions::default())
            .expect("parses")
            .value()
            .and_then(|v| v.to_serde_value())
            .expect("a value")
    }

    /// Existing content, comments and order stay; the hook, the server and the shell switch
    /// come in once however often setup runs; --remove takes out what setup added, and only
    /// that, leaving the file as it was.
    #[test]
    fn setup_edits_in_place_and_remove_undoes_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let places = places(dir.path());
        let settings = places.project.join(".claude/settings.json");
        std::fs::create_dir_all(settings.parent().expect("dir")).expect("mkdir");
        let original = "{\n  // the user's own\n  \"model\": \"opus\",\n  \"permissions\": {\n    \"deny\": [\"Bash\", \"WebFetch\"]\n  }\n}\n";
        std::fs::write(&settings, original).expect("write");

        setup(&places, Agent::ClaudeCode, false);
        let twice = setup(&places, Agent::ClaudeCode, false);
        assert!(
            twice.iter().all(|e| !e.changes()),
            "a second setup changes nothing"
        );
        let text = std::fs::read_to_string(&settings).expect("read");
        assert!(text.contains("// the user's own"), "{text}");
        let v = read(&settings);
        assert_eq!(v["model"], "opus");
        assert_eq!(
            v["permissions"]["deny"],
            json!(["Bash", "WebFetch"]),
            "{text}"
        );
        assert_eq!(v["enabledMcpjsonServers"], json!(["cordon"]), "{text}");
        assert_eq!(
            v["hooks"]["PreToolUse"].as_array().map(Vec::len),
            Some(1),
            "{text}"
        );
        assert_eq!(
            v["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            "/opt/bin/cordon hook claude-code"
        );
        let mcp = read(&places.project.join(".mcp.json"));
        assert_eq!(mcp["mcpServers"]["cordon"]["args"], json!(["mcp"]));

        setup(&places, Agent::ClaudeCode, true);
        // The user's own Bash denial stays; what setup made goes; the file it made goes.
        assert_eq!(std::fs::read_to_string(&settings).expect("read"), original);
        assert!(!places.project.join(".mcp.json").exists());
    }

    /// What setup made, --remove takes out again, the file included.
    #[test]
    fn remove_takes_out_what_setup_added() {
        let dir = tempfile::tempdir().expect("temp dir");
        let places = places(dir.path());
        setup(&places, Agent::GeminiCli, false);
        let settings = places.project.join(".gemini/settings.json");
        let v = read(&settings);
        assert_eq!(
            v["hooks"]["BeforeTool"][0]["hooks"][0]["command"],
            "/opt/bin/cordon hook gemini-cli --no-own-shell"
        );
        assert_eq!(v["mcpServers"]["cordon"]["command"], "/opt/bin/cordon");
        setup(&places, Agent::GeminiCli, true);
        assert!(
            !settings.exists(),
            "setup made the file; removing leaves nothing of it"
        );
    }

    /// A cloned project may plant links: a settings directory or file that is a link is
    /// refused, and a link at a backup's name is not written through; what they point at
    /// stays as it was.
    #[test]
    fn links_planted_in_a_project_are_not_written_through() {
        let dir = tempfile::tempdir().expect("temp dir");
        let places = places(dir.path());
        let victim_dir = dir.path().join("victim");
        std::fs::create_dir_all(&victim_dir).expect("mkdir");
        std::fs::write(victim_dir.join("settings.json"), "{\"mine\": 1}").expect("write");
        std::fs::create_dir_all(&places.project).expect("mkdir");
        std::os::unix::fs::symlink(&victim_dir, places.project.join(".gemini")).expect("link");
        let err = plan(Agent::GeminiCli, Scope::Project, &places, false)
            .expect_err("a linked directory")
            .to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
        std::fs::remove_file(places.project.join(".gemini")).expect("unlink");

        std::fs::create_dir_all(places.project.join(".gemini")).expect("mkdir");
        let settings = places.project.join(".gemini/settings.json");
        std::os::unix::fs::symlink(victim_dir.join("settings.json"), &settings).expect("link");
        let err = plan(Agent::GeminiCli, Scope::Project, &places, false)
            .expect_err("a linked file")
            .to_string();
        assert!(err.contains("is a symbolic link"), "{err}");
        std::fs::remove_file(&settings).expect("unlink");

        // Links at every backup name of the next few seconds.
        std::fs::write(&settings, "{}").expect("write");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("time")
            .as_secs();
        for s in now..now + 5 {
            let mut name = settings.clone().into_os_string();
            name.push(format!(".cordon-backup.{s}"));
            std::os::unix::fs::symlink(victim_dir.join("settings.json"), name).expect("link");
        }
        let edits = plan(Agent::GeminiCli, Scope::Project, &places, false).expect("plans");
        let backups = apply(&edits, &places, false).expect("applies");
        assert_eq!(backups.len(), 1);
        assert!(
            !std::fs::symlink_metadata(&backups[0])
                .expect("the copy")
                .file_type()
                .is_symlink(),
            "the copy is a file of its own: {}",
            backups[0].display()
        );
        assert_eq!(std::fs::read_to_string(&backups[0]).expect("read"), "{}");
        assert_eq!(
            std::fs::read_to_string(victim_dir.join("settings.json")).expect("read"),
            "{\"mine\": 1}"
        );
        assert!(
            std::fs::read_to_string(&settings)
                .expect("read")
                .contains("hook gemini-cli")
        );
    }

    /// A file cordon cannot edit is refused by name, and nothing is written.
    #[test]
    fn a_broken_or_odd_file_is_refused_by_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        let places = places(dir.path());
        let settings = places.project.join(".gemini/settings.json");
        std::fs::create_dir_all(settings.parent().expect("dir")).expect("mkdir");
        for (text, says) in [
            ("{ \"tools\": ", "not JSON that cordon can edit"),
            ("[1, 2]", "not a JSON object"),
            ("{\"mcpServers\": []}", "`mcpServers` is not an object"),
            (
                "{\"hooks\": {\"BeforeTool\": {}}}",
                "not a list of hook groups",
            ),
        ] {
            std::fs::write(&settings, text).expect("write");
            let err = plan(Agent::GeminiCli, Scope::Project, &places, false)
                .expect_err(text)
                .to_string();
            assert!(err.contains(says), "{text}: {err}");
            assert_eq!(std::fs::read_to_string(&settings).expect("read"), text);
        }
    }
}
