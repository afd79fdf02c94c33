//! `cordon setup AGENT`: the agent's own settings edited so that cordon decides its tool calls
//! (the hook) and runs its shell commands in cordon's sandbox: Claude Code's and Gemini CLI's
//! own shell tool through the hook, which rewrites each command to run under `cordon run`;
//! Codex's through `cordon mcp`, its MCP server, with Codex's own shell tool off (its hook
//! cannot hand a command to a sandbox of cordon's inside its own). `cordon mcp` is every
//! agent's MCP server either way. Files are edited in place: comments, order and everything else
//! stay as they were (a concrete syntax tree, not a parse and a rewrite), a copy of each file
//! is kept beside it before it changes, and `--remove` takes out what setup put in.
//!
//! What setup added that the user might have had anyway (Codex's shell switched off) is
//! remembered in cordon's state directory, so that `--remove` takes out only what setup added.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstArray, CstInputValue, CstObject, CstRootNode};
use serde_json::{Value, json};
use toml_edit::{DocumentMut, Item, TableLike};

use super::Agent;

/// How one file is changed: set up, or (with `remove`) undone, taking out of lists only the
/// entries setup remembers adding.
struct Ctx {
    remove: bool,
    remembered: Vec<(String, String)>,
    /// Objects and lists setup made, by dotted path: taken out again once empty.
    created: std::cell::RefCell<Vec<String>>,
    /// What setup remembered adding and has taken out again while setting up.
    forgotten: std::cell::RefCell<Vec<(String, String)>>,
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
    /// What setup had added before and this edit takes out.
    forgotten: Vec<(String, String)>,
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
    /// Codex's own directory for the user's settings (`CODEX_HOME`, else `~/.codex`).
    pub codex_home: PathBuf,
    /// The `cordon` to run: its absolute path.
    pub cordon: PathBuf,
    /// `cordon-hook` beside it, when installed: the agents' hooks name it, as it starts in
    /// less time than `cordon hook` (it links nothing else); without it, `cordon hook`.
    pub hook: Option<PathBuf>,
    /// Where setup remembers what it added.
    pub state: PathBuf,
    /// What the hook does with a question nobody will answer (`--headless`).
    pub headless: super::Headless,
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
    let cordon = command_path(&places.cordon, "cordon")?;
    // The hook's command, up to the agent's name.
    let hook = match &places.hook {
        Some(program) => command_path(program, "cordon-hook")?.to_string(),
        None => format!("{cordon} hook"),
    };
    let sandboxed = format!("--sandbox-shell --headless {}", places.headless.name());
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
                "matcher": super::hook_matcher(&format!("mcp__{}__", super::OWN_SERVER)),
                // Claude Code keeps its own Bash tool; the hook runs its commands in cordon's
                // sandbox.
                "hooks": [{"type": "command",
                           "command": format!("{hook} claude-code {sandboxed}")}],
            });
            let server = json!({"command": cordon, "args": ["mcp"]});
            let settings = base.join(".claude/settings.json");
            linked(&settings)?;
            edits.push(edit_json(&settings, places, remove, |doc, ctx, adds| {
                hook_entry(doc, &["hooks", "PreToolUse"], &hook, Agent::ClaudeCode, ctx)?;
                // Setups before the hook ran Bash in the sandbox switched Bash off: setting up
                // again or removing takes that denial out, where setup remembers adding it (a
                // denial of the user's own stays).
                let older = Ctx {
                    remove: true,
                    remembered: ctx.remembered.clone(),
                    created: Default::default(),
                    forgotten: Default::default(),
                };
                list_entry(doc, &["permissions", "deny"], "Bash", &older)?;
                ctx.forgotten
                    .borrow_mut()
                    .push(("permissions.deny".into(), "Bash".into()));
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
            edits.push(edit_json(&servers, places, remove, |doc, ctx, _| {
                server_entry(doc, &server, ctx)
            })?);
        }
        Agent::GeminiCli => {
            let hook = json!({
                "matcher": super::hook_matcher(&format!("mcp_{}_", super::OWN_SERVER)),
                // Gemini CLI keeps its own shell tool; the hook runs its commands in cordon's
                // sandbox.
                "hooks": [{"type": "command", "name": "cordon",
                           "command": format!("{hook} gemini-cli {sandboxed}")}],
            });
            let server = json!({"command": cordon, "args": ["mcp"]});
            let settings = base.join(".gemini/settings.json");
            linked(&settings)?;
            edits.push(edit_json(&settings, places, remove, |doc, ctx, _| {
                hook_entry(doc, &["hooks", "BeforeTool"], &hook, Agent::GeminiCli, ctx)?;
                server_entry(doc, &server, ctx)?;
                Ok(())
            })?);
        }
        Agent::Codex => {
            let config = match scope {
                Scope::Project => base.join(".codex/config.toml"),
                Scope::User => places.codex_home.join("config.toml"),
            };
            linked(&config)?;
            edits.push(edit_toml(&config, places, remove, |doc, ctx, adds| {
                codex_hook(doc, &hook, ctx)?;
                codex_server(doc, cordon, ctx)?;
                // Codex has a switch for its shell tool alone; cordon's, an MCP tool, stays.
                adds.extend(toml_false(doc, &["features", "shell_tool"], ctx)?);
                Ok(())
            })?);
        }
    }
    Ok(edits)
}

/// The edit of one file's text. `change` edits the text as its format has it and says what
/// the text is after and whether that holds no settings at all; `same` says whether two texts
/// hold the same settings.
fn edit(
    path: &Path,
    places: &Places,
    remove: bool,
    same: fn(&str, &str) -> bool,
    change: impl FnOnce(&str, &Ctx, &mut Vec<(String, String)>) -> anyhow::Result<(String, bool)>,
) -> anyhow::Result<FileEdit> {
    let before = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("{}: cannot read it", path.display())),
    };
    let remembered = remembered(places, path);
    let original_kept = remembered.iter().any(|(kind, _)| kind == ORIGINAL);
    let ctx = Ctx {
        remove,
        remembered,
        created: Default::default(),
        forgotten: Default::default(),
    };
    let mut added = Vec::new();
    let (mut after, emptied) = change(before.as_deref().unwrap_or_default(), &ctx, &mut added)?;
    if !remove {
        added.extend(
            ctx.created
                .take()
                .into_iter()
                .map(|p| (CREATED.to_string(), p)),
        );
        if before.is_none() {
            added.push((CREATED.to_string(), String::new()));
        }
    }
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
            && same(original, &after)
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
    let forgotten = ctx.forgotten.take();
    Ok(FileEdit {
        path: path.to_path_buf(),
        before,
        after: (!(remove && made_the_file && emptied)).then_some(after),
        added,
        forgotten,
    })
}

/// What setup made, remembered by dotted path, deepest first: on removal, each that is left
/// empty goes too.
fn made_paths(ctx: &Ctx) -> Vec<Vec<&str>> {
    let mut made: Vec<Vec<&str>> = ctx
        .remembered
        .iter()
        .filter(|(kind, p)| kind == CREATED && !p.is_empty())
        .map(|(_, p)| p.split('.').collect())
        .collect();
    made.sort_by_key(|p| std::cmp::Reverse(p.len()));
    made
}

/// The edit of a JSON (with comments) settings file: `change` applied to its syntax tree.
fn edit_json(
    path: &Path,
    places: &Places,
    remove: bool,
    change: impl FnOnce(&CstObject, &Ctx, &mut Vec<(String, String)>) -> anyhow::Result<()>,
) -> anyhow::Result<FileEdit> {
    let same = |a: &str, b: &str| value_of(a) == value_of(b);
    edit(path, places, remove, same, |text, ctx, added| {
        let source = if text.trim().is_empty() { "{}\n" } else { text };
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
        change(&doc, ctx, added).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if ctx.remove {
            for parts in made_paths(ctx) {
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
        }
        Ok((root.to_string(), doc.properties().is_empty()))
    })
}

/// The edit of a TOML settings file (Codex's): `change` applied to the document, which keeps
/// comments and layout.
fn edit_toml(
    path: &Path,
    places: &Places,
    remove: bool,
    change: impl FnOnce(&mut DocumentMut, &Ctx, &mut Vec<(String, String)>) -> anyhow::Result<()>,
) -> anyhow::Result<FileEdit> {
    let same = |a: &str, b: &str| {
        let parse = |t: &str| t.parse::<toml::Table>().ok();
        parse(a).is_some() && parse(a) == parse(b)
    };
    edit(path, places, remove, same, |text, ctx, added| {
        let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
            anyhow::anyhow!(
                "{}: not TOML that cordon can edit ({}); fix it, or edit it by hand",
                path.display(),
                e.to_string().trim_end()
            )
        })?;
        change(&mut doc, ctx, added).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if ctx.remove {
            for parts in made_paths(ctx) {
                let (last, parents) = parts.split_last().context("an empty settings path")?;
                let Some(parent) = toml_find(doc.as_table_mut(), parents) else {
                    continue;
                };
                let empty = parent.get(last).is_some_and(|item| match item {
                    Item::ArrayOfTables(a) => a.is_empty(),
                    Item::Value(toml_edit::Value::Array(a)) => a.is_empty(),
                    other => other.as_table_like().is_some_and(|t| t.is_empty()),
                });
                if empty {
                    parent.remove(last);
                }
            }
        }
        let empty = doc.as_table().is_empty();
        Ok((doc.to_string(), empty))
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

/// cordon's hook group in the event list at `path`: earlier ones of cordon's (a command of
/// cordon's hook for `agent`) are replaced, or with `remove` taken out.
fn hook_entry(
    doc: &CstObject,
    path: &[&str],
    hook: &Value,
    agent: Agent,
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
                hooks.iter().any(|h| {
                    h["command"]
                        .as_str()
                        .is_some_and(|c| super::is_cordons_hook(c, agent))
                })
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

/// The table at `path` under `table`, if there is one.
fn toml_find<'a>(table: &'a mut dyn TableLike, path: &[&str]) -> Option<&'a mut dyn TableLike> {
    match path.split_first() {
        None => Some(table),
        Some((key, rest)) => toml_find(table.get_mut(key)?.as_table_like_mut()?, rest),
    }
}

/// The table at `path` in `doc`: made where missing (and remembered as made), except on
/// removal, which makes nothing and finds `None`.
fn toml_table<'a>(
    doc: &'a mut DocumentMut,
    path: &[&str],
    ctx: &Ctx,
) -> anyhow::Result<Option<&'a mut dyn TableLike>> {
    let mut here: &mut dyn TableLike = doc.as_table_mut();
    for (i, key) in path.iter().enumerate() {
        if here.get(key).is_none() {
            if ctx.remove {
                return Ok(None);
            }
            ctx.made(&path[..=i]);
            let mut table = toml_edit::Table::new();
            table.set_implicit(true);
            here.insert(key, Item::Table(table));
        }
        here = here
            .get_mut(key)
            .and_then(Item::as_table_like_mut)
            .with_context(|| format!("`{}` is not a table", path[..=i].join(".")))?;
    }
    Ok(Some(here))
}

/// The commands of a hook group's `hooks`, however the file spells the list.
fn toml_commands(hooks: Option<&Item>) -> Vec<String> {
    let command = |t: &dyn TableLike| t.get("command")?.as_str().map(String::from);
    match hooks {
        Some(Item::ArrayOfTables(list)) => list.iter().filter_map(|t| command(t)).collect(),
        Some(Item::Value(toml_edit::Value::Array(list))) => list
            .iter()
            .filter_map(|v| command(v.as_inline_table()?))
            .collect(),
        _ => Vec::new(),
    }
}

/// cordon's group in Codex's `hooks.PreToolUse`: earlier ones of cordon's are replaced, or with
/// `remove` taken out. It has no matcher: Codex's matchers are regular expressions without
/// look-ahead, which cannot leave out cordon's own tools alone, so the hook lets those through
/// itself (`cordon mcp` decides them).
fn codex_hook(doc: &mut DocumentMut, hook: &str, ctx: &Ctx) -> anyhow::Result<()> {
    let Some(hooks) = toml_table(doc, &["hooks"], ctx)? else {
        return Ok(());
    };
    if hooks.get("PreToolUse").is_none() {
        if ctx.remove {
            return Ok(());
        }
        ctx.made(&["hooks", "PreToolUse"]);
        hooks.insert("PreToolUse", Item::ArrayOfTables(Default::default()));
    }
    let ours = |commands: Vec<String>| {
        commands
            .iter()
            .any(|c| super::is_cordons_hook(c, Agent::Codex))
    };
    let command = format!("{hook} codex");
    match hooks.get_mut("PreToolUse") {
        Some(Item::ArrayOfTables(groups)) => {
            groups.retain(|g| !ours(toml_commands(g.get("hooks"))));
            if !ctx.remove {
                let mut hook = toml_edit::Table::new();
                hook.insert("type", toml_edit::value("command"));
                hook.insert("command", toml_edit::value(command));
                let mut list = toml_edit::ArrayOfTables::new();
                list.push(hook);
                let mut group = toml_edit::Table::new();
                group.insert("hooks", Item::ArrayOfTables(list));
                groups.push(group);
            }
        }
        Some(Item::Value(toml_edit::Value::Array(groups))) => {
            groups.retain(|g| {
                !g.as_inline_table().is_some_and(|t| {
                    let hooks = t.get("hooks").cloned().map(Item::Value);
                    ours(toml_commands(hooks.as_ref()))
                })
            });
            if !ctx.remove {
                let mut hook = toml_edit::InlineTable::new();
                hook.insert("type", "command".into());
                hook.insert("command", command.into());
                let mut group = toml_edit::InlineTable::new();
                group.insert("hooks", toml_edit::Array::from_iter([hook]).into());
                groups.push(group);
            }
        }
        _ => bail!("`hooks.PreToolUse` is not a list of hook groups"),
    }
    Ok(())
}

/// `mcp_servers.cordon` in Codex's settings: set, or with `remove` taken out when it runs a
/// `cordon` binary. Its tools need no approval from Codex: `cordon mcp` decides each call
/// itself, and asks the person where its policy says to.
fn codex_server(doc: &mut DocumentMut, cordon: &str, ctx: &Ctx) -> anyhow::Result<()> {
    let Some(servers) = toml_table(doc, &["mcp_servers"], ctx)? else {
        return Ok(());
    };
    if ctx.remove {
        let ours = servers
            .get("cordon")
            .and_then(Item::as_table_like)
            .and_then(|t| t.get("command")?.as_str().map(String::from))
            .is_some_and(|c| Path::new(&c).file_name().is_some_and(|n| n == "cordon"));
        if ours {
            servers.remove("cordon");
        }
        return Ok(());
    }
    let mut server = toml_edit::Table::new();
    server.insert("command", toml_edit::value(cordon));
    server.insert(
        "args",
        toml_edit::value(toml_edit::Array::from_iter(["mcp"])),
    );
    server.insert("default_tools_approval_mode", toml_edit::value("approve"));
    servers.insert("cordon", Item::Table(server));
    Ok(())
}

/// The switch at `path` set to false, returned to be remembered when setup set it; on removal
/// taken out again only where setup remembers setting it.
fn toml_false(
    doc: &mut DocumentMut,
    path: &[&str],
    ctx: &Ctx,
) -> anyhow::Result<Option<(String, String)>> {
    let key = (path.join("."), "false".to_string());
    let (last, parents) = path.split_last().context("an empty settings path")?;
    if ctx.remove && !ctx.remembered.contains(&key) {
        return Ok(None);
    }
    let Some(table) = toml_table(doc, parents, ctx)? else {
        return Ok(None);
    };
    let off = table.get(last).and_then(Item::as_bool) == Some(false);
    match (ctx.remove, off) {
        (true, true) => {
            table.remove(last);
            Ok(None)
        }
        (false, false) => {
            table.insert(last, toml_edit::value(false));
            Ok(Some(key))
        }
        _ => Ok(None),
    }
}

/// What the person still has to do in the agent itself after setup.
pub fn notes(agent: Agent, scope: Scope) -> Vec<&'static str> {
    match (agent, scope) {
        (Agent::Codex, scope) => {
            // Whether it trusts the hook yet, Codex is asked once setup is done
            // (`super::codex_trust`).
            let mut notes = Vec::new();
            if scope == Scope::Project {
                notes.push(
                    "Codex reads .codex/config.toml only in a project it trusts: answer its trust question, or run codex with --trust once",
                );
            }
            notes
        }
        _ => Vec::new(),
    }
}

/// Whether `command` runs a `cordon` binary with `marker` for arguments.
/// `path` as the agent's settings may hold it: a shell runs the hook's command line.
fn command_path<'a>(path: &'a Path, what: &str) -> anyhow::Result<&'a str> {
    let text = path.to_str().with_context(|| {
        format!("{what}'s path is not UTF-8; it cannot be written into the agent's settings")
    })?;
    if text.contains(' ') || text.contains('"') || text.contains('\'') {
        bail!(
            "{what}'s path {text} holds a space or a quote; the agent runs hooks through a shell, so put {what} where its path has neither"
        );
    }
    Ok(text)
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
        } else if !e.added.is_empty() || !e.forgotten.is_empty() {
            std::fs::create_dir_all(&places.state)
                .with_context(|| format!("{}: cannot make it", places.state.display()))?;
            let mut all = remembered(places, &e.path);
            all.retain(|k| !e.forgotten.contains(k));
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
            codex_home: dir.join("home/.codex"),
            cordon: PathBuf::from("/opt/bin/cordon"),
            hook: None,
            state: dir.join("state"),
            headless: super::super::Headless::Contain,
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
            "/opt/bin/cordon hook claude-code --sandbox-shell --headless contain"
        );
        let mcp = read(&places.project.join(".mcp.json"));
        assert_eq!(mcp["mcpServers"]["cordon"]["args"], json!(["mcp"]));

        setup(&places, Agent::ClaudeCode, true);
        // The user's own Bash denial stays; what setup made goes; the file it made goes.
        assert_eq!(std::fs::read_to_string(&settings).expect("read"), original);
        assert!(!places.project.join(".mcp.json").exists());
    }

    /// With `cordon-hook` installed beside cordon, each agent's hook names it; it replaces the
    /// `cordon hook` an earlier setup wrote (and the other way round), and --remove takes
    /// either out.
    #[test]
    fn the_hook_names_cordon_hook_where_it_is_installed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let plain = places(dir.path());
        let fast = Places {
            hook: Some(PathBuf::from("/opt/bin/cordon-hook")),
            ..places(dir.path())
        };
        let claude = plain.project.join(".claude/settings.json");
        let gemini = plain.project.join(".gemini/settings.json");
        let codex = plain.project.join(".codex/config.toml");
        // Every hook command in the file, wherever it is.
        fn hook_commands(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(c)) = m.get("command")
                        && c.contains("hook")
                    {
                        out.push(c.clone());
                    }
                    m.values().for_each(|v| hook_commands(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| hook_commands(v, out)),
                _ => {}
            }
        }
        let commands = |file: &Path| -> Vec<String> {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            let v = if file.extension().is_some_and(|e| e == "toml") {
                let doc: toml::Table = toml::from_str(&text).expect("TOML");
                serde_json::to_value(doc).expect("as JSON")
            } else if text.is_empty() {
                Value::Null
            } else {
                read(file)
            };
            let mut out = Vec::new();
            hook_commands(&v, &mut out);
            out
        };
        for agent in [Agent::ClaudeCode, Agent::GeminiCli, Agent::Codex] {
            setup(&plain, agent, false);
            setup(&fast, agent, false);
        }
        assert_eq!(
            commands(&claude),
            ["/opt/bin/cordon-hook claude-code --sandbox-shell --headless contain"]
        );
        assert_eq!(
            commands(&gemini),
            ["/opt/bin/cordon-hook gemini-cli --sandbox-shell --headless contain"]
        );
        assert_eq!(commands(&codex), ["/opt/bin/cordon-hook codex"]);
        // The MCP server is cordon's in every case: only the hook has a program of its own.
        assert_eq!(
            read(&plain.project.join(".mcp.json"))["mcpServers"]["cordon"]["command"],
            "/opt/bin/cordon"
        );
        setup(&plain, Agent::ClaudeCode, false);
        assert_eq!(
            commands(&claude),
            ["/opt/bin/cordon hook claude-code --sandbox-shell --headless contain"]
        );
        for agent in [Agent::ClaudeCode, Agent::GeminiCli, Agent::Codex] {
            setup(&fast, agent, true);
        }
        for file in [&claude, &gemini, &codex] {
            assert!(commands(file).is_empty(), "{}", file.display());
        }
    }

    /// A setup from before the hook ran Bash in cordon's sandbox denied Bash; setting up
    /// again takes that denial out (Bash now runs, rewritten into the sandbox), and only that.
    #[test]
    fn setup_again_lifts_the_bash_denial_an_older_setup_added() {
        let dir = tempfile::tempdir().expect("temp dir");
        let places = places(dir.path());
        let settings = places.project.join(".claude/settings.json");
        std::fs::create_dir_all(settings.parent().expect("dir")).expect("mkdir");
        std::fs::write(
            &settings,
            "{\"permissions\": {\"deny\": [\"WebFetch\", \"Bash\"]}}\n",
        )
        .expect("write");
        std::fs::create_dir_all(&places.state).expect("mkdir");
        let ledger = vec![("permissions.deny".to_string(), "Bash".to_string())];
        std::fs::write(
            record(&places, &settings),
            serde_json::to_string(&ledger).expect("json"),
        )
        .expect("write");
        setup(&places, Agent::ClaudeCode, false);
        assert_eq!(read(&settings)["permissions"]["deny"], json!(["WebFetch"]));
        // Forgotten too: a Bash denial the user adds later is theirs, and removal keeps it.
        let mut v = read(&settings);
        v["permissions"]["deny"] = json!(["WebFetch", "Bash"]);
        std::fs::write(&settings, v.to_string()).expect("write");
        setup(&places, Agent::ClaudeCode, true);
        assert_eq!(
            read(&settings)["permissions"]["deny"],
            json!(["WebFetch", "Bash"])
        );
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
            "/opt/bin/cordon hook gemini-cli --sandbox-shell --headless contain"
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

    /// Codex's TOML: comments and the user's own keys stay, the hook, the server and the shell
    /// switch come in once however often setup runs, a hook list written inline is kept inline,
    /// and --remove gives back the file as it was to the byte.
    #[test]
    fn codex_settings_are_edited_in_place_and_restored() {
        let dir = tempfile::tempdir().expect("temp dir");
        let places = places(dir.path());
        let config = places.project.join(".codex/config.toml");
        std::fs::create_dir_all(config.parent().expect("dir")).expect("mkdir");
        let original = "# mine\nmodel = \"o3\"\n\n[hooks]\nPreToolUse = [{ hooks = [{ type = \"command\", command = \"audit\" }] }]\n";
        std::fs::write(&config, original).expect("write");
        setup(&places, Agent::Codex, false);
        let twice = setup(&places, Agent::Codex, false);
        assert!(
            twice.iter().all(|e| !e.changes()),
            "a second setup changes nothing"
        );
        let text = std::fs::read_to_string(&config).expect("read");
        assert!(text.starts_with("# mine\nmodel = \"o3\"\n"), "{text}");
        let v: toml::Table = text.parse().expect("TOML");
        let groups = v["hooks"]["PreToolUse"].as_array().expect("a list");
        assert_eq!(groups.len(), 2, "{text}");
        assert_eq!(
            groups[1]["hooks"][0]["command"].as_str(),
            Some("/opt/bin/cordon hook codex")
        );
        assert_eq!(
            v["mcp_servers"]["cordon"]["args"].as_array().map(Vec::len),
            Some(1)
        );
        assert_eq!(v["features"]["shell_tool"].as_bool(), Some(false));
        setup(&places, Agent::Codex, true);
        assert_eq!(std::fs::read_to_string(&config).expect("read"), original);

        // A file setup made goes again; a broken one is refused by name and left alone.
        std::fs::remove_file(&config).expect("rm");
        setup(&places, Agent::Codex, false);
        setup(&places, Agent::Codex, true);
        assert!(!config.exists());
        for (text, says) in [
            ("model = ", "not TOML that cordon can edit"),
            ("mcp_servers = 3", "`mcp_servers` is not a table"),
            ("[hooks]\nPreToolUse = 1", "not a list of hook groups"),
        ] {
            std::fs::write(&config, text).expect("write");
            let err = plan(Agent::Codex, Scope::Project, &places, false)
                .expect_err(text)
                .to_string();
            assert!(err.contains(says), "{text}: {err}");
            assert!(err.starts_with(&config.display().to_string()), "{err}");
        }
    }
}
