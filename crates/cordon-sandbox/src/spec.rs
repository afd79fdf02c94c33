//! The backend-neutral description of one sandboxed run.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What the command's network looks like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// Its own network namespace with only loopback.
    #[default]
    None,
    /// Only cordon's proxy, which decides host by host: loopback ports the command connects
    /// to lead there, and nowhere else.
    Proxy(ProxyEndpoint),
    /// The host's network.
    Host,
}

/// Where a sandboxed command reaches cordon's proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyEndpoint {
    /// The proxy's Unix socket on the host. On Linux the sandbox's own loopback ports are
    /// bridged to it from inside the network namespace; where there is no such namespace
    /// (macOS) it is `None` and the ports are the proxy's own on the host's loopback.
    pub socket: Option<PathBuf>,
    /// Loopback port of the HTTP proxy (`HTTP_PROXY`, `HTTPS_PROXY`).
    pub http_port: u16,
    /// Loopback port of the SOCKS5 proxy (`ALL_PROXY=socks5h://…`).
    pub socks_port: u16,
}

/// How the run is walled off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// Namespaces where the machine allows them, else Landlock and seccomp alone, with a
    /// warning saying what is weaker.
    #[default]
    Auto,
    /// Namespaces or nothing: refuse to run where they are unavailable.
    Namespaces,
    /// Landlock and seccomp alone, as where user namespaces are unavailable.
    LandlockOnly,
}

/// One run: the command and everything it may touch. The default touches nothing: no
/// command, nothing writable, no network.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SandboxSpec {
    /// Program and arguments; the program is looked up on the sandbox's `PATH`.
    pub argv: Vec<String>,
    /// Working directory; writable.
    pub cwd: PathBuf,
    /// The command's whole environment.
    pub env: Vec<(String, String)>,
    /// Absolute paths the command may write besides `cwd` and its private `/tmp`.
    pub writable: Vec<PathBuf>,
    /// Absolute paths inside writable ones that stay read-only.
    pub read_only: Vec<PathBuf>,
    pub network: NetworkMode,
    /// Absolute paths the command may not read: a directory appears empty and read-only, a
    /// file unreadable.
    #[serde(default)]
    pub hidden: Vec<PathBuf>,
    /// Absolute paths inside hidden directories that stay readable.
    #[serde(default)]
    pub reopened: Vec<PathBuf>,
    /// Resource limits; `None` means no limit of that kind.
    #[serde(default)]
    pub limits: Limits,
    /// Control groups (v1 `cgroup.procs` files) the sandbox joins before anything else runs,
    /// set up by the caller when it may (as root). They make limits hold for the whole
    /// sandbox rather than per process.
    #[serde(default)]
    pub cgroups: Vec<PathBuf>,
    /// Unix-domain socket paths the command may connect to. Without any, the command cannot
    /// create Unix sockets at all; with some, it may also reach the sockets it binds itself,
    /// and no others.
    #[serde(default)]
    pub unix_sockets: Vec<PathBuf>,
    #[serde(default)]
    pub isolation: Isolation,
    /// The command may listen on loopback (its own, inside the sandbox): test servers, dev
    /// servers.
    #[serde(default)]
    pub allow_local_binding: bool,
    /// Where host connections come in (`--publish`): a Unix socket on the host that the
    /// sandbox connects to at start, then answers each byte read there with a fresh, unconnected
    /// TCP socket of its own network namespace. Whoever listens on the host connects that socket
    /// to the published port, so the connection lands on the sandbox's loopback without the
    /// host's loopback ever being shared. Needs a network namespace.
    #[serde(default)]
    pub inbound: Option<PathBuf>,
    /// The command's standard input is a terminal made for this run alone (a pseudo-terminal
    /// `cordon exec` opened for it), which becomes the command's controlling terminal: `/dev/tty`,
    /// Ctrl-C and job control then work as on any terminal. Never for a person's own terminal,
    /// which the command must not reach past its own input and output.
    #[serde(default)]
    pub own_terminal: bool,
    /// The directory `cwd` must be, as (device, inode), when a front end opened it and checked
    /// it: a command running beside the sandbox can swap a directory on `cwd`'s path for a
    /// link between that check and the bind that makes `cwd` writable, and the set-up then
    /// fails rather than make another directory writable.
    #[serde(default)]
    pub cwd_identity: Option<(u64, u64)>,
}

/// Limits on what a run may consume.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Processes (and threads) at once. Stops fork bombs.
    pub max_processes: Option<u64>,
    /// The highest process id the sandbox's PID namespace may hand out (Linux 6.14+ keeps one
    /// per namespace), which bounds its processes without a control group. At least 301.
    #[serde(default)]
    pub pid_max: Option<u64>,
    /// Bytes of memory.
    pub memory_bytes: Option<u64>,
    /// Bytes the sandbox's own in-memory file systems may hold, `/tmp` and `/dev/shm`
    /// together: their pages are memory no process limit counts. `None`: a quarter of the
    /// machine's memory.
    #[serde(default)]
    pub scratch_bytes: Option<u64>,
    /// Seconds of CPU time each process may use.
    #[serde(default)]
    pub cpu_seconds: Option<u64>,
    /// Share of the CPUs the whole sandbox may use, in thousandths of one CPU (only with
    /// control groups).
    #[serde(default)]
    pub cpu_millis: Option<u64>,
    /// Wall-clock time the whole run may take.
    #[serde(default)]
    pub timeout: Option<Duration>,
}

/// Why a denylist and not an allowlist: a sandboxed command on the host runs the host's
/// toolchains, which find themselves through variables no list can foresee (`CARGO_HOME`,
/// `GOPATH`, `JAVA_HOME`, `VIRTUAL_ENV`, `NVM_DIR`, a project's own `FOO_ROOT`). So the
/// environment passes, except what looks like a credential by its name or by its value; what
/// is removed wrongly comes back with `--keep-env NAME`. (The container backend starts from an
/// image's environment and keeps its own allow list, filtered by the same test.)
///
/// A name is a credential when one of its words (split at `_`) is one of these.
const SECRET_WORDS: &[&str] = &[
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "CREDS",
    "APIKEY",
    "KEY",
    "KEYS",
    "PAT",
    "AUTH",
    "COOKIE",
    "DSN",
    "SIGNATURE",
    "PRIVATE",
    "WEBHOOK",
];
/// Parts of a name that mark a credential even inside a word (`PGPASSWORD`, `DBSECRET`).
const SECRET_PARTS: &[&str] = &[
    "PASSWORD",
    "PASSWD",
    "SECRET",
    "APIKEY",
    "ACCESSKEY",
    "CREDENTIAL",
    "PASSPHRASE",
    "AUTHTOKEN",
    "CONNECTION_STRING",
    "CONNSTR",
];
/// Whole services whose variables are all about access.
const SECRET_PREFIXES: &[&str] = &["AWS_", "AZURE_", "GH_", "GOOGLE_APPLICATION_CREDENTIALS"];
const SECRET_NAMES: &[&str] = &["DATABASE_URL", "SSH_AUTH_SOCK", "NETRC"];
/// Names that contain a secret word but hold none: the shell's working directories.
const NOT_SECRET: &[&str] = &["PWD", "OLDPWD"];

/// Well-known token formats, as `(prefix, least number of characters after it)`.
const TOKEN_PREFIXES: &[(&str, usize)] = &[
    ("ghp_", 20),
    ("gho_", 20),
    ("ghu_", 20),
    ("ghs_", 20),
    ("ghr_", 20),
    ("github_pat_", 20),
    ("glpat-", 16),
    ("glrt-", 16),
    ("gldt-", 16),
    ("glptt-", 16),
    ("sk-", 16),
    ("sk_live_", 16),
    ("sk_test_", 16),
    ("rk_live_", 16),
    ("rk_test_", 16),
    ("xoxb-", 10),
    ("xoxp-", 10),
    ("xoxa-", 10),
    ("xoxe-", 10),
    ("xoxr-", 10),
    ("xoxs-", 10),
    ("xapp-", 10),
    ("AIza", 30),
    ("npm_", 30),
    ("pypi-", 30),
    ("hf_", 30),
    ("dop_v1_", 30),
    ("shpat_", 20),
    ("shpss_", 20),
    ("glc_", 20),
    ("eyJ", 30),
];

fn secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if NOT_SECRET.contains(&upper.as_str()) {
        return false;
    }
    upper.split('_').any(|w| SECRET_WORDS.contains(&w))
        || SECRET_PARTS.iter().any(|p| upper.contains(p))
        || SECRET_PREFIXES.iter().any(|p| upper.starts_with(p))
        || SECRET_NAMES.contains(&upper.as_str())
}

/// A URL in `value` carries a password (`scheme://user:password@host`).
fn credentials_in_url(value: &str) -> bool {
    value.match_indices("://").any(|(at, _)| {
        let rest = &value[at + 3..];
        let authority = rest
            .split(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace() || c == ',')
            .next()
            .unwrap_or("");
        authority
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| userinfo.contains(':'))
    })
}

/// `value` holds a key or token in a format known to be one.
fn token_in_value(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    if value.contains("-----BEGIN")
        || ["password=", "pwd=", "secret=", "token="]
            .iter()
            .any(|k| lower.contains(k))
    {
        return true;
    }
    value
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .any(|piece| {
            let aws_key = piece.len() == 20
                && ["AKIA", "ASIA", "AGPA", "AIDA", "AROA"]
                    .iter()
                    .any(|p| piece.starts_with(p))
                && piece
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
            aws_key
                || TOKEN_PREFIXES.iter().any(|(prefix, least)| {
                    piece
                        .strip_prefix(prefix)
                        .is_some_and(|rest| rest.len() >= *least)
                })
        })
}

/// Whether a variable looks like it holds a credential, by its name or by its value.
pub(crate) fn is_secret(name: &str, value: &str) -> bool {
    secret_name(name) || credentials_in_url(value) || token_in_value(value)
}

/// The environment a command gets: `vars` minus likely secrets, except those in `keep`.
/// Returns the kept variables and the names that were removed.
pub fn filter_environment(
    vars: impl IntoIterator<Item = (String, String)>,
    keep: &[String],
) -> (Vec<(String, String)>, Vec<String>) {
    let mut kept = Vec::new();
    let mut removed = Vec::new();
    for (k, v) in vars {
        if is_secret(&k, &v) && !keep.contains(&k) {
            removed.push(k);
        } else {
            kept.push((k, v));
        }
    }
    (kept, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_found_by_name_and_by_value() {
        for name in [
            "PGPASSWORD",
            "MYSQL_PWD",
            "API_KEY",
            "DATABASE_URL",
            "STRIPE_SECRET_KEY",
            "GITHUB_PAT",
            "DOCKER_AUTH_CONFIG",
            "HF_TOKEN",
            "SENTRY_DSN",
            "CARGO_REGISTRY_TOKEN",
            "AZURE_OPENAI_ENDPOINT",
        ] {
            assert!(is_secret(name, "x"), "{name}");
        }
        for (name, value) in [
            ("HTTPS_PROXY", "http://alice:hunter2@proxy:3128"),
            (
                "PIP_EXTRA_INDEX_URL",
                "https://a.test/s https://u:p@b.test/s",
            ),
            ("REDIS", "redis://:pw@localhost:6379/0"),
            ("X", "ghp_0123456789abcdefghijABCDEFGHIJ"),
            ("X", "Bearer github_pat_11AAAAAA0123456789abcdef"),
            ("X", "glpat-0123456789abcdefghij"),
            ("X", "sk-proj-0123456789abcdefghij"),
            ("X", "xoxb-1234-5678-abcdefgh"),
            ("X", "AKIAIOSFODNN7EXAMPLE"),
            ("X", "Server=db;User Id=sa;Password=x"),
        ] {
            assert!(is_secret(name, value), "{name}={value}");
        }
        for (name, value) in [
            ("PATH", "/usr/local/bin:/usr/bin"),
            ("PWD", "/work"),
            ("OLDPWD", "/"),
            ("HOME", "/root"),
            ("LANG", "sk_SK.UTF-8"),
            ("TOKENIZERS_PARALLELISM", "false"),
            ("KEYMAP", "us"),
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("GIT_URL", "ssh://git@host.test/repo.git"),
            ("CARGO_HOME", "/root/.cargo"),
            ("XAUTHORITY", "/run/user/1000/Xauthority"),
        ] {
            assert!(!is_secret(name, value), "{name}={value}");
        }
    }

    #[test]
    fn secrets_are_removed_unless_kept() {
        let vars = [
            ("PATH", "/bin"),
            ("OPENAI_API_KEY", "x"),
            ("AWS_PROFILE", "p"),
            ("GITHUB_TOKEN", "t"),
            ("HOME", "/h"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let (kept, removed) = filter_environment(vars, &["AWS_PROFILE".to_string()]);
        let names: Vec<_> = kept.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["PATH", "AWS_PROFILE", "HOME"]);
        assert_eq!(removed, ["OPENAI_API_KEY", "GITHUB_TOKEN"]);
    }
}
