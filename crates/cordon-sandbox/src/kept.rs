//! Settings files an agent may rewrite for its own reasons (a model chosen, a theme) but whose
//! other keys (hooks, MCP servers, permissions, environment) would run or loosen the next
//! plain start of the agent on the host, outside cordon.
//!
//! Each file is read before the run. After it, every top-level key that is not named harmless
//! is compared: where one changed, the file is put back as it was (its other changes with it,
//! so that nothing of a tampered file is kept) and that is reported. A key not named harmless
//! counts as one that matters, and so does a file that no longer parses.
//!
//! The files travel in the run's [`crate::RunGuard`], so that its journal record carries them:
//! a killed run's settings are put back by the next cordon, and of runs that overlap, the last
//! to end puts back what the first one found ([`crate::journal`] undoes the latest-started run
//! first).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protect::{NotUndone, UndoReport, Undone};

/// Settings files to keep, and the top-level keys whose change is let stand.
#[derive(Debug, Clone, Default)]
pub struct SettingsFiles {
    pub paths: Vec<PathBuf>,
    pub harmless: Vec<String>,
}

/// One settings file as it was before the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KeptFile {
    path: PathBuf,
    /// `None`: it did not exist.
    before: Option<Vec<u8>>,
    /// Where it led, when it was a symbolic link (a dotfile manager's): a link the run put
    /// there, or moved, would have the next run's writes land in the settings.
    link: Option<PathBuf>,
    harmless: Vec<String>,
}

const WHY: &str = "the agent's settings that run or allow things may not change in its run; the next plain start would run what was planted";

impl SettingsFiles {
    /// Each file as it is now.
    pub fn read(&self) -> Vec<KeptFile> {
        self.paths
            .iter()
            .map(|path| KeptFile {
                path: path.clone(),
                before: crate::beneath::read_regular(path),
                link: std::fs::read_link(path).ok(),
                harmless: self.harmless.clone(),
            })
            .collect()
    }
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
    jsonc_parser::parse_to_serde_value::<Value>(text, &Default::default()).ok()
}

impl KeptFile {
    /// The keys whose value the run changed and that are not harmless; in a way every key,
    /// when either side cannot be read.
    fn changed_keys(&self, after: Option<&[u8]>) -> Vec<String> {
        let (Some(Value::Object(before)), Some(Value::Object(after))) = (
            parse(&self.path, self.before.as_deref()),
            parse(&self.path, after),
        ) else {
            return vec!["(the whole file, which no longer reads as settings)".into()];
        };
        let mut keys: Vec<String> = before
            .keys()
            .chain(after.keys())
            .filter(|k| !self.harmless.contains(k))
            .filter(|k| before.get(*k) != after.get(*k))
            .cloned()
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// Puts the file back if the run changed a key that matters: what was put back, or what
    /// could not be; nothing when nothing that matters changed.
    pub(crate) fn undo(&self) -> Option<Result<Undone, NotUndone>> {
        let after = crate::beneath::read_regular(&self.path);
        let relinked = std::fs::read_link(&self.path).ok() != self.link;
        // There, but not a file to read (a FIFO would hold the agent's next start).
        let odd = after.is_none() && std::fs::metadata(&self.path).is_ok_and(|m| !m.is_file());
        if after == self.before && !relinked && !odd {
            return None;
        }
        let keys = if relinked {
            vec!["(the whole file, now a symbolic link elsewhere)".into()]
        } else if odd {
            vec!["(the whole file, no longer a regular file)".into()]
        } else {
            self.changed_keys(after.as_deref())
        };
        if keys.is_empty() {
            return None;
        }
        let put_back = match (&self.link, &self.before) {
            (Some(target), _) => relink(&self.path, target).map(|()| "restored"),
            (None, Some(bytes)) => replace(&self.path, bytes).map(|()| "restored"),
            (None, None) => std::fs::remove_file(&self.path).map(|()| "removed"),
        };
        let detail = format!("changed: {}", keys.join(", "));
        Some(match put_back {
            Ok(action) => Ok(Undone {
                path: self.path.clone(),
                why: WHY,
                detail: Some(detail),
                action,
            }),
            Err(e) => Err(NotUndone {
                path: self.path.clone(),
                why: WHY,
                error: format!("{detail}; {e}"),
                action: "not restored",
            }),
        })
    }
}

/// Puts back each of `kept` whose keys that matter changed, into `report`.
pub(crate) fn put_back(kept: &[KeptFile], report: &mut UndoReport) {
    for outcome in kept.iter().filter_map(KeptFile::undo) {
        match outcome {
            Ok(u) => report.undone.push(u),
            Err(n) => report.failed.push(n),
        }
    }
}

/// For a run with no [`crate::RunGuard`] (in a container): what [`put_back`] puts back.
pub fn put_back_now(kept: &[KeptFile]) -> UndoReport {
    let mut report = UndoReport::default();
    put_back(kept, &mut report);
    report
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

    fn files(dir: &Path, names: &[&str]) -> SettingsFiles {
        SettingsFiles {
            paths: names.iter().map(|f| dir.join(f)).collect(),
            harmless: vec!["model".into()],
        }
    }

    fn undo_all(kept: &[KeptFile]) -> Vec<Result<Undone, NotUndone>> {
        kept.iter().filter_map(KeptFile::undo).collect()
    }

    /// A harmless key's change stays; a hook, or a key cordon does not know, puts the whole
    /// file back; a file the run made with hooks in it goes; a file that no longer parses is
    /// put back.
    #[test]
    fn changes_that_run_or_allow_things_are_undone_and_harmless_ones_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (a, b, c, d) = ("a.json", "b.json", "c.json", "d.toml");
        let original = "{\n  // mine\n  \"model\": \"opus\"\n}\n";
        for f in [a, b] {
            std::fs::write(dir.path().join(f), original).expect("write");
        }
        std::fs::write(dir.path().join(d), "model = \"x\"\n").expect("write");
        let kept = files(dir.path(), &[a, b, c, d]).read();
        std::fs::write(dir.path().join(a), "{\"model\": \"sonnet\"}").expect("write");
        std::fs::write(
            dir.path().join(b),
            "{\"model\": \"opus\", \"hooks\": {\"SessionStart\": []}, \"newKey\": 1}",
        )
        .expect("write");
        std::fs::write(dir.path().join(c), "{\"disableAllHooks\": true}").expect("write");
        std::fs::write(dir.path().join(d), "model = \"x\"\n[mcp_servers.x\n").expect("write");

        let undone: Vec<Undone> = undo_all(&kept)
            .into_iter()
            .map(|r| r.expect("undone"))
            .collect();
        let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).ok();
        assert_eq!(read(a).as_deref(), Some("{\"model\": \"sonnet\"}"));
        assert_eq!(read(b).as_deref(), Some(original));
        assert_eq!(read(c), None);
        assert_eq!(read(d).as_deref(), Some("model = \"x\"\n"));
        assert_eq!(undone.len(), 3, "{undone:?}");
        assert_eq!(undone[0].detail.as_deref(), Some("changed: hooks, newKey"));
        assert_eq!(
            undone[1].detail.as_deref(),
            Some("changed: disableAllHooks")
        );
        assert_eq!(undone[1].action, "removed");
        assert!(
            undone[2]
                .detail
                .as_deref()
                .is_some_and(|d| d.contains("whole file"))
        );
        assert!(
            undo_all(&kept).is_empty(),
            "put back, nothing is left to undo"
        );
    }

    /// A settings file the run turned into a FIFO is put back, without waiting on it for a
    /// writer that never comes.
    #[test]
    fn a_fifo_put_in_place_of_the_settings_is_undone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("settings.json");
        let text = "{\"model\": \"opus\"}";
        std::fs::write(&path, text).expect("write");
        let kept = files(dir.path(), &["settings.json"]).read();
        std::fs::remove_file(&path).expect("rm");
        crate::beneath::mkfifo(&path).expect("mkfifo");
        assert_eq!(undo_all(&kept).len(), 1);
        assert!(
            std::fs::symlink_metadata(&path)
                .expect("put back")
                .is_file()
        );
        assert_eq!(std::fs::read_to_string(&path).expect("read"), text);
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
        let kept = files(dir.path(), &["a.json", "b.json"]).read();
        std::fs::write(dir.path().join("planted.json"), text).expect("write");
        for f in ["a.json", "b.json"] {
            std::fs::remove_file(dir.path().join(f)).expect("rm");
            std::os::unix::fs::symlink(dir.path().join("planted.json"), dir.path().join(f))
                .expect("link");
        }
        assert_eq!(undo_all(&kept).len(), 2);
        let a = dir.path().join("a.json");
        assert!(std::fs::symlink_metadata(&a).expect("a").is_file());
        assert_eq!(std::fs::read_to_string(&a).expect("read"), text);
        assert_eq!(
            std::fs::read_link(dir.path().join("b.json")).expect("b is a link"),
            dir.path().join("dotfile.json")
        );
    }
}
