//! What the sandbox blocked, for an agent to tell its model why a command failed.
//!
//! Some of it cordon knows exactly (a protected file it removed or put back). The rest it
//! infers from the command's error output: a line saying "Read-only file system" or
//! "Permission denied" about a path the sandbox keeps from the command is most likely the
//! sandbox's doing, and the spec says which rule did it. Inferred entries say so.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::SandboxSpec;

/// One thing the sandbox blocked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The path involved, when there is one.
    pub path: Option<PathBuf>,
    /// The network destination involved (`host:port`), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// What was tried: `write`, `read`, `create`, `system call`.
    pub operation: &'static str,
    /// The rule that stopped it, in words.
    pub rule: String,
    /// Seen by cordon itself (true) or inferred from the command's output (false).
    pub exact: bool,
    /// What cordon did about it after the run: `removed`, `restored`; or what it could not
    /// do: `not removed`, `not restored` (the host keeps the change; `evidence` says why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<&'static str>,
    /// The line of output an inferred entry comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

/// Most inferred entries kept per run; a command that fails the same way in a loop should
/// not flood the report.
const MAX_INFERRED: usize = 20;
/// Longest line looked at; the rest of a longer line is not.
const MAX_LINE: usize = 4096;

/// Reads the command's error output as it passes and infers violations from it.
#[derive(Debug)]
pub struct ErrorScanner<'a> {
    spec: &'a SandboxSpec,
    line: Vec<u8>,
    found: Vec<Violation>,
    /// A path named in a quote a few lines before (and how many lines ago): cargo and others
    /// name the path on one line and the refusal below it, after `Caused by:`.
    earlier: Option<(PathBuf, usize)>,
}

/// How many lines after a path its refusal may come.
const EARLIER_LINES: usize = 4;

impl From<&crate::Undone> for Violation {
    /// A protected path the run created, which cordon removed after it; or a file it
    /// changed, which cordon put back.
    fn from(u: &crate::Undone) -> Self {
        Violation {
            path: Some(u.path.clone()),
            destination: None,
            operation: if u.action == "restored" {
                "write"
            } else {
                "create"
            },
            rule: u.why.to_string(),
            exact: true,
            action: Some(u.action),
            evidence: u.detail.clone(),
        }
    }
}

impl From<&crate::NotUndone> for Violation {
    /// Something the run planted that cordon could not remove: it is still on the host.
    fn from(u: &crate::NotUndone) -> Self {
        Violation {
            path: Some(u.path.clone()),
            destination: None,
            operation: if u.action == "not restored" {
                "write"
            } else {
                "create"
            },
            rule: u.why.to_string(),
            exact: true,
            action: Some(u.action),
            evidence: Some(u.error.clone()),
        }
    }
}

impl Violation {
    /// A read-only path the run changed that cordon could not put back: the host keeps the
    /// change.
    pub fn not_restored(path: &Path, error: &str) -> Self {
        Violation {
            action: Some("not restored"),
            evidence: Some(error.to_string()),
            ..Violation::restored(path)
        }
    }

    /// Whether cordon failed to undo this: the run must end in failure.
    pub fn undo_failed(&self) -> bool {
        matches!(self.action, Some("not removed" | "not restored"))
    }

    /// A read-only path the run changed, which cordon put back after it.
    pub fn restored(path: &Path) -> Self {
        Violation {
            path: Some(path.to_path_buf()),
            destination: None,
            operation: "write",
            rule: "read-only inside a writable place".to_string(),
            exact: true,
            action: Some("restored"),
            evidence: None,
        }
    }

    /// One line for people: what, where, how cordon knows, and the rule.
    pub fn describe(&self) -> String {
        let path = match (&self.path, &self.destination) {
            (Some(p), _) => format!(" {}", p.display()),
            (None, Some(d)) => format!(" {d}"),
            (None, None) => String::new(),
        };
        let how = match (self.exact, self.action) {
            (true, Some(action)) => format!("exact, {action}"),
            (true, None) => "exact".to_string(),
            (false, _) => "inferred from the command's errors".to_string(),
        };
        match (&self.evidence, self.exact) {
            (Some(what), true) => {
                format!("{}{path} ({how}): {}: {what}", self.operation, self.rule)
            }
            _ => format!("{}{path} ({how}): {}", self.operation, self.rule),
        }
    }
}

impl<'a> ErrorScanner<'a> {
    pub fn new(spec: &'a SandboxSpec) -> Self {
        ErrorScanner {
            spec,
            line: Vec::new(),
            found: Vec::new(),
            earlier: None,
        }
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                self.end_line();
            } else if self.line.len() < MAX_LINE {
                self.line.push(b);
            }
        }
    }

    pub fn finish(mut self) -> Vec<Violation> {
        self.end_line();
        self.found
    }

    fn end_line(&mut self) {
        if self.found.len() < MAX_INFERRED {
            let line = String::from_utf8_lossy(&self.line);
            let earlier = self.earlier.as_ref().map(|(p, _)| p.as_path());
            let found = infer(&line, self.spec, earlier);
            self.earlier = match (quoted_path(&line), self.earlier.take()) {
                (Some(p), _) => Some((p, 0)),
                (None, Some((p, n))) if n + 1 < EARLIER_LINES => Some((p, n + 1)),
                _ => None,
            };
            if let Some(v) = found {
                match self
                    .found
                    .iter_mut()
                    .find(|f| f.path == v.path && f.operation == v.operation)
                {
                    // npm says EAI_AGAIN before it names the host: keep the line that does.
                    Some(f) if f.destination.is_none() && v.destination.is_some() => *f = v,
                    Some(_) => {}
                    None => self.found.push(v),
                }
            }
        }
        self.line.clear();
    }
}

/// What tools print when a name cannot be looked up or no route leads out: with no network
/// at all (curl, pip, npm, cargo, git, ssh, ping each say one of these).
const NO_NETWORK: [&str; 9] = [
    "could not resolve host",
    "couldn't resolve host",
    "temporary failure in name resolution",
    "name or service not known",
    "eai_again",
    "enotfound",
    "failed to lookup address",
    "network is unreachable",
    "no address associated with hostname",
];

/// The host a name-lookup error names, where it says: `resolve host: H`, `getaddrinfo
/// EAI_AGAIN H`, `ENOTFOUND H`, `host='H'`.
fn host_in(line: &str) -> Option<String> {
    let lower = line.to_ascii_lowercase();
    let after = [
        "resolve host: ",
        "eai_again ",
        "enotfound ",
        "host='",
        "resolve '",
    ]
    .iter()
    .find_map(|m| lower.find(m).map(|i| &line[i + m.len()..]))?;
    let host: String = after
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'))
        .collect();
    let host = host.trim_end_matches([':', '.']);
    (host.contains('.') || host == "localhost").then(|| host.to_string())
}

/// What a line of error output says the sandbox blocked, if anything; `earlier` is the path
/// a line a little before named, for a refusal that names none.
fn infer(line: &str, spec: &SandboxSpec, earlier: Option<&Path>) -> Option<Violation> {
    let lower = line.to_ascii_lowercase();
    if spec.network == crate::NetworkMode::None && NO_NETWORK.iter().any(|p| lower.contains(p)) {
        return Some(Violation {
            path: None,
            destination: host_in(line),
            operation: "connect",
            rule: "this run has no network; allow a host with --allow-domain HOST \
                   (or [network] allow_domains in cordon.toml)"
                .to_string(),
            exact: false,
            action: None,
            evidence: Some(line.trim().chars().take(300).collect()),
        });
    }
    let says = |i: usize| lower.contains(REFUSALS[i]) || lower.contains(REFUSALS[i + 1]);
    let (read_only, not_permitted) = (says(0), says(4));
    let denied = says(2) || NOT_WRITTEN.iter().any(|p| lower.contains(p));
    // A hidden path looks missing from inside (a credential store, `--deny-read`): the
    // command's "no such file" on one is a read the sandbox blocked, not a missing file.
    let missing = lower.contains(MISSING) || lower.contains("does not exist");
    if !(read_only || denied || not_permitted || missing) {
        return None;
    }
    let path = path_in(line)
        .or_else(|| earlier.map(Path::to_path_buf))
        .map(|p| spec.cwd.join(p));
    let evidence = Some(line.trim().chars().take(300).collect());
    let under = |p: &Path, roots: &[PathBuf]| roots.iter().any(|r| p.starts_with(r));
    let writable =
        |p: &Path| p.starts_with(&spec.cwd) || under(p, &spec.writable) || p.starts_with("/tmp");
    let (operation, rule) = match &path {
        Some(p) if under(p, &spec.hidden) && !under(p, &spec.reopened) => (
            "read",
            "hidden (a credential store, or --deny-read)".to_string(),
        ),
        // The sandbox's /tmp is its own: what the host keeps there (a repository to clone, a
        // file to read) is missing inside, unless it was given.
        Some(p)
            if missing
                && p.starts_with("/tmp")
                && !under(p, &spec.writable)
                && !under(p, &spec.reopened)
                && std::fs::symlink_metadata(p).is_ok() =>
        {
            (
                "read",
                format!(
                    "the sandbox has a /tmp of its own, without the host's {}: give it with --allow-write {} (or keep it outside /tmp)",
                    p.display(),
                    p.display()
                ),
            )
        }
        // Anywhere else a missing file is only missing.
        _ if !(read_only || denied || not_permitted) => return None,
        Some(p) if under(p, &spec.read_only) => (
            "write",
            "read-only inside a writable place (a protected file, or --deny-write)".to_string(),
        ),
        Some(p) if (read_only || denied) && !writable(p) => (
            "write",
            "outside the writable places (the working directory, TMPDIR, --allow-write)"
                .to_string(),
        ),
        // A refusal inside a writable place is the file's own permissions, not the sandbox.
        Some(_) => return None,
        None if not_permitted => (
            "system call",
            "refused by the system-call filter, or needs a privilege the sandbox drops".to_string(),
        ),
        None => return None,
    };
    Some(Violation {
        path,
        destination: None,
        operation,
        rule,
        exact: false,
        action: None,
        evidence,
    })
}

/// Phrases that say the kernel refused, as tools print them.
/// What a command says of a path it cannot find: what a hidden one looks like from inside.
const MISSING: &str = "no such file or directory";

const REFUSALS: [&str; 6] = [
    "read-only file system",
    "erofs",
    "permission denied",
    "eacces",
    "operation not permitted",
    "eperm",
];

/// Refusals tools word their own way: npm, when it cannot make its cache directory.
const NOT_WRITTEN: [&str; 1] = ["error writing to the directory: "];

fn looks_like_path(s: &str) -> bool {
    !s.is_empty()
        && (s.contains('/') || s.starts_with('.') || s.starts_with('~'))
        && !s.contains("://")
}

/// The first quoted text in `line` that looks like a path.
fn quoted_path(line: &str) -> Option<PathBuf> {
    for quote in ['\'', '"', '`'] {
        let mut parts = line.split(quote);
        parts.next();
        while let (Some(inside), Some(_)) = (parts.next(), parts.next()) {
            if looks_like_path(inside) {
                return Some(PathBuf::from(inside));
            }
        }
    }
    None
}

/// The path an error line is about: the first quoted text that looks like a path, else the
/// word just before the refusal (`cannot create .bashrc: Read-only file system`), or just after
/// npm's.
fn path_in(line: &str) -> Option<PathBuf> {
    if let Some(p) = quoted_path(line) {
        return Some(p);
    }
    let lower = line.to_ascii_lowercase();
    if let Some(after) = NOT_WRITTEN
        .iter()
        .find_map(|p| lower.find(p).map(|i| &line[i + p.len()..]))
    {
        return after
            .split_whitespace()
            .next()
            .filter(|w| looks_like_path(w))
            .map(PathBuf::from);
    }
    let at = REFUSALS
        .iter()
        .chain(std::iter::once(&MISSING))
        .filter_map(|r| lower.find(r))
        .min()?;
    let before = line[..at].trim_end().trim_end_matches(':');
    let word = before.rsplit(char::is_whitespace).next()?;
    looks_like_path(word).then(|| PathBuf::from(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_could_not_be_undone_is_exact_and_says_why() {
        let v = Violation::from(&crate::NotUndone {
            path: "/w/.git/hooks/pre-commit".into(),
            why: "a git hook the command planted",
            error: "Permission denied (os error 13)".into(),
            action: "not removed",
        });
        assert!(v.exact && v.undo_failed());
        assert_eq!(
            v.describe(),
            "create /w/.git/hooks/pre-commit (exact, not removed): a git hook the command \
             planted: Permission denied (os error 13)"
        );
        let r = Violation::not_restored(Path::new("/w/.bashrc"), "Read-only file system");
        assert!(r.exact && r.undo_failed() && r.action == Some("not restored"));
        assert!(!Violation::restored(Path::new("/w/.bashrc")).undo_failed());
    }

    fn spec() -> SandboxSpec {
        SandboxSpec {
            argv: vec!["true".into()],
            cwd: "/w".into(),
            env: Vec::new(),
            writable: vec!["/cache".into()],
            read_only: vec!["/w/.git/config".into(), "/w/.bashrc".into()],
            network: crate::NetworkMode::None,
            hidden: vec!["/home/u/.ssh".into()],
            reopened: Vec::new(),
            limits: crate::Limits::default(),
            cgroups: Vec::new(),
            unix_sockets: Vec::new(),
            isolation: crate::Isolation::Auto,
            allow_local_binding: false,
            inbound: None,
            own_terminal: false,
            cwd_identity: None,
        }
    }

    fn inferred(line: &str) -> Option<(Option<PathBuf>, &'static str)> {
        infer(line, &spec(), None).map(|v| (v.path, v.operation))
    }

    #[test]
    fn what_common_tools_print_is_understood() {
        let cases = [
            (
                "touch: cannot touch '/etc/x': Read-only file system",
                Some("/etc/x"),
                "write",
            ),
            (
                "/bin/sh: 1: cannot create /usr/x: Read-only file system",
                Some("/usr/x"),
                "write",
            ),
            (
                "/bin/sh: 1: cannot create .bashrc: Read-only file system",
                Some("/w/.bashrc"),
                "write",
            ),
            (
                "PermissionError: [Errno 13] Permission denied: '/home/u/.ssh/id_rsa'",
                Some("/home/u/.ssh/id_rsa"),
                "read",
            ),
            (
                "Error: EROFS: read-only file system, open '/home/u/.npmrc'",
                Some("/home/u/.npmrc"),
                "write",
            ),
            (
                "error: could not lock config file .git/config: Read-only file system",
                Some("/w/.git/config"),
                "write",
            ),
            (
                "unshare: unshare failed: Operation not permitted",
                None,
                "system call",
            ),
            (
                "cat: /home/u/.ssh/id_rsa: No such file or directory",
                Some("/home/u/.ssh/id_rsa"),
                "read",
            ),
        ];
        for (line, path, op) in cases {
            assert_eq!(
                inferred(line),
                Some((path.map(PathBuf::from), op)),
                "{line}"
            );
        }
        // A file missing where nothing is hidden is only missing.
        assert_eq!(inferred("cat: /w/nothere: No such file or directory"), None);
        assert_eq!(inferred("cat: /home/u/x: No such file or directory"), None);
    }

    /// cargo names the path on one line and the refusal under `Caused by:`; npm says it could
    /// not write its cache without the words of a refusal. Both count, as writes outside the
    /// writable places; a refusal long after the path does not take it.
    #[test]
    fn refusals_that_name_the_path_elsewhere_are_understood() {
        let spec = spec();
        let scan = |text: &str| {
            let mut s = ErrorScanner::new(&spec);
            s.feed(text.as_bytes());
            s.finish()
                .into_iter()
                .map(|v| (v.path, v.operation))
                .collect::<Vec<_>>()
        };
        let cargo = "error: failed to create directory `/home/u/.cargo/registry/cache/x`\n\n\
                     Caused by:\n  Read-only file system (os error 30)\n";
        assert_eq!(
            scan(cargo),
            [(
                Some(PathBuf::from("/home/u/.cargo/registry/cache/x")),
                "write"
            )]
        );
        let npm = "npm error Log files were not written due to an error writing to the \
                   directory: /home/u/.npm/_logs\n";
        assert_eq!(
            scan(npm),
            [(Some(PathBuf::from("/home/u/.npm/_logs")), "write")]
        );
        let far = "see `/home/u/x`\n1\n2\n3\n4\nRead-only file system\n";
        assert!(scan(far).is_empty(), "{:?}", scan(far));
    }

    /// With no network, the name-lookup errors of curl, pip, npm, cargo and ssh each say so,
    /// naming the host where the line does; with cordon's proxy they are the proxy's to say.
    #[test]
    fn a_lookup_that_fails_without_a_network_is_named() {
        let cases = [
            (
                "curl: (6) Could not resolve host: example.com",
                Some("example.com"),
            ),
            (
                "WARNING: Retrying after connection broken by 'NewConnectionError(... \
                 Failed to establish a new connection: [Errno -3] Temporary failure in name \
                 resolution')': /simple/requests/",
                None,
            ),
            (
                "npm error request to https://registry.example/x failed, reason: getaddrinfo \
                 EAI_AGAIN registry.example",
                Some("registry.example"),
            ),
            (
                "  Could not resolve host: index.example",
                Some("index.example"),
            ),
            (
                "ssh: Could not resolve hostname github.com: Temporary failure in name resolution",
                None,
            ),
        ];
        for (line, host) in cases {
            let v = infer(line, &spec(), None).expect(line);
            assert_eq!(
                (v.operation, v.destination.as_deref()),
                ("connect", host),
                "{line}"
            );
            assert!(v.rule.contains("--allow-domain"), "{}", v.rule);
        }
        let mut proxied = spec();
        proxied.network = crate::NetworkMode::Host;
        assert!(infer(cases[0].0, &proxied, None).is_none());
    }

    #[test]
    fn what_is_not_the_sandbox_is_left_alone() {
        for line in [
            "cat: ./mine.txt: Permission denied",
            "cat: mine.txt: Permission denied",
            "error: build failed",
            "warning: /tmp/x: Permission denied",
            "cannot open /cache/a: Permission denied",
        ] {
            assert_eq!(inferred(line), None, "{line}");
        }
    }

    #[test]
    fn the_scanner_splits_lines_dedups_and_caps() {
        let s = spec();
        let mut scanner = ErrorScanner::new(&s);
        scanner.feed(b"touch: cannot touch '/etc/a': Read-only ");
        scanner.feed(b"file system\ntouch: cannot touch '/etc/a': Read-only file system\n");
        for i in 0..100 {
            scanner.feed(format!("cannot create /usr/{i}: Read-only file system\n").as_bytes());
        }
        let found = scanner.finish();
        assert_eq!(found[0].path.as_deref(), Some(Path::new("/etc/a")));
        assert_eq!(found.len(), MAX_INFERRED);
        assert!(found.iter().all(|v| !v.exact));
    }
}
