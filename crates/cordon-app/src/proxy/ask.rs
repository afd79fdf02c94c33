//! Who answers when a sandboxed command wants a host no rule speaks of: the person at the
//! terminal, an embedding program over a JSON-lines channel, or nobody (refused).
//!
//! The proxy asks once per host and port and one question at a time (`cordon_net::Proxy`);
//! this module only carries the question and the answer, and keeps "always" answers.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use cordon_net::{Answer, Asker, Host, Pending};
use serde::{Deserialize, Serialize};

use crate::lines::{MAX_LINE, read_line};

/// `--ask-domains`: who is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AskVia {
    /// The person at this terminal, on /dev/tty.
    Terminal,
    /// JSON lines on this inherited descriptor, both ways.
    Fd(i32),
    /// JSON lines: questions on standard output, answers on standard input (`cordon proxy`).
    Stdio,
    /// Nobody: unlisted hosts are refused.
    Deny,
}

impl std::str::FromStr for AskVia {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "terminal" => Ok(AskVia::Terminal),
            "stdio" => Ok(AskVia::Stdio),
            "deny" => Ok(AskVia::Deny),
            _ => match s.strip_prefix("fd:").map(str::parse::<i32>) {
                Some(Ok(fd)) if fd > 2 => Ok(AskVia::Fd(fd)),
                Some(_) => Err(format!(
                    "`{s}`: fd:N takes a descriptor number above 2 (0-2 are standard streams)"
                )),
                None => Err(format!("`{s}`: use terminal, fd:N, stdio or deny")),
            },
        }
    }
}

impl std::fmt::Display for AskVia {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskVia::Terminal => f.write_str("terminal"),
            AskVia::Fd(fd) => write!(f, "fd:{fd}"),
            AskVia::Stdio => f.write_str("stdio"),
            AskVia::Deny => f.write_str("deny"),
        }
    }
}

/// `$XDG_CONFIG_HOME/cordon/remembered-domains.toml`: the hosts answered "always". It sits in
/// cordon's settings directory, which sandboxed commands cannot write.
pub fn remembered_path() -> Option<PathBuf> {
    crate::user_policy_dir()?
        .parent()
        .map(|d| d.join("remembered-domains.toml"))
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RememberedFile {
    /// `--allow-domain` rules, `host:port`.
    #[serde(default)]
    allow: Vec<String>,
}

const REMEMBERED_HEADER: &str = "# Hosts answered \"always\" when cordon asked. Each is an --allow-domain rule for\n# every `cordon run` that uses the proxy; delete a line to be asked again.\n";

/// The remembered rules, checked: a broken file is an error naming it, not silence.
pub fn remembered(path: &Path) -> anyhow::Result<Vec<String>> {
    let text = match cordon_policy::load::read_settings_text(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let file: RememberedFile = toml::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e}\nfix the file or delete it (it only holds answers cordon saved)",
            path.display()
        )
    })?;
    for rule in &file.allow {
        rule.parse::<cordon_net::DomainRule>()
            .map_err(|e| anyhow::anyhow!("{}: allow: {e}", path.display()))?;
    }
    Ok(file.allow)
}

/// Adds `host:port` to the remembered rules, replacing the file whole so a reader never sees
/// half of it.
fn remember(path: &Path, host: &Host, port: u16) -> anyhow::Result<()> {
    let mut file = RememberedFile {
        allow: remembered(path)?,
    };
    let rule = format!("{host}:{port}");
    if file.allow.contains(&rule) {
        return Ok(());
    }
    file.allow.push(rule);
    let dir = path.parent().context("no directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let text = format!("{REMEMBERED_HEADER}{}", toml::to_string(&file)?);
    let tmp = dir.join(format!(".remembered-domains.{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))
}

/// Keeps an "always" answer, and says so when it cannot.
fn keep(remember_in: Option<&Path>, host: &Host, port: u16, answer: Answer) {
    if answer != Answer::Always {
        return;
    }
    let Some(path) = remember_in else { return };
    if let Err(e) = remember(path, host, port) {
        super::say(&format!(
            "cordon: could not remember {host}:{port} (allowed for this run only): {e:#}"
        ));
    }
}

/// The person at the terminal, asked on /dev/tty (not standard input, which is the command's).
#[derive(Debug)]
pub struct TerminalAsker {
    pub remember_in: Option<PathBuf>,
}

impl Asker for TerminalAsker {
    fn ask(&self, host: &Host, port: u16) -> Pending {
        let host = host.clone();
        let remember_in = self.remember_in.clone();
        Box::pin(async move {
            let asked = host.clone();
            let saved = remember_in.clone();
            let answer = tokio::task::spawn_blocking(move || {
                prompt(&asked, port, saved.as_deref()).unwrap_or(Answer::Deny)
            })
            .await
            .unwrap_or(Answer::Deny);
            keep(remember_in.as_deref(), &host, port, answer);
            answer
        })
    }
}

/// The terminal switched to hand over each key as it is typed, without echo, for one
/// question; put back as it was when dropped. Only from the terminal's foreground group:
/// from the background, changing its modes would stop this process (SIGTTOU), and the
/// question falls back to reading a line.
#[cfg(target_os = "linux")]
struct OneKey {
    /// Put back when the question is over.
    _before: crate::terminal::SavedModes,
}

#[cfg(target_os = "linux")]
impl OneKey {
    fn take(tty: &std::fs::File) -> Option<OneKey> {
        use rustix::termios::{LocalModes, OptionalActions, SpecialCodeIndex, tcsetattr};
        if !crate::terminal::in_foreground(tty) {
            return None;
        }
        let saved = crate::terminal::SavedModes::keep(tty)?;
        let mut raw = saved.found().clone();
        raw.local_modes
            .remove(LocalModes::ICANON | LocalModes::ECHO);
        raw.special_codes[SpecialCodeIndex::VMIN] = 1;
        raw.special_codes[SpecialCodeIndex::VTIME] = 0;
        tcsetattr(tty, OptionalActions::Now, &raw).ok()?;
        Some(OneKey { _before: saved })
    }
}

/// Elsewhere the question reads a line.
#[cfg(not(target_os = "linux"))]
struct OneKey;

#[cfg(not(target_os = "linux"))]
impl OneKey {
    fn take(_: &std::fs::File) -> Option<OneKey> {
        None
    }
}

/// One question on the terminal; anything but a clear yes is a no.
fn prompt(host: &Host, port: u16, saved: Option<&Path>) -> std::io::Result<Answer> {
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")?;
    let mut out = tty.try_clone()?;
    let keys = OneKey::take(&tty);
    let mut reader = BufReader::new(tty);
    let always = match saved {
        Some(p) => format!("[a]lways (saved in {})", p.display()),
        None => "[a]lways".to_string(),
    };
    write!(
        out,
        "\ncordon: the sandboxed command wants to reach {host}:{port}, which no rule allows.\n"
    )?;
    for _ in 0..3 {
        write!(
            out,
            "cordon: allow [o]nce (this run), {always}, or [d]eny? "
        )?;
        out.flush()?;
        let line = if keys.is_some() {
            // One key, as typed; Enter alone is no.
            let mut key = [0u8; 1];
            if reader.read(&mut key)? == 0 {
                return Ok(Answer::Deny);
            }
            let key = char::from(key[0]);
            writeln!(out, "{}", key.escape_default())?;
            key.to_string()
        } else {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(Answer::Deny);
            }
            line
        };
        match line.trim().to_ascii_lowercase().as_str() {
            "o" | "once" | "y" | "yes" => return Ok(Answer::Once),
            "a" | "always" => return Ok(Answer::Always),
            "" | "d" | "deny" | "n" | "no" => return Ok(Answer::Deny),
            _ => writeln!(out, "cordon: answer o, a or d")?,
        }
    }
    Ok(Answer::Deny)
}

/// A line the asking side writes.
#[derive(Debug, Serialize)]
struct Question<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: u64,
    host: &'a str,
    port: u16,
}

/// What a malformed answer line gets back.
#[derive(Debug, Serialize)]
struct ErrorLine {
    #[serde(rename = "type")]
    kind: &'static str,
    line: usize,
    error: String,
}

/// A line the answering side writes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reply {
    #[serde(rename = "type")]
    kind: String,
    #[serde(deserialize_with = "crate::bounds::question_id")]
    id: u64,
    answer: Answer,
}

/// Where JSON lines go; shared with whatever else writes to the same stream (the standalone
/// proxy's refusal lines), so lines never interleave.
pub type Lines = Arc<Mutex<Box<dyn Write + Send>>>;

pub fn write_line(out: &Lines, value: &impl Serialize) {
    if let Ok(line) = serde_json::to_string(value)
        && let Ok(mut out) = out.lock()
    {
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

/// An embedding program, over JSON lines: `{"type":"ask","id":N,"host":…,"port":…}` out,
/// `{"type":"answer","id":N,"answer":"once"|"always"|"deny"}` in.
pub struct JsonAsker {
    out: Lines,
    waiting: Arc<Mutex<HashMap<u64, tokio::sync::oneshot::Sender<Answer>>>>,
    next: AtomicU64,
    /// The answering side hung up: nothing more can be allowed.
    closed: Arc<AtomicBool>,
    remember_in: Option<PathBuf>,
}

impl std::fmt::Debug for JsonAsker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonAsker")
            .field("closed", &self.closed)
            .field("remember_in", &self.remember_in)
            .finish_non_exhaustive()
    }
}

impl JsonAsker {
    /// Reads answers from `input` on a thread of its own; a malformed line gets an error line
    /// on `out` naming it, and leaves open questions open.
    pub fn new(
        input: impl Read + Send + 'static,
        out: Lines,
        remember_in: Option<PathBuf>,
    ) -> Self {
        let asker = JsonAsker {
            out,
            waiting: Arc::default(),
            next: AtomicU64::new(1),
            closed: Arc::default(),
            remember_in,
        };
        let waiting = asker.waiting.clone();
        let closed = asker.closed.clone();
        let out = asker.out.clone();
        std::thread::spawn(move || {
            let mut input = BufReader::new(input);
            let mut buf = Vec::new();
            for n in 0.. {
                // Each line bounded, as every line cordon reads from an agent.
                let Ok(Some(complete)) = read_line(&mut input, &mut buf) else {
                    break;
                };
                let line = String::from_utf8_lossy(&buf);
                if complete && line.trim().is_empty() {
                    continue;
                }
                let parsed = if complete {
                    serde_json::from_str::<Reply>(&line).map_err(|e| e.to_string())
                } else {
                    Err(format!("longer than {MAX_LINE} bytes; not read"))
                };
                let error = match parsed {
                    Ok(r) if r.kind != "answer" => {
                        format!("type `{}`: only answers are read here", r.kind)
                    }
                    Ok(r) => match waiting.lock().ok().and_then(|mut w| w.remove(&r.id)) {
                        Some(tx) => {
                            let _ = tx.send(r.answer);
                            continue;
                        }
                        None => format!("id {}: no open question has this id", r.id),
                    },
                    Err(e) => format!(
                        "{e}; write {{\"type\":\"answer\",\"id\":N,\"answer\":\"once\"|\"always\"|\"deny\"}}"
                    ),
                };
                write_line(
                    &out,
                    &ErrorLine {
                        kind: "error",
                        line: n + 1,
                        error,
                    },
                );
            }
            // Dropping the senders answers every open question with a refusal.
            closed.store(true, Ordering::SeqCst);
            if let Ok(mut w) = waiting.lock() {
                w.clear();
            }
        });
        asker
    }
}

impl Asker for JsonAsker {
    fn ask(&self, host: &Host, port: u16) -> Pending {
        if self.closed.load(Ordering::SeqCst) {
            return Box::pin(async { Answer::Deny });
        }
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = tokio::sync::oneshot::channel();
        if let Ok(mut w) = self.waiting.lock() {
            w.insert(id, tx);
        }
        let name = host.to_string();
        write_line(
            &self.out,
            &Question {
                kind: "ask",
                id,
                host: &name,
                port,
            },
        );
        // Closed between the check and the insert: the reader will not see this question.
        if self.closed.load(Ordering::SeqCst) {
            return Box::pin(async { Answer::Deny });
        }
        let host = host.clone();
        let remember_in = self.remember_in.clone();
        Box::pin(async move {
            let answer = rx.await.unwrap_or(Answer::Deny);
            keep(remember_in.as_deref(), &host, port, answer);
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ask_via_reads_every_form_and_names_what_is_wrong() {
        assert_eq!("terminal".parse(), Ok(AskVia::Terminal));
        assert_eq!("fd:7".parse(), Ok(AskVia::Fd(7)));
        assert_eq!("deny".parse(), Ok(AskVia::Deny));
        for bad in ["fd:1", "fd:x", "tty", ""] {
            let e = bad.parse::<AskVia>().expect_err(bad);
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn always_answers_are_kept_once_and_a_broken_file_is_named() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("cordon").join("remembered-domains.toml");
        let host = Host::Name("example.com".into());
        remember(&path, &host, 443).expect("remember");
        remember(&path, &host, 443).expect("remember again");
        remember(&path, &host, 80).expect("remember");
        assert_eq!(
            remembered(&path).expect("read"),
            ["example.com:443", "example.com:80"]
        );
        std::fs::write(&path, "allow = [\"exa mple\"]\n").expect("write");
        let e = remembered(&path).expect_err("bad rule").to_string();
        assert!(e.contains("remembered-domains.toml"), "{e}");
        std::fs::write(&path, "alow = []\n").expect("write");
        let e = remembered(&path).expect_err("bad key").to_string();
        assert!(
            e.contains("remembered-domains.toml") && e.contains("alow"),
            "{e}"
        );
    }
}
