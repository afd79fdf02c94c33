//! Settings people already wrote for other tools, read as a `cordon.toml`: Claude Code's
//! `settings.json`, sandbox-runtime's (`srt`) settings, Codex's `config.toml` and Gemini CLI's
//! `settings.json`. Whatever has no equivalent is named, never dropped silently.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::json_strings;

mod codex;

use super::file::{
    FilesystemTable, IgnoreRule, NetworkTable, PolicyTable, SandboxTable, SettingsFile,
};

/// Which tool a file belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Cordon,
    ClaudeCode,
    SandboxRuntime,
    Codex,
    Gemini,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Cordon => "cordon.toml",
            Format::ClaudeCode => "Claude Code settings.json",
            Format::SandboxRuntime => "sandbox-runtime (srt) settings",
            Format::Codex => "Codex config.toml",
            Format::Gemini => "Gemini CLI settings.json",
        }
    }
}

/// A file read as cordon settings, and what could not be carried over.
#[derive(Debug)]
pub struct Imported {
    pub format: Format,
    pub settings: SettingsFile,
    pub not_carried: Vec<String>,
}

/// Reads `path`, telling its format from its contents.
pub fn import(path: &Path) -> anyhow::Result<Imported> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    if let Ok(json) = serde_json::from_str::<Value>(&text) {
        let Some(top) = json.as_object() else {
            bail!("{}: a settings file holds a JSON object", path.display());
        };
        let mut out = Importer::new(path);
        if top.contains_key("permissions") || top.contains_key("sandbox") {
            out.claude(&json);
            return Ok(out.done(Format::ClaudeCode));
        }
        if top.contains_key("network") || top.contains_key("filesystem") {
            out.srt(&json);
            return Ok(out.done(Format::SandboxRuntime));
        }
        if top.contains_key("tools") || top.contains_key("coreTools") {
            out.gemini(&json);
            return Ok(out.done(Format::Gemini));
        }
        bail!(
            "{}: JSON, but not settings cordon can read (Claude Code: `permissions`/`sandbox`; srt: `network`/`filesystem`; Gemini CLI: `tools`)",
            path.display()
        );
    }
    let table: toml::Table = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: neither JSON nor TOML: {e}", path.display()))?;
    if codex::is_codex(&table) {
        let mut out = Importer::new(path);
        out.codex(&table)?;
        return Ok(out.done(Format::Codex));
    }
    Ok(Imported {
        format: Format::Cordon,
        settings: super::file::parse(path, &text)?,
        not_carried: Vec::new(),
    })
}

struct Importer {
    file: PathBuf,
    s: SettingsFile,
    not_carried: Vec<String>,
}

fn push(list: &mut Option<Vec<String>>, item: String) {
    let list = list.get_or_insert_with(Vec::new);
    if !list.contains(&item) {
        list.push(item);
    }
}

impl Importer {
    fn new(file: &Path) -> Self {
        Importer {
            // Absolute, so that paths relative to the file stay right wherever the result goes.
            file: std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf()),
            s: SettingsFile::default(),
            not_carried: Vec::new(),
        }
    }

    fn done(self, format: Format) -> Imported {
        Imported {
            format,
            settings: self.s,
            not_carried: self.not_carried,
        }
    }

    fn skip(&mut self, what: impl Into<String>) {
        self.not_carried.push(what.into());
    }

    fn fs(&mut self) -> &mut FilesystemTable {
        self.s.filesystem.get_or_insert_with(Default::default)
    }

    fn net(&mut self) -> &mut NetworkTable {
        self.s.network.get_or_insert_with(Default::default)
    }

    fn sandbox(&mut self) -> &mut SandboxTable {
        self.s.sandbox.get_or_insert_with(Default::default)
    }

    fn policy(&mut self) -> &mut PolicyTable {
        self.s.policy.get_or_insert_with(Default::default)
    }

    /// A path as Claude Code writes it in permission rules: `//x` is absolute, `/x` is relative
    /// to the settings file's directory, `~/x` is in the home directory, `./x` and `x` are
    /// relative to the project (kept relative: such a file belongs in `.cordon/cordon.toml`).
    fn claude_path(&self, p: &str) -> String {
        if let Some(abs) = p.strip_prefix("//") {
            format!("/{abs}")
        } else if let Some(rel) = p.strip_prefix('/') {
            let base = self.file.parent().unwrap_or(Path::new("/"));
            base.join(rel).display().to_string()
        } else if let Some(rel) = p.strip_prefix("./") {
            rel.to_string()
        } else {
            p.to_string()
        }
    }

    /// srt's filesystem and network blocks; Claude Code's `sandbox` block has the same shape.
    fn sandbox_blocks(&mut self, json: &Value, claude_paths: bool) {
        let path = |me: &Self, p: String| if claude_paths { me.claude_path(&p) } else { p };
        if let Some(fs) = json.get("filesystem") {
            for (key, target) in [
                ("denyRead", 0),
                ("allowRead", 1),
                ("allowWrite", 2),
                ("denyWrite", 3),
            ] {
                for p in json_strings(&fs[key]) {
                    let p = path(self, p);
                    let t = self.fs();
                    let list = match target {
                        0 => &mut t.deny_read,
                        1 => &mut t.allow_read,
                        2 => &mut t.allow_write,
                        _ => &mut t.deny_write,
                    };
                    push(list, p);
                }
            }
            if fs.get("disabled").and_then(Value::as_bool) == Some(true) {
                self.skip("filesystem.disabled: cordon always confines the file system");
            }
        }
        if let Some(net) = json.get("network") {
            for d in json_strings(&net["allowedDomains"]) {
                push(&mut self.net().allow_domains, d);
            }
            for d in json_strings(&net["deniedDomains"]) {
                push(&mut self.net().deny_domains, d);
            }
            for p in json_strings(&net["allowUnixSockets"]) {
                push(&mut self.net().allow_unix_sockets, p);
            }
            if let Some(b) = net["allowLocalBinding"].as_bool() {
                self.net().allow_local_binding = Some(b);
            }
            if net["allowAllUnixSockets"].as_bool() == Some(true) {
                self.skip("network.allowAllUnixSockets: cordon allows only the Unix sockets listed in network.allow_unix_sockets");
            }
            if let Some(up) = net["parentProxy"]["https"]
                .as_str()
                .or(net["parentProxy"]["http"].as_str())
            {
                self.net().upstream_proxy = Some(up.to_string());
            }
            for key in [
                "httpProxyPort",
                "socksProxyPort",
                "mitmProxy",
                "tlsTerminate",
            ] {
                if net.get(key).is_some() {
                    self.skip(format!("network.{key}: cordon runs its own proxy"));
                }
            }
        }
        if let Some(map) = json["ignoreViolations"].as_object() {
            for (command, paths) in map {
                let paths = json_strings(paths);
                self.s
                    .ignore_violations
                    .get_or_insert_with(Vec::new)
                    .push(IgnoreRule {
                        command: command.clone(),
                        paths,
                    });
            }
        }
        for key in ["enableWeakerNestedSandbox", "enableWeakerNetworkIsolation"] {
            if json[key].as_bool() == Some(true) {
                self.skip(format!(
                    "{key}: cordon does not weaken its sandbox on request; where namespaces are unavailable it falls back and says so"
                ));
            }
        }
    }

    fn srt(&mut self, json: &Value) {
        self.sandbox_blocks(json, false);
        if json.get("credentials").is_some() {
            self.skip("credentials: masking secrets is not something cordon does; use filesystem.deny_read and env.deny");
        }
    }

    fn claude(&mut self, json: &Value) {
        let sandbox = &json["sandbox"];
        if sandbox.is_object() {
            self.sandbox_blocks(sandbox, true);
            if let Some(b) = sandbox["enabled"].as_bool() {
                self.sandbox().enabled = Some(b);
            }
            if let Some(b) = sandbox["autoAllowBashIfSandboxed"].as_bool() {
                self.sandbox().auto_allow_if_sandboxed = Some(b);
            }
            if let Some(b) = sandbox["allowUnsandboxedCommands"].as_bool() {
                self.sandbox().allow_unsandboxed_commands = Some(b);
            }
            if let Some(b) = sandbox["failIfUnavailable"].as_bool() {
                self.sandbox().fail_if_unavailable = Some(b);
            }
            let excluded = json_strings(&sandbox["excludedCommands"]);
            if !excluded.is_empty() {
                self.sandbox().excluded_commands = Some(excluded);
            }
        }
        let permissions = &json["permissions"];
        for (list, decision) in [("allow", "allow"), ("deny", "deny"), ("ask", "ask")] {
            for rule in json_strings(&permissions[list]) {
                self.claude_rule(&rule, decision);
            }
        }
        for d in json_strings(&permissions["additionalDirectories"]) {
            let p = self.claude_path(&d);
            push(&mut self.fs().allow_write, p);
        }
        if let Some(mode) = permissions["defaultMode"].as_str() {
            self.skip(format!(
                "permissions.defaultMode = {mode:?}: choose the approval mode with --mode"
            ));
        }
    }

    /// One `Tool(specifier)` permission rule.
    fn claude_rule(&mut self, rule: &str, decision: &str) {
        let (tool, spec) = match rule.split_once('(') {
            Some((t, rest)) if rest.ends_with(')') => (t, Some(&rest[..rest.len() - 1])),
            _ => (rule, None),
        };
        let gemini_tool = match tool {
            "Bash" => "run_shell_command",
            "Read" => "read_file",
            "Edit" | "Write" | "MultiEdit" => "write_file",
            "WebFetch" => "web_fetch",
            "Grep" => "search_file_content",
            "Glob" => "glob",
            "LS" => "list_directory",
            _ => "",
        };
        match (tool, spec, decision) {
            ("Bash", Some(cmd), "allow" | "deny") => {
                // `git diff:*` is a prefix. A bare command is that command exactly: as a
                // prefix it would also allow its every extension, so an exact allow is not
                // carried over, while an exact deny becomes a (stricter) prefix deny.
                let prefix = cmd.strip_suffix(":*").or_else(|| cmd.strip_suffix(" *"));
                let prefix = match (prefix, decision) {
                    (Some(p), _) => p,
                    (None, "deny") => cmd,
                    (None, _) => {
                        return self.skip(format!(
                            "permissions.allow {rule:?}: an exact command; cordon's tool settings take command prefixes (`Bash({cmd}:*)` would allow its every form)"
                        ));
                    }
                };
                let entry = format!("run_shell_command({prefix})");
                let p = self.policy();
                let list = if decision == "allow" {
                    &mut p.allowed_tools
                } else {
                    &mut p.excluded_tools
                };
                push(list, entry);
            }
            ("Read", Some(path), "deny") => {
                let p = self.claude_path(path);
                push(&mut self.fs().deny_read, p);
            }
            ("Read", Some(path), "allow") => {
                let p = self.claude_path(path);
                push(&mut self.fs().allow_read, p);
            }
            ("Edit" | "Write" | "MultiEdit", Some(path), "allow") => {
                let p = self.claude_path(path);
                push(&mut self.fs().allow_write, p);
            }
            ("Edit" | "Write" | "MultiEdit", Some(path), "deny") => {
                let p = self.claude_path(path);
                push(&mut self.fs().deny_write, p);
            }
            ("WebFetch", Some(spec), "allow" | "deny") if spec.starts_with("domain:") => {
                let domain = spec["domain:".len()..].to_string();
                let n = self.net();
                let list = if decision == "allow" {
                    &mut n.allow_domains
                } else {
                    &mut n.deny_domains
                };
                push(list, domain);
            }
            (_, None, "allow" | "deny") if !gemini_tool.is_empty() => {
                let p = self.policy();
                let list = if decision == "allow" {
                    &mut p.allowed_tools
                } else {
                    &mut p.excluded_tools
                };
                push(list, gemini_tool.to_string());
            }
            (_, _, "ask") => self.skip(format!(
                "permissions.ask {rule:?}: asking is the policy's default for what no rule allows; write a policy rule for it in ~/.config/cordon/policies"
            )),
            _ => self.skip(format!(
                "permissions.{decision} {rule:?}: no cordon equivalent"
            )),
        }
    }

    fn gemini(&mut self, json: &Value) {
        // Current settings nest these under `tools`; older ones had them at the top.
        let tools = &json["tools"];
        let allowed = [&tools["allowed"], &json["allowedTools"]];
        let excluded = [&tools["exclude"], &json["excludeTools"]];
        for t in allowed.into_iter().flat_map(json_strings) {
            push(&mut self.policy().allowed_tools, t);
        }
        for t in excluded.into_iter().flat_map(json_strings) {
            push(&mut self.policy().excluded_tools, t);
        }
        for t in [&tools["core"], &json["coreTools"]]
            .into_iter()
            .flat_map(json_strings)
        {
            self.skip(format!(
                "tools.core {t:?}: cordon does not limit which tools exist; exclude the others"
            ));
        }
        let sandbox = if tools["sandbox"].is_null() {
            &json["sandbox"]
        } else {
            &tools["sandbox"]
        };
        match sandbox {
            Value::Null => {}
            Value::Bool(b) => self.sandbox().enabled = Some(*b),
            // Gemini CLI's sandbox commands, as cordon's backends.
            Value::String(s) if ["docker", "podman", "sandbox-exec"].contains(&s.as_str()) => {
                self.sandbox().backend = Some(
                    if s == "sandbox-exec" { "seatbelt" } else { s }.to_string(),
                );
            }
            other => self.skip(format!(
                "tools.sandbox = {other}: not a sandbox cordon knows; choose one with sandbox.backend"
            )),
        }
    }
}

/// The imported settings as a `cordon.toml`, what could not be carried over in comments at
/// its top.
pub fn to_toml(imported: &Imported, from: &Path) -> anyhow::Result<String> {
    let mut out = format!(
        "# cordon.toml imported from {} ({})\n",
        from.display(),
        imported.format.name()
    );
    for n in &imported.not_carried {
        out.push_str(&format!("# not carried over: {n}\n"));
    }
    out.push('\n');
    out.push_str(&toml::to_string(&imported.settings)?);
    Ok(out)
}
