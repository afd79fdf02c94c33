//! The `CORDON_SANDBOX_*` variables' small languages, and what an engine's failure to pull
//! an image says about whose fault it is.

use std::path::PathBuf;

use super::ContainerError;

/// One extra mount: `from[:to[:opts]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub from: PathBuf,
    pub to: PathBuf,
    pub options: String,
}

fn err(var: &str, entry: &str, why: &str) -> ContainerError {
    ContainerError::Parse(format!("{var}: `{entry}`: {why}"))
}

/// `CORDON_SANDBOX_MOUNTS`: comma-separated `from[:to[:opts]]`; `to` defaults to `from`,
/// `opts` to `ro`. Both paths must be absolute (whether `from` exists is the builder's
/// question, which knows the host).
pub fn parse_mounts(text: &str) -> Result<Vec<Mount>, ContainerError> {
    const VAR: &str = "CORDON_SANDBOX_MOUNTS";
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let mut parts = entry.splitn(3, ':');
        let from = parts.next().unwrap_or_default();
        let to = parts.next().filter(|t| !t.is_empty()).unwrap_or(from);
        let options = parts.next().filter(|o| !o.is_empty()).unwrap_or("ro");
        for p in [from, to] {
            if !p.starts_with('/') {
                return Err(err(
                    VAR,
                    entry,
                    "paths must be absolute (write from[:to[:opts]])",
                ));
            }
        }
        if !options
            .split(',')
            .all(|o| !o.is_empty() && o.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        {
            return Err(err(VAR, entry, "options are words such as ro, rw or z"));
        }
        out.push(Mount {
            from: PathBuf::from(from),
            to: PathBuf::from(to),
            options: options.to_string(),
        });
    }
    Ok(out)
}

/// `CORDON_SANDBOX_ENV`: comma-separated `NAME=VALUE`.
pub fn parse_env(text: &str) -> Result<Vec<(String, String)>, ContainerError> {
    const VAR: &str = "CORDON_SANDBOX_ENV";
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, value)) = entry.split_once('=') else {
            return Err(err(VAR, entry, "write NAME=VALUE"));
        };
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(err(
                VAR,
                entry,
                "a name is letters, digits and `_`, not starting with a digit",
            ));
        }
        out.push((name.to_string(), value.to_string()));
    }
    Ok(out)
}

/// `CORDON_SANDBOX_FLAGS`: split as a POSIX shell would.
pub fn parse_flags(text: &str) -> Result<Vec<String>, ContainerError> {
    shlex::split(text).ok_or_else(|| {
        ContainerError::Parse(
            "CORDON_SANDBOX_FLAGS: unbalanced quotes or a trailing backslash".to_string(),
        )
    })
}

/// `CORDON_SANDBOX_PORTS`: comma- or space-separated `-p` values (`8080`, `8080:80`,
/// `127.0.0.1:8080:80/tcp`).
pub fn parse_ports(text: &str) -> Result<Vec<String>, ContainerError> {
    const VAR: &str = "CORDON_SANDBOX_PORTS";
    let mut out = Vec::new();
    for entry in text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|e| !e.is_empty())
    {
        let ok = entry
            .chars()
            .all(|c| c.is_ascii_hexdigit() || ":./-[]tcpudsx".contains(c))
            && entry
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit() || c == '[');
        if !ok {
            return Err(err(
                VAR,
                entry,
                "write PORT, HOST_PORT:PORT or ADDR:HOST_PORT:PORT",
            ));
        }
        out.push(entry.to_string());
    }
    Ok(out)
}

/// Whose fault a failed pull was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullFault {
    /// The name is malformed, or no such image exists, or it is private.
    Name,
    /// The registry could not be reached at all.
    Network,
    /// The registry answered with an error of its own.
    Registry,
}

impl PullFault {
    pub fn hint(self) -> &'static str {
        match self {
            PullFault::Name => {
                "check the image name (and, for a private image, log in with the engine first)"
            }
            PullFault::Network => {
                "the registry could not be reached: check the network, DNS and proxy settings, or build the image locally"
            }
            PullFault::Registry => "the registry refused or failed; try again later",
        }
    }
}

/// Reads an engine's pull error (Docker's and Podman's wording).
pub fn classify_pull_failure(stderr: &str) -> PullFault {
    let s = stderr.to_ascii_lowercase();
    const NAME: &[&str] = &[
        "invalid reference format",
        "manifest unknown",
        "not found",
        "repository does not exist",
        "pull access denied",
        "requested access to the resource is denied",
        "short-name",
        "no such image",
    ];
    const NETWORK: &[&str] = &[
        "dial tcp",
        "no such host",
        "lookup ",
        "i/o timeout",
        "connection refused",
        "network is unreachable",
        "tls handshake timeout",
        "timeout exceeded",
        "temporary failure in name resolution",
        "connection reset",
    ];
    if NETWORK.iter().any(|p| s.contains(p)) {
        PullFault::Network
    } else if NAME.iter().any(|p| s.contains(p)) {
        PullFault::Name
    } else {
        PullFault::Registry
    }
}
