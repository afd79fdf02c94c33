//! `cordon run --agent`: what the agent may not carry past the run. Its own directory is
//! writable (it keeps sessions, history and its login there), and so are its settings files,
//! which it may rewrite for its own reasons (a model chosen, a theme). But a hook, an MCP
//! server, a permission or an environment variable written there would run, or loosen, the
//! next plain start of the agent on the host, outside cordon.
//!
//! So each settings file is read before the run, and after it every top-level key that is not
//! known to be harmless ([`Profile::harmless_keys`]) is compared: where one changed, the file
//! is put back as it was (its other changes with it, so that nothing of a tampered file is
//! kept) and the change is reported as blocked. A key cordon does not know counts as one that
//! matters. The agent's directories of commands, sub-agents, hooks, extensions and the like
//! are kept read-only during the run instead (see [`Profile::control_dirs`]).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cordon_sandbox::Violation;
use serde_json::Value;

use super::profile::Profile;

/// The agent's settings files as they were before the run.
#[derive(Debug)]
pub struct AgentSettings {
    files: Vec<Kept>,
    harmless: &'static [&'static str],
    /// Undone already: [`AgentSettings::undo`] acts once, whichever end of the run gets there
    /// first.
    done: Mutex<bool>,
}

#[derive(Debug)]
struct Kept {
    path: PathBuf,
    /// `None`: it did not exist.
    before: Option<Vec<u8>>,
    /// Where it led, when it was a symbolic link (a dotfile manager's): a link the run put
    /// there, or moved, would have the next run's writes land in the settings.
    link: Option<PathBuf>,
}

/// What a settings file says, as JSON: `None` where it cannot be read as its format, which
/// counts as a change that matters.
fn parse(path: &Path, bytes: Option<&[u8]>) -> Option<Value> {
    let Some(bytes) = bytes else {
        return Some(Value::Object(Default::default()));
    };
    let text = std::str::from_utf8(bytes).ok()?;
    if path.extension().is_some_and(|e| e == "toml") {
        return toml::from_str::<toml::Table>(text)
            .ok()
            .and_then(|t| serde_json::to_value(t).ok());
    }
    if text.trim().is_empty() {
        return Some(Value::Object(Default::default()));
    }
    jsonc_parser::cst::CstRootNode::parse(text, &Default::default())
        .ok()?
        .value()?
        .to_serde_value()
}

impl AgentSettings {
    /// The settings files of the agent `profile` describes, read now.
    pub fn before(profile: &Profile) -> Self {
        AgentSettings {
            files: profile
                .settings_files
                .iter()
                .map(|path| Kept {
                    path: path.clone(),
                    before: std::fs::read(path).ok(),
                    link: std::fs::read_link(path).ok(),
                })
                .collect(),
            harmless: profile.harmless_keys,
            done: Mutex::new(false),
        }
    }

    /// The keys of `path` whose value the run changed and that are not harmless; every key,
    /// in a way, when either side cannot be read (`["(the whole file)"]`).
    fn changed_keys(&self, kept: &Kept, after: Option<&[u8]>) -> Vec<String> {
        let (Some(Value::Object(before)), Some(Value::Object(after))) = (
            parse(&kept.path, kept.before.as_deref()),
            parse(&kept.path, after),
        ) else {
            return vec!["(the whole file, which no longer reads as settings)".into()];
        };
        let mut keys: Vec<String> = before
            .keys()
            .chain(after.keys())
            .filter(|k| !self.harmless.contains(&k.as_str()))
            .filter(|k| before.get(*k) != after.get(*k))
            .cloned()
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// Puts back each settings file whose keys that matter the run changed; what was put back
    /// (or could not be), as the report's blocked entries.
    pub fn undo(&self) -> Vec<Violation> {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        if *done {
            return Vec::new();
        }
        *done = true;
        let mut out = Vec::new();
        for kept in &self.files {
            let after = std::fs::read(&kept.path).ok();
            let relinked = std::fs::read_link(&kept.path).ok() != kept.link;
            if after == kept.before && !relinked {
                continue;
            }
            let keys = if relinked {
                vec!["(the whole file, now a symbolic link elsewhere)".into()]
            } else {
                self.changed_keys(kept, after.as_deref())
            };
            if keys.is_empty() {
                continue;
            }
            let rule = format!(
                "the agent's settings that run or allow things ({}) may not change in its run; the next plain start would run what was planted",
                keys.join(", ")
            );
            let put_back = match (&kept.link, &kept.before) {
                (Some(target), _) => relink(&kept.path, target).map(|()| "restored"),
                (None, Some(bytes)) => replace(&kept.path, bytes).map(|()| "restored"),
                (None, None) => std::fs::remove_file(&kept.path).map(|()| "removed"),
            };
            let (action, evidence) = match put_back {
                Ok(action) => (action, None),
                Err(e) => ("not restored", Some(e.to_string())),
            };
            out.push(Violation {
                path: Some(kept.path.clone()),
                destination: None,
                operation: "write",
                rule,
                exact: true,
                action: Some(action),
                evidence,
            });
        }
        out
    }
}

/// `path` replaced by a file holding `bytes`, by renaming over it: whatever the run left
/// there (a link to elsewhere included) is replaced, not written through.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && meta.is_file()
    {
        let _ = tmp.as_file().set_permissions(meta.permissions());
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// `path` made the link to `target` it was, by renaming a new link over whatever is there.
fn relink(path: &Path, target: &Path) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = tempfile::Builder::new().make_in(dir, |p| std::os::unix::fs::symlink(target, p))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(dir: &Path, files: &[&str]) -> Profile {
        let mut p = super::super::profile::profile(super::super::Agent::ClaudeCode, dir, None);
        p.settings_files = files.iter().map(|f| dir.join(f)).collect();
        p
    }

    /// A harmless key's change stays; a hook, a permission or a key cordon does not know
    /// puts the whole file back; a file the run made with hooks in it goes; a file that no
    /// longer parses is put back.
    #[test]
    fn changes_that_run_or_allow_things_are_undone_and_harmless_ones_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (a, b, c, d) = ("a.json", "b.json", "c.json", "d.toml");
        let original = "{\n  // mine\n  \"model\": \"opus\"\n}\n";
        for f in [a, b] {
            std::fs::write(dir.path().join(f), original).expect("write");
        }
        std::fs::write(dir.path().join(d), "model = \"x\"\n").expect("write");
        let guard = AgentSettings::before(&profile(dir.path(), &[a, b, c, d]));
        std::fs::write(dir.path().join(a), "{\"model\": \"sonnet\"}").expect("write");
        std::fs::write(
            dir.path().join(b),
            "{\"model\": \"opus\", \"hooks\": {\"SessionStart\": []}, \"newKey\": 1}",
        )
        .expect("write");
        std::fs::write(dir.path().join(c), "{\"disableAllHooks\": true}").expect("write");
        std::fs::write(dir.path().join(d), "model = \"x\"\n[mcp_servers.x\n").expect("write");

        let undone = guard.undo();
        let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).ok();
        assert_eq!(read(a).as_deref(), Some("{\"model\": \"sonnet\"}"));
        assert_eq!(read(b).as_deref(), Some(original));
        assert_eq!(read(c), None);
        assert_eq!(read(d).as_deref(), Some("model = \"x\"\n"));
        let said: Vec<String> = undone.iter().map(Violation::describe).collect();
        assert_eq!(undone.len(), 3, "{said:?}");
        assert!(said[0].contains("hooks, newKey"), "{said:?}");
        assert!(said[1].contains("disableAllHooks"), "{said:?}");
        assert_eq!(undone[1].action, Some("removed"));
        assert!(said[2].contains("whole file"), "{said:?}");
        assert!(guard.undo().is_empty(), "once");
    }

    /// A settings file the run turned into a link to a file it can write is put back, even
    /// with the same text; a user's own link (a dotfile manager's) is put back as that link.
    #[test]
    fn a_link_put_in_place_of_the_settings_is_undone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let text = "{\"model\": \"opus\"}";
        std::fs::write(dir.path().join("a.json"), text).expect("write");
        std::fs::write(dir.path().join("dotfile.json"), text).expect("write");
        std::os::unix::fs::symlink(dir.path().join("dotfile.json"), dir.path().join("b.json"))
            .expect("link");
        let guard = AgentSettings::before(&profile(dir.path(), &["a.json", "b.json"]));
        std::fs::write(dir.path().join("planted.json"), text).expect("write");
        for f in ["a.json", "b.json"] {
            std::fs::remove_file(dir.path().join(f)).expect("rm");
            std::os::unix::fs::symlink(dir.path().join("planted.json"), dir.path().join(f))
                .expect("link");
        }
        assert_eq!(guard.undo().len(), 2);
        let a = dir.path().join("a.json");
        assert!(std::fs::symlink_metadata(&a).expect("a").is_file());
        assert_eq!(std::fs::read_to_string(&a).expect("read"), text);
        assert_eq!(
            std::fs::read_link(dir.path().join("b.json")).expect("b is a link"),
            dir.path().join("dotfile.json")
        );
    }
}
