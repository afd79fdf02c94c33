//! The workspace file tools, which `cordon mcp` serves: `read_file`, `write_file`, `replace`,
//! `list_directory`, `glob` and `search_file_content`. They run in cordon's own process, not
//! in the sandbox, once the policy has allowed the call and the paths have been checked to lie
//! inside the workspace.
//! Between that check and the use a sandboxed command (which may write the workspace) could
//! swap a path for a symlink, so each file is checked again for where it really is once open,
//! and a symlink is never created through. They keep to the sandbox's walls too: what a
//! command could not read or write here, neither can they. What they return is bounded.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, Write};
use std::path::{Component, Path, PathBuf};

use cordon_policy::Environment;

use crate::plan::LivePatterns;
use crate::plan::paths::LivePattern;
use schemars::JsonSchema;
use serde::Deserialize;

/// Lines `read_file` returns at most in one call.
const MAX_LINES: u64 = 2000;
/// Bytes of one line a tool shows; the rest of a longer line is left out.
const MAX_LINE_BYTES: usize = 2000;
/// Bytes of text one call returns at most.
const MAX_OUTPUT: usize = 256 * 1024;
/// Largest file `replace` edits (it holds the file in memory).
const MAX_EDIT_BYTES: u64 = 16 * 1024 * 1024;
/// Largest file `search_file_content` looks into.
const MAX_SEARCH_FILE: u64 = 4 * 1024 * 1024;
/// Entries `list_directory` and `glob` return at most.
const MAX_ENTRIES: usize = 1000;
/// Matches `search_file_content` returns at most.
const MAX_MATCHES: usize = 500;
/// Entries a walk visits before it stops, so a huge tree cannot hold a thread for long.
const MAX_VISITED: usize = 200_000;
/// How much of a file's start is read to tell text from binary.
const SNIFF: usize = 8192;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFile {
    /// The file to read: absolute, or relative to the workspace.
    pub file_path: String,
    /// The first line to return, counting from 0 (default 0).
    #[serde(default, deserialize_with = "crate::bounds::read_offset")]
    #[schemars(range(min = 0, max = 1_000_000_000))]
    pub offset: Option<u64>,
    /// How many lines to return (default and most: 2000).
    #[serde(default, deserialize_with = "crate::bounds::read_limit")]
    #[schemars(range(min = 0, max = 1_000_000_000))]
    pub limit: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFile {
    /// The file to write, created with its directories if missing, replaced if present.
    pub file_path: String,
    /// The file's whole new content.
    pub content: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Replace {
    /// The file to edit.
    pub file_path: String,
    /// The exact text to replace, whitespace included. Empty creates a new file.
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// How many times `old_string` must occur; every occurrence is replaced (default 1).
    #[serde(default, deserialize_with = "crate::bounds::expected_replacements")]
    #[schemars(range(min = 0, max = 1_000_000_000))]
    pub expected_replacements: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirectory {
    /// The directory to list.
    pub dir_path: String,
    /// Glob patterns of names to leave out, e.g. `*.log`.
    #[serde(default)]
    pub ignore: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Glob {
    /// A glob relative to `dir_path`, e.g. `src/**/*.rs`; `*` stays within a directory.
    pub pattern: String,
    /// Where to look (default: the workspace).
    #[serde(default)]
    pub dir_path: Option<String>,
    /// Match letter case exactly (default false).
    #[serde(default)]
    pub case_sensitive: Option<bool>,
    /// Leave out what .gitignore files ignore (default true).
    #[serde(default)]
    pub respect_git_ignore: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchFileContent {
    /// A regular expression (Rust syntax) to look for in each line.
    pub pattern: String,
    /// Where to look (default: the workspace).
    #[serde(default)]
    pub dir_path: Option<String>,
    /// Only files whose path relative to `dir_path` matches this glob, e.g. `*.rs`.
    #[serde(default)]
    pub include: Option<String>,
}

/// What the sandbox would keep from a command here (its plan), which the file tools keep to as
/// well. The paths are as they were when the server started; the patterns among them are also
/// asked on every call, so that what is made later (a new `.env`) is covered as a run would
/// cover it.
#[derive(Debug, Clone, Default)]
pub struct Walls {
    /// Not to be read (`deny_read`)…
    pub hidden: Vec<PathBuf>,
    /// …except below these (`allow_read`).
    pub reopened: Vec<PathBuf>,
    /// Not to be written: `deny_write`, start-up files, git's config and hooks, editor and
    /// agent settings, cordon's own settings.
    pub read_only: Vec<PathBuf>,
    pub live: LivePatterns,
}

impl Walls {
    fn resolved(mut self) -> Self {
        for list in [&mut self.hidden, &mut self.reopened, &mut self.read_only] {
            for p in list.iter_mut() {
                if let Ok(real) = std::fs::canonicalize(&*p) {
                    *p = real;
                }
            }
        }
        self
    }

    /// What in `paths` or `patterns` holds `real`, if anything, as the person wrote it.
    fn holder(real: &Path, paths: &[PathBuf], patterns: &[LivePattern]) -> Option<String> {
        paths
            .iter()
            .find(|p| real.starts_with(p))
            .map(|p| p.display().to_string())
            .or_else(|| {
                patterns
                    .iter()
                    .find(|p| p.covers(real))
                    .map(|p| format!("`{}`", p.shown()))
            })
    }

    /// What keeps `real` from being read, as the person wrote it.
    pub(crate) fn unreadable(&self, real: &Path) -> Option<String> {
        if Self::holder(real, &self.reopened, &self.live.reopened).is_some() {
            return None;
        }
        Self::holder(real, &self.hidden, &self.live.hidden)
    }

    /// What keeps `real` from being written, as the person wrote it.
    pub(crate) fn unwritable(&self, real: &Path) -> Option<String> {
        Self::holder(real, &self.read_only, &self.live.read_only)
    }

    /// Why `real` is out of bounds for reading (or, with `write`, writing), if it is.
    fn refusal(&self, real: &Path, shown: &str, write: bool) -> Option<String> {
        if let Some(h) = self.unreadable(real) {
            return Some(format!(
                "`{shown}` is in {h}, which the sandbox keeps from being read; refused"
            ));
        }
        match self.unwritable(real) {
            Some(r) if write => Some(format!(
                "`{shown}` is in {r}, which the sandbox keeps read-only; refused"
            )),
            _ => None,
        }
    }
}

/// The directories the file tools may touch.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// Relative paths are taken from here.
    pub cwd: PathBuf,
    /// The working directory and every workspace, symlinks resolved.
    roots: Vec<PathBuf>,
    walls: Walls,
}

impl Workspace {
    pub fn new(env: &Environment, walls: Walls) -> Self {
        Workspace {
            cwd: env.cwd.clone(),
            roots: std::iter::once(&env.cwd)
                .chain(&env.workspaces)
                .filter_map(|d| std::fs::canonicalize(d).ok())
                .collect(),
            walls: walls.resolved(),
        }
    }

    pub fn resolve(&self, path: &str) -> PathBuf {
        self.cwd.join(path)
    }

    fn inside(&self, real: &Path) -> bool {
        self.roots.iter().any(|r| real.starts_with(r))
    }

    /// Why a file at `real` may not be touched, if it may not: the sandbox's walls, and for a
    /// write also the protected paths (start-up files, editor and agent settings, git metadata
    /// at any depth), new ones as well as existing ones, as the sandbox keeps them.
    fn refusal(&self, real: &Path, shown: &str, write: bool) -> Option<String> {
        if let Some(why) = self.walls.refusal(real, shown, write) {
            return Some(why);
        }
        let protected = self
            .roots
            .iter()
            .filter_map(|r| real.strip_prefix(r).ok())
            .any(cordon_sandbox::is_protected);
        (write && protected).then(|| {
            format!(
                "`{shown}` is a protected file (it runs code or changes an agent's permissions the next time something starts), which the sandbox keeps read-only; refused"
            )
        })
    }

    /// Where `path` really is, refused unless inside the workspace.
    fn real_dir(&self, path: &str) -> Result<PathBuf, String> {
        let real = std::fs::canonicalize(self.resolve(path))
            .map_err(|e| format!("cannot open `{path}`: {e}"))?;
        if !self.inside(&real) {
            return Err(format!(
                "`{path}` leads outside the workspace (to {}); refused",
                real.display()
            ));
        }
        if let Some(why) = self.walls.refusal(&real, path, false) {
            return Err(why);
        }
        if !real.is_dir() {
            return Err(format!("`{path}` is not a directory"));
        }
        Ok(real)
    }

    /// The directory a command runs in (`dir_path`, or the working directory), checked and
    /// held open: the run starts in the directory that was checked, whatever its name leads to
    /// by then (a command running at the same time may swap it for a link).
    pub fn run_dir(&self, path: Option<&str>) -> Result<crate::exec::WorkDir, String> {
        let shown = path.unwrap_or(".");
        let real = self.real_dir(shown)?;
        let root = self
            .roots
            .iter()
            .find(|r| real.starts_with(r))
            .ok_or_else(|| format!("`{shown}` leads outside the workspace; refused"))?;
        let rel = real.strip_prefix(root).unwrap_or(Path::new(""));
        let dir = crate::exec::WorkDir::open(root)
            .map_err(|e| format!("cannot open `{}`: {e}", root.display()))?
            .beneath(rel)?;
        // Opened beneath the workspace, so it is inside; but a swap since `real_dir` may have
        // put another directory of the workspace there, which the walls must also allow.
        let now = dir
            .real_path()
            .map_err(|e| format!("cannot tell where `{shown}` is: {e}"))?;
        match self.walls.refusal(&now, shown, false) {
            Some(why) => Err(why),
            None => Ok(dir),
        }
    }

    /// Checks where an open file really is, whatever its path was swapped for since the check.
    fn check_opened(&self, file: &File, shown: &str, write: bool) -> Result<(), String> {
        let real = opened_path(file).map_err(|e| format!("cannot tell where `{shown}` is: {e}"))?;
        if !self.inside(&real) {
            return Err(format!(
                "`{shown}` leads outside the workspace (to {}); refused",
                real.display()
            ));
        }
        match self.refusal(&real, shown, write) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// Opens `real` (a path with its links resolved, inside the workspace) from the workspace
    /// root that holds it, one name at a time without following a link: a command that swaps
    /// a directory on the way for a link meanwhile makes the open fail, never leave.
    fn open_beneath(
        &self,
        real: &Path,
        shown: &str,
        how: cordon_sandbox::beneath::FileOpen,
    ) -> Result<File, String> {
        let what = if how.write { " for writing" } else { "" };
        let (root, rel) = self
            .root_of(real)
            .map_err(|e| format!("cannot open `{shown}`{what}: {e}"))?;
        use std::os::fd::AsFd;
        cordon_sandbox::beneath::open_file_beneath(root.as_fd(), rel, how)
            .map(File::from)
            .map_err(|e| format!("cannot open `{shown}`{what}: {e}"))
    }

    /// The entries of `real` (a directory with its links resolved, inside the workspace),
    /// reached from the workspace root that holds it without following a link.
    fn list_beneath(&self, real: &Path) -> std::io::Result<Vec<cordon_sandbox::beneath::Entry>> {
        let (root, rel) = self.root_of(real)?;
        use std::os::fd::AsFd;
        cordon_sandbox::beneath::list_beneath(root.as_fd(), rel)
    }

    /// The workspace root that holds `real`, opened, and `real` relative to it.
    fn root_of<'a>(&self, real: &'a Path) -> std::io::Result<(File, &'a Path)> {
        let (root, rel) = self
            .roots
            .iter()
            .find_map(|r| real.strip_prefix(r).ok().map(|rel| (r, rel)))
            .ok_or_else(|| std::io::Error::other("it lies outside the workspace"))?;
        Ok((File::open(root)?, rel))
    }

    /// Opens a regular file for reading (a FIFO would block forever; it is refused instead).
    fn open_read(&self, path: &Path, shown: &str) -> Result<File, String> {
        let real =
            std::fs::canonicalize(path).map_err(|e| format!("cannot open `{shown}`: {e}"))?;
        let file = self.open_beneath(
            &real,
            shown,
            cordon_sandbox::beneath::FileOpen {
                read: true,
                ..Default::default()
            },
        )?;
        self.check_opened(&file, shown, false)?;
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
        if meta.is_dir() {
            return Err(format!(
                "`{shown}` is a directory; use list_directory or glob"
            ));
        }
        if !meta.is_file() {
            return Err(format!("`{shown}` is not a regular file"));
        }
        Ok(file)
    }

    /// Refuses a write before anything is created (a file or its directories): where `path`
    /// would land, from its nearest existing ancestor, must be inside and writable.
    fn check_write(&self, path: &Path, shown: &str) -> Result<PathBuf, String> {
        let mut existing = path.to_path_buf();
        let mut rest = Vec::new();
        let real = loop {
            if let Ok(real) = std::fs::canonicalize(&existing) {
                break rest.iter().rev().fold(real, |p: PathBuf, n| p.join(n));
            }
            match (existing.file_name(), existing.parent()) {
                (Some(name), Some(parent)) => {
                    rest.push(name.to_os_string());
                    existing = parent.to_path_buf();
                }
                _ => return Err(format!("cannot resolve `{shown}`")),
            }
        };
        if !self.inside(&real) {
            return Err(format!(
                "`{shown}` leads outside the workspace (to {}); refused",
                real.display()
            ));
        }
        match self.refusal(&real, shown, true) {
            Some(why) => Err(why),
            None => Ok(real),
        }
    }

    /// Opens a file for writing (`read`: an existing one, to edit), creating it and with
    /// `make_dirs` its directories if missing. A link to an existing file inside the workspace
    /// is written through, as an editor would (`canonicalize` resolved it); a dangling link
    /// is not, so it cannot create a file where it points.
    fn open_write(
        &self,
        path: &Path,
        shown: &str,
        read: bool,
        make_dirs: bool,
    ) -> Result<File, String> {
        let real = self.check_write(path, shown)?;
        let how = cordon_sandbox::beneath::FileOpen {
            read,
            write: true,
            make_dirs,
        };
        let file = self.open_beneath(&real, shown, how).map_err(|e| {
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink()) {
                format!("`{shown}` is a symlink to nothing; cordon does not write through it")
            } else {
                e
            }
        })?;
        self.check_opened(&file, shown, true)?;
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
        if !meta.is_file() {
            return Err(format!("`{shown}` is not a regular file"));
        }
        Ok(file)
    }
}

#[cfg(target_os = "linux")]
fn opened_path(file: &File) -> std::io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// Without /proc there is no asking an open file where it is: it must still be where its path
/// says (checked again, so only a swap between these two moments goes unseen).
#[cfg(not(target_os = "linux"))]
fn opened_path(_file: &File) -> std::io::Result<PathBuf> {
    Err(std::io::Error::other(
        "cordon's file tools need /proc to check open files on this system",
    ))
}

/// Reads one line into `buf` without its newline, keeping at most `MAX_LINE_BYTES` of it.
/// `None` at the end; `Some(true)` when the line was cut.
fn next_line(r: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    buf.clear();
    let n = r
        .by_ref()
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        return Ok(Some(false));
    }
    if buf.len() <= MAX_LINE_BYTES {
        return Ok(Some(false));
    }
    buf.truncate(MAX_LINE_BYTES);
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                break;
            }
            None => {
                let len = chunk.len();
                r.consume(len);
            }
        }
    }
    Ok(Some(true))
}

fn looks_binary(r: &mut BufReader<File>) -> std::io::Result<bool> {
    let head = r.fill_buf()?;
    Ok(head[..head.len().min(SNIFF)].contains(&0))
}

pub fn read_file(ws: &Workspace, a: &ReadFile) -> Result<String, String> {
    let path = ws.resolve(&a.file_path);
    let file = ws.open_read(&path, &a.file_path)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut r = BufReader::with_capacity(64 * 1024, file);
    let io = |e: std::io::Error| format!("cannot read `{}`: {e}", a.file_path);
    if looks_binary(&mut r).map_err(io)? {
        return Ok(format!(
            "`{}` is a binary file of {size} bytes; not shown",
            a.file_path
        ));
    }
    let offset = a.offset.unwrap_or(0);
    let limit = a.limit.unwrap_or(MAX_LINES).clamp(1, MAX_LINES);
    let mut line = Vec::new();
    let mut n = 0u64;
    while n < offset {
        if next_line(&mut r, &mut line).map_err(io)?.is_none() {
            return Err(format!(
                "`{}` has {n} lines; offset {offset} is past its end",
                a.file_path
            ));
        }
        n += 1;
    }
    let mut out = String::new();
    let mut cut_lines = 0;
    let mut more = false;
    while let Some(cut) = next_line(&mut r, &mut line).map_err(io)? {
        if n - offset >= limit || out.len() + line.len() > MAX_OUTPUT {
            more = true;
            break;
        }
        out.push_str(&String::from_utf8_lossy(&line));
        if cut {
            cut_lines += 1;
            out.push_str(" […]");
        }
        out.push('\n');
        n += 1;
    }
    let mut notes = Vec::new();
    if more {
        notes.push(format!(
            "[lines {}-{n} shown; the file goes on: call again with offset={n}]",
            offset + 1
        ));
    }
    if cut_lines > 0 {
        notes.push(format!(
            "[{cut_lines} line(s) longer than {MAX_LINE_BYTES} bytes were cut, marked […]]"
        ));
    }
    if !notes.is_empty() {
        out.push_str(&notes.join("\n"));
        out.push('\n');
    }
    Ok(out)
}

pub fn write_file(ws: &Workspace, a: &WriteFile) -> Result<String, String> {
    let path = ws.resolve(&a.file_path);
    let existed = path.exists();
    let mut file = ws.open_write(&path, &a.file_path, false, true)?;
    let io = |e: std::io::Error| format!("cannot write `{}`: {e}", a.file_path);
    file.set_len(0).map_err(io)?;
    file.write_all(a.content.as_bytes()).map_err(io)?;
    Ok(format!(
        "{} `{}` ({} bytes)",
        if existed { "overwrote" } else { "created" },
        a.file_path,
        a.content.len()
    ))
}

pub fn replace(ws: &Workspace, a: &Replace) -> Result<String, String> {
    let path = ws.resolve(&a.file_path);
    if a.old_string.is_empty() {
        if path.symlink_metadata().is_ok() {
            return Err(format!(
                "`{}` exists; an empty old_string only creates a new file",
                a.file_path
            ));
        }
        return write_file(
            ws,
            &WriteFile {
                file_path: a.file_path.clone(),
                content: a.new_string.clone(),
            },
        )
        .map(|_| format!("created `{}`", a.file_path));
    }
    if path.symlink_metadata().is_err() {
        return Err(format!(
            "`{}` does not exist; to create it, give an empty old_string",
            a.file_path
        ));
    }
    let mut file = ws.open_write(&path, &a.file_path, true, false)?;
    let io = |e: std::io::Error| format!("cannot edit `{}`: {e}", a.file_path);
    let size = file.metadata().map_err(io)?.len();
    if size > MAX_EDIT_BYTES {
        return Err(format!(
            "`{}` is {size} bytes; replace edits files up to {MAX_EDIT_BYTES}",
            a.file_path
        ));
    }
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| format!("cannot edit `{}` as text: {e}", a.file_path))?;
    let expected = a.expected_replacements.unwrap_or(1);
    let found = text.matches(&a.old_string).count() as u64;
    if found == 0 {
        return Err(format!(
            "old_string is not in `{}`; nothing changed (it must match exactly, whitespace and indentation included: read the file again)",
            a.file_path
        ));
    }
    if found != expected {
        return Err(format!(
            "old_string occurs {found} times in `{}`, not {expected}; nothing changed (give more surrounding text, or set expected_replacements)",
            a.file_path
        ));
    }
    let edited = text.replace(&a.old_string, &a.new_string);
    file.rewind().map_err(io)?;
    file.set_len(0).map_err(io)?;
    file.write_all(edited.as_bytes()).map_err(io)?;
    Ok(format!(
        "replaced {found} occurrence(s) in `{}`",
        a.file_path
    ))
}

pub fn list_directory(ws: &Workspace, a: &ListDirectory) -> Result<String, String> {
    let dir = ws.real_dir(&a.dir_path)?;
    let mut ignore = globset::GlobSetBuilder::new();
    for p in a.ignore.iter().flatten() {
        ignore.add(globset::Glob::new(p).map_err(|e| format!("ignore pattern `{p}`: {e}"))?);
    }
    let ignore = ignore.build().map_err(|e| e.to_string())?;
    let mut entries = Vec::new();
    let read = ws
        .list_beneath(&dir)
        .map_err(|e| format!("cannot list `{}`: {e}", a.dir_path))?;
    let mut total = 0usize;
    for entry in read.into_iter().take(MAX_VISITED) {
        let name = entry.name.to_string_lossy().into_owned();
        if ignore.is_match(&name) {
            continue;
        }
        total += 1;
        // The entry itself, not what a symlink points to.
        let is_dir = entry.kind == cordon_sandbox::beneath::Kind::Dir;
        entries.push((!is_dir, name));
    }
    entries.sort();
    let mut out = format!("{}:\n", dir.display());
    for (not_dir, name) in entries.iter().take(MAX_ENTRIES) {
        if *not_dir {
            out.push_str(&format!("{name}\n"));
        } else {
            out.push_str(&format!("[DIR] {name}\n"));
        }
    }
    if total > MAX_ENTRIES {
        out.push_str(&format!(
            "[{} more entries not shown; narrow the listing with ignore or glob]\n",
            total - MAX_ENTRIES
        ));
    }
    if total == 0 {
        out.push_str("(empty)\n");
    }
    Ok(out)
}

/// A pattern the tools match against paths below a directory: never a way out of it.
fn relative_pattern(what: &str, p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err(format!("{what} cannot be empty"));
    }
    if Path::new(p).is_absolute() || Path::new(p).components().any(|c| c == Component::ParentDir) {
        return Err(format!(
            "{what} `{p}` must be relative and without `..`; give dir_path for where to look"
        ));
    }
    Ok(())
}

/// Walks `root` as a developer's tools would (.gitignore respected unless asked otherwise,
/// .git itself skipped), never following symlinks; calls `f` with each entry and its path
/// relative to `root` until it says stop. Returns whether the walk was cut short.
fn walk(
    ws: &Workspace,
    root: &Path,
    respect_git_ignore: bool,
    mut f: impl FnMut(&ignore::DirEntry, &Path) -> bool,
) -> bool {
    let walls = ws.walls.clone();
    // The walker opens directories by path, so a directory swapped for a link meanwhile could
    // show it names from outside: each entry is checked to be what the workspace holds at its
    // name, reached without following links.
    let Ok((anchor, base)) = ws.root_of(root) else {
        return false;
    };
    let really_here = |rel: &Path, ino: Option<u64>| {
        use std::os::fd::AsFd;
        ino.is_some_and(|ino| {
            cordon_sandbox::beneath::ino_beneath(anchor.as_fd(), &base.join(rel))
                .is_ok_and(|found| found == ino)
        })
    };
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .follow_links(false)
        .git_ignore(respect_git_ignore)
        .git_exclude(respect_git_ignore)
        .git_global(false)
        .ignore(respect_git_ignore)
        .parents(respect_git_ignore)
        .require_git(false)
        // What a command could not read is not walked either.
        .filter_entry(move |e| e.file_name() != ".git" && walls.unreadable(e.path()).is_none())
        .build();
    for (visited, entry) in walker.enumerate() {
        if visited >= MAX_VISITED {
            return true;
        }
        let Ok(entry) = entry else { continue };
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        if rel.as_os_str().is_empty() || !really_here(rel, entry.ino()) {
            continue;
        }
        if !f(&entry, rel) {
            return true;
        }
    }
    false
}

pub fn glob(ws: &Workspace, a: &Glob) -> Result<String, String> {
    relative_pattern("pattern", &a.pattern)?;
    let shown = a.dir_path.as_deref().unwrap_or(".");
    let root = ws.real_dir(shown)?;
    let matcher = globset::GlobBuilder::new(&a.pattern)
        .case_insensitive(!a.case_sensitive.unwrap_or(false))
        .literal_separator(true)
        .build()
        .map_err(|e| format!("pattern `{}`: {e}", a.pattern))?
        .compile_matcher();
    let mut found = Vec::new();
    let cut = walk(ws, &root, a.respect_git_ignore.unwrap_or(true), |_, rel| {
        if matcher.is_match(rel) {
            found.push(root.join(rel));
        }
        found.len() <= MAX_ENTRIES
    });
    found.sort();
    let mut out = format!(
        "{} file(s) matching `{}` in {}:\n",
        found.len().min(MAX_ENTRIES),
        a.pattern,
        root.display()
    );
    for p in found.iter().take(MAX_ENTRIES) {
        out.push_str(&format!("{}\n", p.display()));
    }
    if cut {
        out.push_str(
            "[the search stopped early: too many files; narrow the pattern or dir_path]\n",
        );
    }
    Ok(out)
}

pub fn search_file_content(ws: &Workspace, a: &SearchFileContent) -> Result<String, String> {
    let shown = a.dir_path.as_deref().unwrap_or(".");
    let root = ws.real_dir(shown)?;
    let re = regex::RegexBuilder::new(&a.pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("pattern is not a valid regular expression: {e}"))?;
    let include = match &a.include {
        Some(p) => {
            relative_pattern("include", p)?;
            Some(
                globset::Glob::new(p)
                    .map_err(|e| format!("include `{p}`: {e}"))?
                    .compile_matcher(),
            )
        }
        None => None,
    };
    let mut out = String::new();
    let mut matches = 0usize;
    let mut files = 0usize;
    let mut line = Vec::new();
    let cut = walk(ws, &root, true, |entry, rel| {
        // Symlinks are not regular files here, so a link out of the workspace is not read.
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return true;
        }
        if include.as_ref().is_some_and(|m| !m.is_match(rel)) {
            return true;
        }
        let shown = rel.display().to_string();
        let Ok(file) = ws.open_read(entry.path(), &shown) else {
            return true;
        };
        if file.metadata().map(|m| m.len()).unwrap_or(0) > MAX_SEARCH_FILE {
            return true;
        }
        let mut r = BufReader::new(file);
        if looks_binary(&mut r).unwrap_or(true) {
            return true;
        }
        let mut header = false;
        let mut n = 0u64;
        while let Ok(Some(_)) = next_line(&mut r, &mut line) {
            n += 1;
            let text = String::from_utf8_lossy(&line);
            if !re.is_match(&text) {
                continue;
            }
            if !header {
                files += 1;
                out.push_str(&format!("File: {shown}\n"));
                header = true;
            }
            out.push_str(&format!("L{n}: {text}\n"));
            matches += 1;
            if matches >= MAX_MATCHES || out.len() > MAX_OUTPUT {
                return false;
            }
        }
        true
    });
    let mut head = format!(
        "{matches} match(es) for /{}/ in {files} file(s) under {}",
        a.pattern,
        root.display()
    );
    if let Some(i) = &a.include {
        head.push_str(&format!(" (files matching `{i}`)"));
    }
    head.push_str(":\n");
    if cut {
        out.push_str("[the search stopped early: too many matches or files; narrow the pattern, include or dir_path]\n");
    }
    Ok(head + &out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::paths::Flag;

    fn ws(dir: &Path) -> Workspace {
        Workspace::new(
            &Environment {
                cwd: dir.to_path_buf(),
                workspaces: vec![],
            },
            Walls::default(),
        )
    }

    #[test]
    fn reads_lines_and_says_where_the_rest_is() -> Result<(), String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let text: String = (1..=5).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.path().join("f.txt"), text).map_err(|e| e.to_string())?;
        let out = read_file(
            &ws(dir.path()),
            &ReadFile {
                file_path: "f.txt".into(),
                offset: Some(1),
                limit: Some(2),
            },
        )?;
        assert!(out.starts_with("line 2\nline 3\n"), "{out}");
        assert!(out.contains("offset=3"), "{out}");
        Ok(())
    }

    #[test]
    fn a_symlink_out_of_the_workspace_is_neither_read_nor_written() -> Result<(), String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let outside = tempfile::tempdir().map_err(|e| e.to_string())?;
        std::fs::write(outside.path().join("secret"), "s").map_err(|e| e.to_string())?;
        let ws = ws(dir.path());
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("link"))
            .map_err(|e| e.to_string())?;
        let read = read_file(
            &ws,
            &ReadFile {
                file_path: "link".into(),
                offset: None,
                limit: None,
            },
        );
        assert!(read.is_err_and(|e| e.contains("outside the workspace")));
        // A dangling link must not create its target.
        std::os::unix::fs::symlink(outside.path().join("new"), dir.path().join("dangling"))
            .map_err(|e| e.to_string())?;
        let wrote = write_file(
            &ws,
            &WriteFile {
                file_path: "dangling".into(),
                content: "x".into(),
            },
        );
        assert!(wrote.is_err(), "{wrote:?}");
        assert!(!outside.path().join("new").exists());
        Ok(())
    }

    #[test]
    fn replace_wants_the_expected_count() -> Result<(), String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        std::fs::write(dir.path().join("f"), "a b a").map_err(|e| e.to_string())?;
        let ws = ws(dir.path());
        let mut r = Replace {
            file_path: "f".into(),
            old_string: "a".into(),
            new_string: "c".into(),
            expected_replacements: None,
        };
        assert!(replace(&ws, &r).is_err_and(|e| e.contains("occurs 2 times")));
        r.expected_replacements = Some(2);
        replace(&ws, &r)?;
        assert_eq!(
            std::fs::read_to_string(dir.path().join("f")).map_err(|e| e.to_string())?,
            "c b c"
        );
        Ok(())
    }

    /// A `deny_read` pattern covers a file made after the server started, as the next run's
    /// sandbox would; a name that only looks alike stays readable.
    #[test]
    fn patterns_cover_files_made_after_the_start() -> Result<(), String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let d = dir.path();
        let pattern = |p: &str, flag| {
            LivePattern::new(Path::new(p), d, flag)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("{p} has no wildcard"))
        };
        let ws = Workspace::new(
            &Environment {
                cwd: d.to_path_buf(),
                workspaces: vec![],
            },
            Walls {
                live: LivePatterns {
                    hidden: vec![pattern("**/.env", Flag::DenyRead)?],
                    reopened: vec![],
                    read_only: vec![pattern("*.lock", Flag::DenyWrite)?],
                },
                ..Walls::default()
            },
        );
        std::fs::create_dir_all(d.join("app")).map_err(|e| e.to_string())?;
        std::fs::write(d.join("app/.env"), "TOKEN=1").map_err(|e| e.to_string())?;
        std::fs::write(d.join("app/.env.example"), "TOKEN=").map_err(|e| e.to_string())?;
        let read = |p: &str| {
            read_file(
                &ws,
                &ReadFile {
                    file_path: p.into(),
                    offset: None,
                    limit: None,
                },
            )
        };
        let denied = read("app/.env");
        assert!(
            denied.as_ref().is_err_and(|e| e.contains("`**/.env`")),
            "{denied:?}"
        );
        assert_eq!(read("app/.env.example")?, "TOKEN=\n");
        let wrote = write_file(
            &ws,
            &WriteFile {
                file_path: "Cargo.lock".into(),
                content: "x".into(),
            },
        );
        assert!(wrote.is_err_and(|e| e.contains("read-only")));
        assert!(!d.join("Cargo.lock").exists());
        Ok(())
    }

    #[test]
    fn the_sandbox_walls_hold_for_the_file_tools() -> Result<(), String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let d = dir.path();
        for sub in ["secrets", "secrets/open", "locked"] {
            std::fs::create_dir_all(d.join(sub)).map_err(|e| e.to_string())?;
        }
        std::fs::write(d.join("secrets/key"), "k").map_err(|e| e.to_string())?;
        std::fs::write(d.join("secrets/open/ok"), "ok").map_err(|e| e.to_string())?;
        let ws = Workspace::new(
            &Environment {
                cwd: d.to_path_buf(),
                workspaces: vec![],
            },
            Walls {
                hidden: vec![d.join("secrets")],
                reopened: vec![d.join("secrets/open")],
                read_only: vec![d.join("locked")],
                live: Default::default(),
            },
        );
        let read = |p: &str| {
            read_file(
                &ws,
                &ReadFile {
                    file_path: p.into(),
                    offset: None,
                    limit: None,
                },
            )
        };
        let denied = read("secrets/key");
        assert!(
            denied
                .as_ref()
                .is_err_and(|e| e.contains("keeps from being read")),
            "{denied:?}"
        );
        assert_eq!(read("secrets/open/ok")?, "ok\n");
        let wrote = write_file(
            &ws,
            &WriteFile {
                file_path: "locked/new/file".into(),
                content: "x".into(),
            },
        );
        assert!(wrote.is_err_and(|e| e.contains("read-only")));
        assert!(!d.join("locked/new").exists(), "nothing is created");
        let found = glob(
            &ws,
            &Glob {
                pattern: "**/*".into(),
                dir_path: None,
                case_sensitive: None,
                respect_git_ignore: None,
            },
        )?;
        assert!(
            !found.contains("key") && found.contains("locked"),
            "{found}"
        );
        Ok(())
    }

    #[test]
    fn patterns_cannot_climb_out() {
        assert!(relative_pattern("pattern", "../*").is_err());
        assert!(relative_pattern("pattern", "/etc/*").is_err());
        assert!(relative_pattern("pattern", "src/**/*.rs").is_ok());
    }
}
