//! The SBPL profile for one run.
//!
//! Seatbelt applies the last rule that matches, so the profile goes from broad to narrow:
//! what every developer tool needs, then what may be read, then what may be written and the
//! exceptions to both, then the network. Every deny carries the run's tag as its message, so
//! the kernel's log lines for this run can be told from everyone else's.

use std::path::{Path, PathBuf};

use crate::{NetworkMode, PROTECTED_NAMES, SandboxSpec};

use super::glob::{escape_regex, glob_to_regex, sbpl_string};
use super::paths::{ancestors, canonical, text};
use super::{Profile, ProfileError};

/// Profiles named as Gemini CLI names its macOS profiles, each meaning the same thing in
/// cordon's terms: how broadly files may be read and written, and how the network is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedProfile {
    PermissiveOpen,
    PermissiveProxied,
    RestrictiveOpen,
    RestrictiveProxied,
    StrictOpen,
    StrictProxied,
}

/// How broadly files may be touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Files {
    /// Read everything but `hidden`; write anywhere the user may, except protected names (at
    /// any depth), `read_only` and `hidden`.
    Permissive,
    /// The spec as it is: read everything but `hidden`; write only the working directory,
    /// `writable` and the run's TMPDIR, except protected names there and `read_only`.
    Restrictive,
    /// As restrictive, but reads too are limited: the system's own locations, the places
    /// the run may write, `reopened` (`--allow-read`) and the user's git configuration.
    Strict,
}

/// How the network is reached under a named profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Net {
    /// The host's network ([`NetworkMode::Host`]).
    Open,
    /// Only cordon's proxy ([`NetworkMode::Proxy`]); the run must have one.
    Proxied,
}

impl NamedProfile {
    pub const ALL: [NamedProfile; 6] = [
        NamedProfile::PermissiveOpen,
        NamedProfile::PermissiveProxied,
        NamedProfile::RestrictiveOpen,
        NamedProfile::RestrictiveProxied,
        NamedProfile::StrictOpen,
        NamedProfile::StrictProxied,
    ];

    pub fn name(self) -> &'static str {
        match self {
            NamedProfile::PermissiveOpen => "permissive-open",
            NamedProfile::PermissiveProxied => "permissive-proxied",
            NamedProfile::RestrictiveOpen => "restrictive-open",
            NamedProfile::RestrictiveProxied => "restrictive-proxied",
            NamedProfile::StrictOpen => "strict-open",
            NamedProfile::StrictProxied => "strict-proxied",
        }
    }

    pub fn parse(name: &str) -> Option<NamedProfile> {
        NamedProfile::ALL.into_iter().find(|p| p.name() == name)
    }

    /// What the profile means, in one line for people.
    pub fn describe(self) -> &'static str {
        match self {
            NamedProfile::PermissiveOpen => {
                "write anywhere but protected and --deny-write paths; read all but --deny-read; the host's network"
            }
            NamedProfile::PermissiveProxied => {
                "write anywhere but protected and --deny-write paths; read all but --deny-read; network only through cordon's proxy"
            }
            NamedProfile::RestrictiveOpen => {
                "write only the working directory, --allow-write and TMPDIR; read all but --deny-read; the host's network"
            }
            NamedProfile::RestrictiveProxied => {
                "write only the working directory, --allow-write and TMPDIR; read all but --deny-read; network only through cordon's proxy"
            }
            NamedProfile::StrictOpen => {
                "write as restrictive; read only system locations, the writable places and --allow-read; the host's network"
            }
            NamedProfile::StrictProxied => {
                "write as restrictive; read only system locations, the writable places and --allow-read; network only through cordon's proxy"
            }
        }
    }

    fn files(self) -> Files {
        match self {
            NamedProfile::PermissiveOpen | NamedProfile::PermissiveProxied => Files::Permissive,
            NamedProfile::RestrictiveOpen | NamedProfile::RestrictiveProxied => Files::Restrictive,
            NamedProfile::StrictOpen | NamedProfile::StrictProxied => Files::Strict,
        }
    }

    fn net(self) -> Net {
        match self {
            NamedProfile::PermissiveOpen
            | NamedProfile::RestrictiveOpen
            | NamedProfile::StrictOpen => Net::Open,
            _ => Net::Proxied,
        }
    }

    /// The same file rules with the host's network.
    fn open(self) -> NamedProfile {
        match self.files() {
            Files::Permissive => NamedProfile::PermissiveOpen,
            Files::Restrictive => NamedProfile::RestrictiveOpen,
            Files::Strict => NamedProfile::StrictOpen,
        }
    }
}

/// Which rules the profile is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProfileChoice {
    /// The spec as it is (the file rules of `restrictive`, the spec's own network).
    #[default]
    Spec,
    /// A named profile, which overrides the spec's breadth and network as it says.
    Named(NamedProfile),
}

/// What a profile needs besides the spec.
#[derive(Debug, Clone)]
pub struct Options {
    /// This run's tag, in every denial's message (`cordon-<tag>`): 1 to 64 of `a-z0-9-`.
    pub tag: String,
    /// The run's own temporary directory, given to the command as `TMPDIR`; writable.
    pub tmpdir: PathBuf,
    /// `--deny-read` patterns with wildcards, as absolute paths. Seatbelt matches them as
    /// regexes, so they also hide paths created after the run started.
    pub hidden_globs: Vec<String>,
    pub choice: ProfileChoice,
}

/// The network as the profile grants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Network {
    None,
    Proxy { http: u16, socks: u16 },
    Host,
}

/// Directories a strict profile lets the command read: where macOS, the developer tools and
/// package managers keep programs and libraries. None of it is a user's own data.
const SYSTEM_READABLE: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/System",
    "/Library",
    "/Applications",
    "/opt",
    "/dev",
    "/private/etc",
    // /etc/localtime points into it: every program that prints local time.
    "/private/var/db/timezone",
    // Shared library cache of macOS releases before 13.
    "/private/var/db/dyld",
    // /bin/sh reads which shell it is (bash, dash or zsh) from /var/select/sh.
    "/private/var/select",
    // /usr/bin/git, clang and friends are shims that ask where the developer tools are.
    "/private/var/db/xcode_select_link",
];

/// The profile for `spec` under `options`.
pub fn generate(spec: &SandboxSpec, options: &Options) -> Result<Profile, ProfileError> {
    let tag = &options.tag;
    if tag.is_empty()
        || tag.len() > 64
        || !tag
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(ProfileError::BadTag(tag.clone()));
    }
    let (files, network) = match options.choice {
        ProfileChoice::Spec => (
            Files::Restrictive,
            match &spec.network {
                NetworkMode::None => Network::None,
                NetworkMode::Proxy(p) => Network::Proxy {
                    http: p.http_port,
                    socks: p.socks_port,
                },
                NetworkMode::Host => Network::Host,
            },
        ),
        ProfileChoice::Named(named) => (
            named.files(),
            match (named.net(), &spec.network) {
                (Net::Open, _) => Network::Host,
                (Net::Proxied, NetworkMode::Proxy(p)) => Network::Proxy {
                    http: p.http_port,
                    socks: p.socks_port,
                },
                (Net::Proxied, _) => {
                    return Err(ProfileError::NeedsProxy(named.name(), named.open().name()));
                }
            },
        ),
    };
    let places = Places::new(spec, options, files)?;
    let hidden_regexes = options
        .hidden_globs
        .iter()
        .map(|g| glob_to_regex(g))
        .collect::<Result<Vec<_>, _>>()?;
    let mut w = Writer {
        text: String::new(),
        message: sbpl_string(&format!("cordon-{tag}")),
    };
    w.header(files, network, options.choice);
    w.base();
    w.reads(files, &places, &hidden_regexes);
    w.writes(files, &places, &hidden_regexes);
    w.network(network, spec.allow_local_binding, &places);
    let mut params = places.params();
    params.push(("TAG".to_string(), format!("cordon-{tag}")));
    Ok(Profile {
        text: w.text,
        params,
    })
}

/// Every path the profile names, canonical, in the order they become parameters.
#[derive(Debug, Default)]
struct Places {
    cwd: String,
    tmpdir: String,
    writable: Vec<String>,
    read_only: Vec<String>,
    /// Protected names under the working directory and every `writable` place.
    protected: Vec<String>,
    /// Directories above guarded paths that cannot be removed or renamed.
    unlink: Vec<String>,
    hidden: Vec<String>,
    reopened: Vec<String>,
    /// Strict only: the user's git configuration, readable so git works.
    readable: Vec<String>,
    /// Strict only: directories above what may be read, which may be looked at.
    ancestors: Vec<String>,
    unix_sockets: Vec<String>,
}

fn push_unique(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

fn canonical_all(paths: &[PathBuf]) -> Result<Vec<String>, ProfileError> {
    let mut out = Vec::new();
    for p in paths {
        push_unique(&mut out, text(&canonical(p)?)?);
    }
    Ok(out)
}

impl Places {
    fn new(spec: &SandboxSpec, options: &Options, files: Files) -> Result<Places, ProfileError> {
        let cwd = text(&canonical(&spec.cwd)?)?;
        let tmpdir = text(&canonical(&options.tmpdir)?)?;
        let writable = canonical_all(&spec.writable)?;
        let mut places = Places {
            read_only: canonical_all(&spec.read_only)?,
            hidden: canonical_all(&spec.hidden)?,
            reopened: canonical_all(&spec.reopened)?,
            unix_sockets: canonical_all(&spec.unix_sockets)?,
            ..Places::default()
        };
        let roots: Vec<&str> = std::iter::once(cwd.as_str())
            .chain(writable.iter().map(String::as_str))
            .collect();
        for root in &roots {
            for name in PROTECTED_NAMES {
                push_unique(&mut places.protected, format!("{root}/{name}"));
            }
        }
        // A guarded path's directories may not be moved away with it inside, wherever the
        // command could move them: in a writable place, or anywhere when all is writable.
        let guarded: Vec<&String> = places
            .protected
            .iter()
            .chain(&places.read_only)
            .chain(&places.hidden)
            .collect();
        let inside = |dir: &Path| {
            roots
                .iter()
                .chain(std::iter::once(&tmpdir.as_str()))
                .any(|r| dir.starts_with(r))
        };
        for g in guarded {
            // Under the permissive profile, protected names are guarded by pattern, at any
            // depth, so their directories need no rules of their own.
            if files == Files::Permissive && places.protected.contains(g) {
                continue;
            }
            for dir in ancestors(Path::new(g)) {
                if files == Files::Permissive || inside(dir) {
                    push_unique(&mut places.unlink, text(dir)?);
                }
            }
        }
        if files == Files::Strict {
            if let Some((_, home)) = spec.env.iter().find(|(k, _)| k == "HOME")
                && Path::new(home).is_absolute()
            {
                let home = canonical(Path::new(home))?;
                for config in [".gitconfig", ".config/git"] {
                    push_unique(&mut places.readable, text(&home.join(config))?);
                }
            }
            let read_roots: Vec<String> = roots
                .iter()
                .map(|r| r.to_string())
                .chain([tmpdir.clone()])
                .chain(places.reopened.iter().cloned())
                .chain(places.readable.iter().cloned())
                .collect();
            for r in &read_roots {
                for dir in ancestors(Path::new(r)) {
                    push_unique(&mut places.ancestors, text(dir)?);
                }
            }
        }
        places.cwd = cwd;
        places.tmpdir = tmpdir;
        places.writable = writable;
        Ok(places)
    }

    fn params(&self) -> Vec<(String, String)> {
        let mut out = vec![
            ("CWD".to_string(), self.cwd.clone()),
            ("TMPDIR".to_string(), self.tmpdir.clone()),
        ];
        let lists: [(&str, &Vec<String>); 9] = [
            ("WRITABLE", &self.writable),
            ("READ_ONLY", &self.read_only),
            ("PROTECTED", &self.protected),
            ("UNLINK", &self.unlink),
            ("HIDDEN", &self.hidden),
            ("REOPENED", &self.reopened),
            ("READABLE", &self.readable),
            ("ANCESTOR", &self.ancestors),
            ("UNIX_SOCKET", &self.unix_sockets),
        ];
        for (prefix, list) in lists {
            for (i, value) in list.iter().enumerate() {
                out.push((format!("{prefix}_{i}"), value.clone()));
            }
        }
        out
    }
}

/// `(param "PREFIX_i")` for every item of a list.
fn params_of(prefix: &str, list: &[String]) -> Vec<String> {
    (0..list.len())
        .map(|i| format!("(param \"{prefix}_{i}\")"))
        .collect()
}

fn filters(kind: &str, params: &[String]) -> Vec<String> {
    params.iter().map(|p| format!("({kind} {p})")).collect()
}

struct Writer {
    text: String,
    /// The deny message, as a string literal.
    message: String,
}

impl Writer {
    /// One `(sysctl-name …)` filter line per name.
    fn sysctl_names(&mut self, names: &[&str]) {
        for n in names {
            self.line(&format!("  (sysctl-name \"{n}\")"));
        }
    }

    fn line(&mut self, line: &str) {
        self.text.push_str(line);
        self.text.push('\n');
    }

    fn comment(&mut self, lines: &str) {
        for l in lines.lines() {
            self.text.push_str(";; ");
            self.text.push_str(l);
            self.text.push('\n');
        }
    }

    fn section(&mut self, title: &str) {
        self.text.push('\n');
        self.line(&format!(";; ---- {title}"));
    }

    /// `(allow OP filters…)` or `(deny OP filters… (with message …))`, over several lines.
    /// Nothing when there are no filters: a rule without filters applies to everything, which
    /// an empty list must never turn into.
    fn rule(&mut self, action: &str, operations: &str, filters: &[String]) {
        if filters.is_empty() {
            return;
        }
        self.line(&format!("({action} {operations}"));
        for f in filters {
            self.line(&format!("  {f}"));
        }
        if action == "deny" {
            let m = self.message.clone();
            self.line(&format!("  (with message {m})"));
        }
        let last = self.text.len() - 1;
        self.text.insert(last, ')');
    }

    fn header(&mut self, files: Files, network: Network, choice: ProfileChoice) {
        self.line("(version 1)");
        let name = match choice {
            ProfileChoice::Spec => "cordon's own, from the run's spec".to_string(),
            ProfileChoice::Named(n) => format!("{}:\n{}", n.name(), n.describe()),
        };
        let files = match files {
            Files::Permissive => "permissive",
            Files::Restrictive => "restrictive",
            Files::Strict => "strict",
        };
        let network = match network {
            Network::None => "none",
            Network::Proxy { .. } => "proxy",
            Network::Host => "host",
        };
        self.comment(&format!(
            "cordon's Seatbelt profile for one run. Profile: {name}.\nFiles: {files}. Network: {network}.\nNo path is written here: each is a parameter given to sandbox-exec with -D and read\nwith (param \"NAME\"). What nothing below allows is refused, and every refusal is logged\nwith this run's tag."
        ));
        let m = self.message.clone();
        self.line(&format!("(deny default (with message {m}))"));
    }

    fn base(&mut self) {
        self.section("processes");
        self.comment("Compilers, git, shells and test runners start other programs; those inherit this\nprofile.");
        self.line("(allow process-fork)");
        self.line("(allow process-exec)");
        self.comment("A command may signal and inspect its own processes (stop workers, ps, node's process\nAPIs), never anything outside this sandbox.");
        self.line("(allow signal (target same-sandbox))");
        self.line("(allow process-info* (target same-sandbox))");

        self.section("system information");
        self.comment("Node's os.cpus() (libuv) asks the Mach host port for per-CPU figures.");
        self.line("(allow mach-host*)");
        self.line("(allow sysctl-read");
        self.comment_in(
            "How many CPUs, and of which kind: make -j, cargo, go's runtime, node, the JVM.",
        );
        self.sysctl_names(&[
            "hw.ncpu",
            "hw.activecpu",
            "hw.logicalcpu",
            "hw.logicalcpu_max",
            "hw.physicalcpu",
            "hw.physicalcpu_max",
            "hw.nperflevels",
        ]);
        self.line("  (sysctl-name-prefix \"hw.perflevel\")");
        self.comment_in("Memory and page size: allocators, the JVM, node's os.totalmem().");
        self.sysctl_names(&["hw.memsize", "hw.pagesize", "hw.pagesize_compat"]);
        self.comment_in("What the CPU can do, and whether Rosetta translates: runtimes and compilers pick\ntheir code paths by it.");
        self.sysctl_names(&[
            "hw.machine",
            "hw.model",
            "hw.cputype",
            "hw.cpusubtype",
            "hw.cpufamily",
            "hw.byteorder",
            "hw.cachelinesize",
            "hw.l1dcachesize",
            "hw.l2cachesize",
            "sysctl.proc_cputype",
            "sysctl.proc_translated",
        ]);
        self.line("  (sysctl-name-prefix \"hw.optional.\")");
        self.line("  (sysctl-name-prefix \"machdep.cpu.\")");
        self.comment_in("Which system this is: uname, python's platform module, build scripts.");
        self.sysctl_names(&[
            "kern.ostype",
            "kern.osrelease",
            "kern.osversion",
            "kern.osproductversion",
            "kern.version",
            "kern.hostname",
        ]);
        self.comment_in("Limits tools size their work by: argument length (xargs, shells), open files,\nprocesses, the stack.");
        self.sysctl_names(&[
            "kern.argmax",
            "kern.maxfilesperproc",
            "kern.maxproc",
            "kern.usrstack64",
        ]);
        self.comment_in("Process tables by pid and group (ps, pgrep): names and states, not arguments or\nenvironments, which live under kern.procargs2.");
        self.line("  (sysctl-name-prefix \"kern.proc.pid.\")");
        self.line("  (sysctl-name-prefix \"kern.proc.pgrp.\")");
        self.comment_in("Load and boot time: uptime, and build tools that scale with load.");
        self.line("  (sysctl-name \"vm.loadavg\")");
        self.line("  (sysctl-name \"kern.boottime\"))");
        self.comment("The JVM reads its CPU type through a sysctl that counts as a write: the kernel fills a\nbuffer the caller passes.");
        self.line("(allow sysctl-write (sysctl-name \"kern.grade_cputype\"))");

        self.section("system services");
        self.line("(allow mach-lookup");
        self.comment_in(
            "User and group names: whoami, id, git's author name, ssh, python's pwd module.",
        );
        self.line("  (global-name \"com.apple.system.opendirectoryd.libinfo\")");
        self.line("  (global-name \"com.apple.system.opendirectoryd.membership\")");
        self.comment_in(
            "The per-user temporary and cache directories (confstr, NSTemporaryDirectory).",
        );
        self.line("  (global-name \"com.apple.bsd.dirhelper\")");
        self.comment_in(
            "os_log and syslog: without them every program's logging is a denial of its own.",
        );
        self.line("  (global-name \"com.apple.logd\")");
        self.line("  (global-name \"com.apple.system.logger\")");
        self.comment_in("libc's notifications (time zone and configuration changes).");
        self.line("  (global-name \"com.apple.system.notification_center\"))");
        self.comment("Apple's frameworks read the user's preferences (locale, defaults) as they start;\nreading only.");
        self.line("(allow user-preference-read)");
        self.comment("Python's multiprocessing locks with named POSIX semaphores. Shared memory is not\nallowed: its names are shared with every process of the machine.");
        self.line("(allow ipc-posix-sem)");

        self.section("devices");
        self.comment("What shell redirections and runtimes open by name.");
        self.line("(allow file-read* file-write-data file-ioctl");
        for d in ["/dev/null", "/dev/zero", "/dev/tty", "/dev/dtracehelper"] {
            self.line(&format!("  (literal \"{d}\")"));
        }
        self.text.insert(self.text.len() - 1, ')');
        self.line("(allow file-read* (literal \"/dev/random\") (literal \"/dev/urandom\"))");
        self.comment("A command's own descriptors by name: bash's <(…), /dev/stdout, /dev/stderr.");
        self.line("(allow file-read* file-write-data");
        self.line("  (subpath \"/dev/fd\")");
        for d in ["/dev/stdin", "/dev/stdout", "/dev/stderr"] {
            self.line(&format!("  (literal \"{d}\")"));
        }
        self.text.insert(self.text.len() - 1, ')');
        self.comment("Pseudo-terminals, for programs that drive others interactively (script, expect,\npython's pty).");
        self.line("(allow pseudo-tty)");
        self.line("(allow file-read* file-write* file-ioctl (literal \"/dev/ptmx\"))");
        self.line(&format!(
            "(allow file-read* file-write-data file-ioctl (regex {}))",
            sbpl_string("^/dev/ttys[0-9]+$")
        ));
    }

    /// A comment inside a multi-line form, indented with it.
    fn comment_in(&mut self, lines: &str) {
        for l in lines.lines() {
            self.text.push_str("  ;; ");
            self.text.push_str(l);
            self.text.push('\n');
        }
    }

    fn reads(&mut self, files: Files, p: &Places, hidden_regexes: &[String]) {
        self.section("reading");
        if files == Files::Strict {
            self.comment("Only the system's own locations, the places this run may write, the user's git\nconfiguration (git stops when it cannot read it) and what --allow-read names.");
            let mut allowed = vec!["(literal \"/\")".to_string()];
            allowed.extend(
                SYSTEM_READABLE
                    .iter()
                    .map(|d| format!("(subpath {})", sbpl_string(d))),
            );
            allowed.push("(subpath (param \"CWD\"))".to_string());
            allowed.push("(subpath (param \"TMPDIR\"))".to_string());
            allowed.extend(filters("subpath", &params_of("WRITABLE", &p.writable)));
            allowed.extend(filters("subpath", &params_of("READABLE", &p.readable)));
            self.rule("allow", "file-read*", &allowed);
            self.comment("The directories above them may be looked at (stat, realpath, getcwd), not listed or\nread; so may the links /etc, /tmp and /var.");
            let mut meta: Vec<String> = ["/etc", "/tmp", "/var"]
                .iter()
                .map(|l| format!("(literal \"{l}\")"))
                .collect();
            meta.extend(filters("literal", &params_of("ANCESTOR", &p.ancestors)));
            self.rule("allow", "file-read-metadata", &meta);
        } else {
            self.comment("Everything may be read, except what --deny-read hides.");
            self.line("(allow file-read*)");
        }
        let mut hidden = filters("subpath", &params_of("HIDDEN", &p.hidden));
        hidden.extend(
            hidden_regexes
                .iter()
                .map(|r| format!("(regex {})", sbpl_string(r))),
        );
        if !hidden.is_empty() {
            self.comment(
                "--deny-read: paths, and patterns that also cover paths created during the run.",
            );
            self.rule("deny", "file-read*", &hidden);
        }
        if !p.reopened.is_empty() {
            self.comment(
                "--allow-read: readable again inside what is hidden (or, strict, readable at all).",
            );
            self.rule(
                "allow",
                "file-read*",
                &filters("subpath", &params_of("REOPENED", &p.reopened)),
            );
        }
    }

    fn writes(&mut self, files: Files, p: &Places, hidden_regexes: &[String]) {
        self.section("writing");
        if files == Files::Permissive {
            self.comment("Anywhere the user may write (macOS's own protections still hold), except what\nfollows.");
            self.line("(allow file-write*)");
        } else {
            self.comment(
                "Only the working directory, what --allow-write names, and this run's own TMPDIR.",
            );
            let mut places = vec![
                "(subpath (param \"CWD\"))".to_string(),
                "(subpath (param \"TMPDIR\"))".to_string(),
            ];
            places.extend(filters("subpath", &params_of("WRITABLE", &p.writable)));
            self.rule("allow", "file-write*", &places);
        }
        let mut hidden = filters("subpath", &params_of("HIDDEN", &p.hidden));
        hidden.extend(
            hidden_regexes
                .iter()
                .map(|r| format!("(regex {})", sbpl_string(r))),
        );
        if !hidden.is_empty() {
            self.comment("What is hidden cannot be written, replaced or removed either.");
            self.rule("deny", "file-write*", &hidden);
        }
        if files == Files::Permissive {
            self.comment("Shell start-up files, git's config and hooks, editor and agent settings: at any\ndepth, existing or not. And --deny-write paths.");
            let mut denied: Vec<String> = PROTECTED_NAMES
                .iter()
                .map(|n| {
                    format!(
                        "(regex {})",
                        sbpl_string(&format!("^.*/{}(/.*)?$", escape_regex(n)))
                    )
                })
                .collect();
            denied.extend(filters("subpath", &params_of("READ_ONLY", &p.read_only)));
            self.rule("deny", "file-write*", &denied);
            self.comment("No .git directory may be removed or renamed: `mv .git .git2` would carry its config\nand hooks out from under the rules above.");
            self.rule(
                "deny",
                "file-write-unlink",
                &[format!("(regex {})", sbpl_string("^.*/\\.git$"))],
            );
        } else {
            self.comment("Shell start-up files, git's config and hooks, editor and agent settings in every\nwritable place, existing or not (creating one is refused too). And --deny-write paths.");
            let mut denied = filters("subpath", &params_of("PROTECTED", &p.protected));
            denied.extend(filters("subpath", &params_of("READ_ONLY", &p.read_only)));
            self.rule("deny", "file-write*", &denied);
        }
        if !p.unlink.is_empty() {
            self.comment("The directories holding those cannot be removed or renamed: moving one (`mv .git\n.git2`) would carry what it holds out from under the rules above.");
            self.rule(
                "deny",
                "file-write-unlink",
                &filters("literal", &params_of("UNLINK", &p.unlink)),
            );
        }
    }

    fn network(&mut self, network: Network, local_binding: bool, p: &Places) {
        self.section("network");
        match network {
            Network::None => {
                self.comment("None.");
            }
            Network::Proxy { http, socks } => {
                self.comment(
                    "Only cordon's proxy on this machine's loopback, which decides host by host.",
                );
                self.line("(allow network-outbound");
                self.line(&format!("  (remote tcp \"localhost:{http}\")"));
                self.line(&format!("  (remote tcp \"localhost:{socks}\"))"));
                self.comment("TLS certificates are checked by the system's trust service (Go, Swift, curl),\nalso for connections through the proxy. That service may fetch revocation data itself,\noutside the proxy.");
                self.line("(allow mach-lookup (global-name \"com.apple.trustd.agent\"))");
            }
            Network::Host => {
                self.comment("The host's network, as for any program the user runs.");
                self.line("(allow network*)");
                self.comment("Network interfaces and routes (AF_SYSTEM sockets, routing sysctls): Go's net\npackage, node's os.networkInterfaces().");
                self.line("(allow system-socket)");
                self.line("(allow sysctl-read (sysctl-name-prefix \"net.routetable.\"))");
                self.comment("Name resolution, network configuration and certificate checks.");
                self.line("(allow mach-lookup");
                for n in [
                    "com.apple.dnssd.service",
                    "com.apple.mDNSResponder",
                    "com.apple.SystemConfiguration.DNSConfiguration",
                    "com.apple.SystemConfiguration.configd",
                    "com.apple.networkd",
                    "com.apple.trustd.agent",
                    "com.apple.ocspd",
                    "com.apple.SecurityServer",
                ] {
                    self.line(&format!("  (global-name \"{n}\")"));
                }
                self.text.insert(self.text.len() - 1, ')');
                self.comment("Unix sockets are not the network: only the resolver's and those --allow-unix-socket\nnames (as on Linux, where the host's sockets stay out of reach).");
                let m = self.message.clone();
                self.line(&format!(
                    "(deny network-outbound (remote unix-socket) (with message {m}))"
                ));
                self.line("(allow network-outbound (remote unix-socket (path-literal \"/private/var/run/mDNSResponder\")))");
            }
        }
        if local_binding && network != Network::Host {
            self.comment("Listening on loopback (test and dev servers) and connecting to it. macOS has no\nnetwork namespace: this loopback is the host's, so services other programs listen on\nthere are reachable too.");
            self.line("(allow network-bind (local ip \"localhost:*\"))");
            self.line("(allow network-inbound (local ip \"localhost:*\"))");
            self.line("(allow network-outbound (remote ip \"localhost:*\"))");
        }
        if !p.unix_sockets.is_empty() {
            self.comment("--allow-unix-socket: these sockets may be connected to.");
            let sockets: Vec<String> = params_of("UNIX_SOCKET", &p.unix_sockets)
                .into_iter()
                .map(|s| format!("(remote unix-socket (path-literal {s}))"))
                .collect();
            self.rule("allow", "network-outbound", &sockets);
        }
    }
}
