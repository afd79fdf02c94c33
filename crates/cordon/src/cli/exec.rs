//! `cordon exec --jsonl`: decisions and sandboxed runs for an agent, one JSON request per line
//! on standard input, events per line on standard output (docs/PROTOCOL.md).

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use cordon_policy::{ApprovalMode, Decision};
use serde::Deserialize;
use serde_json::{Value, json};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use super::PolicyFlags;
use super::flags::{SandboxFlags, SessionFlags};
use super::wire::{MAX_LINE, parse_call, read_line};
use crate::exit;
use cordon_app::bounds;
use cordon_app::exec::{
    Control, Event, Input, Io, OutputLimit, RunOptions, Stream, TooManyCommands, Utf8Chunks,
    WorkDir,
};
use cordon_app::session::Session;
use cordon_app::threads;

#[derive(Debug, Args)]
pub struct ExecArgs {
    #[command(flatten)]
    policy: PolicyFlags,
    #[command(flatten)]
    sandbox: SandboxFlags,
    #[command(flatten)]
    session: SessionFlags,
    /// Speak JSON lines: requests on standard input, events on standard output
    /// (docs/PROTOCOL.md). The only protocol so far, so it must be given.
    #[arg(long)]
    jsonl: bool,
}

/// One request line. Each names the run (or question) it is about by `id`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
enum Request {
    Run {
        id: String,
        command: String,
        #[serde(default)]
        mode: Option<String>,
        #[serde(default)]
        cwd: Option<PathBuf>,
        #[serde(default, deserialize_with = "pty")]
        pty: Option<Pty>,
        #[serde(default)]
        stdin: Option<String>,
        #[serde(default)]
        interactive: bool,
        #[serde(default, deserialize_with = "bounds::request_timeout")]
        timeout: Option<f64>,
        #[serde(default, deserialize_with = "bounds::request_max_output")]
        max_output: Option<usize>,
        #[serde(default = "yes")]
        stream: bool,
        /// Run outside cordon's sandbox, if the settings allow asking for that
        /// (`sandbox.allow_unsandboxed_commands`).
        #[serde(default)]
        unsandboxed: bool,
    },
    Cancel {
        id: String,
    },
    Answer {
        id: String,
        allow: bool,
    },
    Input {
        id: String,
        #[serde(default)]
        data: Option<String>,
        #[serde(default)]
        eof: bool,
    },
    Resize {
        id: String,
        #[serde(deserialize_with = "bounds::terminal_rows")]
        rows: u16,
        #[serde(deserialize_with = "bounds::terminal_cols")]
        cols: u16,
    },
}

fn yes() -> bool {
    true
}

/// `"pty": true` (24 × 80) or `"pty": {"rows": R, "cols": C}`.
#[derive(Debug)]
enum Pty {
    On(bool),
    Size { rows: u16, cols: u16 },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TerminalSize {
    #[serde(deserialize_with = "bounds::terminal_rows")]
    rows: u16,
    #[serde(deserialize_with = "bounds::terminal_cols")]
    cols: u16,
}

/// Read by hand rather than as an untagged enum, which would drop the error naming the field.
fn pty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Pty>, D::Error> {
    use serde::de::Error;
    match Option::<Value>::deserialize(d)? {
        None => Ok(None),
        Some(Value::Bool(on)) => Ok(Some(Pty::On(on))),
        Some(size @ Value::Object(_)) => TerminalSize::deserialize(size)
            .map(|s| {
                Some(Pty::Size {
                    rows: s.rows,
                    cols: s.cols,
                })
            })
            .map_err(|e| D::Error::custom(format!("`pty`: {e}"))),
        Some(other) => Err(D::Error::custom(format!(
            "`pty` must be true, false or {{\"rows\": R, \"cols\": C}}, not {other}"
        ))),
    }
}

/// What a person (through the agent) said about an `ask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Allow,
    Deny,
    /// The request was cancelled while waiting.
    Cancel,
    /// Input ended: nobody is left to answer.
    Nobody,
}

/// A run from its request to its `exited` event.
#[derive(Debug)]
enum Slot {
    Asking(Sender<Answer>),
    Running {
        control: Option<Control>,
        /// Cancel asked for before the run had started.
        cancel: bool,
    },
}

struct Shared {
    session: Session,
    /// The session's workspace (the directory `exec` started in): every run's `cwd` must lie
    /// inside it.
    workspace: WorkDir,
    slots: Mutex<HashMap<String, Slot>>,
    /// Signalled whenever a slot goes, so the end of input can wait for the last run.
    slot_gone: Condvar,
    events: SyncSender<Value>,
    /// Threads that still have events to send (a run's, or a question's).
    busy: Mutex<usize>,
    idle: Condvar,
    /// Whoever ends cordon (end of input, or a signal) waits for it to have written out.
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Counts a thread as busy until dropped, after its last event.
struct Busy(Arc<Shared>);

impl Busy {
    fn new(shared: &Arc<Shared>) -> Busy {
        *shared.busy.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Busy(Arc::clone(shared))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.busy.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        self.0.idle.notify_all();
    }
}

impl Shared {
    fn send(&self, event: Value) {
        // The writer only goes when standard output is gone; nothing is left to tell then.
        let _ = self.events.send(event);
    }

    /// Once no run is left: waits for the threads still sending events, then for the writer
    /// to have written them all; no longer than `patience`, if given (a client that stopped
    /// reading must not keep a signalled cordon alive).
    fn drain(&self, patience: Option<Duration>) {
        let deadline = patience.map(|p| std::time::Instant::now() + p);
        let late = || deadline.is_some_and(|d| std::time::Instant::now() >= d);
        // A run's thread sends `exited` after its slot has gone.
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        while *busy > 0 && !late() {
            busy = match patience {
                Some(p) => {
                    self.idle
                        .wait_timeout(busy, p)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.idle.wait(busy).unwrap_or_else(|e| e.into_inner()),
            };
        }
        drop(busy);
        // Other threads keep handles on the queue, so the writer is told to stop; with a
        // deadline, without blocking on a full queue.
        match patience {
            None => self.send(Value::Null),
            Some(_) => {
                let _ = self.events.try_send(Value::Null);
            }
        }
        let writer = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = writer {
            while !w.is_finished() && !late() {
                std::thread::sleep(Duration::from_millis(10));
            }
            if w.is_finished() {
                let _ = w.join();
            }
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn remove(&self, id: &str) {
        self.slots().remove(id);
        self.slot_gone.notify_all();
    }

    /// The `exited` event of a run that never started.
    fn refused(&self, id: &str, cancelled: bool, reason: &str) {
        self.remove(id);
        self.send(json!({
            "type": "exited", "id": id, "refused": true, "cancelled": cancelled,
            "exit_code": null, "reason": reason,
        }));
    }
}

/// Events wait here for the writer; when standard output is slow, runs slow down (their
/// readers block) rather than cordon holding their output.
const EVENT_QUEUE: usize = 256;

pub fn run(args: ExecArgs) -> anyhow::Result<u8> {
    if !args.jsonl {
        anyhow::bail!("cordon exec speaks JSON lines only so far; pass --jsonl (docs/PROTOCOL.md)");
    }
    let session = Session::new(
        args.policy.config(),
        args.session.apply(args.sandbox.sources()?),
        Default::default(),
    )?;
    let (events, queue) = sync_channel::<Value>(EVENT_QUEUE);
    let writer = std::thread::spawn(move || write_events(queue));
    let workspace = WorkDir::current().context("cannot open the current directory")?;
    let shared = Arc::new(Shared {
        session,
        workspace,
        slots: Mutex::new(HashMap::new()),
        slot_gone: Condvar::new(),
        events,
        busy: Mutex::new(0),
        idle: Condvar::new(),
        writer: Mutex::new(Some(writer)),
    });

    // Ended by a signal (the agent went away): every run is cancelled, so that no sandbox is
    // left behind, and cordon leaves once they have ended.
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGHUP, SIGTERM])
        .context("cannot handle signals")?;
    {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let mut slots = shared.slots();
                for slot in slots.values_mut() {
                    match slot {
                        Slot::Asking(tx) => {
                            let _ = tx.send(Answer::Cancel);
                        }
                        Slot::Running {
                            control: Some(c), ..
                        } => c.cancel(),
                        Slot::Running { cancel, .. } => *cancel = true,
                    }
                }
                while !slots.is_empty() {
                    slots = shared
                        .slot_gone
                        .wait(slots)
                        .unwrap_or_else(|e| e.into_inner());
                }
                drop(slots);
                // Every run's `exited` is told before cordon goes.
                shared.drain(Some(Duration::from_secs(2)));
                shared.session.end();
                std::process::exit(128 + signal);
            }
        });
    }

    let mut input = std::io::stdin().lock();
    let mut line = Vec::new();
    let mut n = 0;
    let defaults = args.policy.config().options();
    loop {
        n += 1;
        let Some(complete) = read_line(&mut input, &mut line)? else {
            break;
        };
        if !complete {
            shared.send(error_event(
                None,
                n,
                &format!("longer than {MAX_LINE} bytes; not read"),
            ));
            continue;
        }
        let text = match std::str::from_utf8(&line) {
            Ok(t) => t.trim(),
            Err(e) => {
                shared.send(error_event(None, n, &format!("not UTF-8: {e}")));
                continue;
            }
        };
        if text.is_empty() {
            continue;
        }
        if let Err((id, message)) = handle(&shared, &defaults, text) {
            shared.send(error_event(id.as_deref(), n, &message));
        }
    }

    // Nobody is left to answer questions; runs in flight finish and report.
    let mut slots = shared.slots();
    for slot in slots.values() {
        if let Slot::Asking(tx) = slot {
            let _ = tx.send(Answer::Nobody);
        }
    }
    while !slots.is_empty() {
        slots = shared
            .slot_gone
            .wait(slots)
            .unwrap_or_else(|e| e.into_inner());
    }
    drop(slots);
    shared.drain(None);
    shared.session.end();
    Ok(exit::OK)
}

fn error_event(id: Option<&str>, line: usize, message: &str) -> Value {
    let mut e =
        json!({ "type": "error", "line": line, "message": format!("line {line}: {message}") });
    if let Some(id) = id {
        e["id"] = json!(id);
    }
    e
}

/// Writes events as they come, flushing when no more are waiting.
fn write_events(queue: Receiver<Value>) {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    // `null` is the end.
    while let Ok(event) = queue.recv() {
        if event.is_null() || writeln!(out, "{event}").is_err() {
            let _ = out.flush();
            return;
        }
        let mut more = true;
        while more {
            match queue.try_recv() {
                Ok(Value::Null) => {
                    let _ = out.flush();
                    return;
                }
                Ok(event) => {
                    if writeln!(out, "{event}").is_err() {
                        return;
                    }
                }
                Err(_) => more = false,
            }
        }
        if out.flush().is_err() {
            return;
        }
    }
}

type Refusal = (Option<String>, String);

/// One request line; an error names the id when the line had one.
fn handle(
    shared: &Arc<Shared>,
    defaults: &cordon_policy::CheckOptions,
    text: &str,
) -> Result<(), Refusal> {
    let mut value: Value =
        serde_json::from_str(text).map_err(|e| (None, format!("not valid JSON: {e}")))?;
    let id = value.get("id").and_then(Value::as_str).map(String::from);
    let fail = |message: String| (id.clone(), message);
    let Some(object) = value.as_object_mut() else {
        return Err(fail("a request must be a JSON object".into()));
    };
    const TYPES: &str = "check, run, cancel, answer, input, resize";
    match (object.get("type"), &id) {
        (None, _) => return Err(fail(format!("missing `type`: one of {TYPES}"))),
        (Some(Value::String(t)), _) if !TYPES.split(", ").any(|known| known == t.as_str()) => {
            return Err(fail(format!("unknown type `{t}`: one of {TYPES}")));
        }
        (_, None) => return Err(fail("missing `id`: a string naming the request".into())),
        _ => {}
    }
    if object.get("type") == Some(&json!("check")) {
        let id = id.clone().unwrap_or_default();
        object.remove("type");
        object.remove("id");
        let (call, mode) = parse_call(value, defaults.mode).map_err(fail)?;
        let mut opts = *defaults;
        opts.mode = mode;
        let outcome = shared.session.check(&call, opts).map_err(fail)?;
        shared.send(decision_event(&id, &outcome));
        return Ok(());
    }
    let request: Request =
        serde_json::from_value(value).map_err(|e| fail(format!("not a valid request: {e}")))?;
    match request {
        Request::Run {
            id,
            command,
            mode,
            cwd,
            pty,
            stdin,
            interactive,
            timeout,
            max_output,
            stream,
            unsandboxed,
        } => {
            let mode = match mode {
                None => defaults.mode,
                Some(m) => ApprovalMode::parse(&m).ok_or_else(|| {
                    fail(format!(
                        "unknown mode `{m}`; use default, autoEdit, plan or yolo"
                    ))
                })?,
            };
            let timeout = timeout
                .map(|t| bounds::timeout(t).map_err(|e| fail(format!("`timeout` {e}"))))
                .transpose()?;
            let io = match (pty, stdin, interactive) {
                (Some(Pty::On(true)), None, _) => Io::Terminal { rows: 24, cols: 80 },
                (Some(Pty::Size { rows, cols }), None, _) => Io::Terminal { rows, cols },
                (Some(Pty::On(true) | Pty::Size { .. }), Some(_), _) => {
                    return Err(fail(
                        "`stdin` is for pipes; on a `pty` send `input` requests instead".into(),
                    ));
                }
                (_, Some(_), true) => {
                    return Err(fail(
                        "give either `stdin` (all input at once) or `interactive` (input requests later), not both".into(),
                    ));
                }
                (_, Some(s), false) => Io::Pipes(Input::Bytes(s.into_bytes())),
                (_, None, true) => Io::Pipes(Input::Open),
                (_, None, false) => Io::Pipes(Input::Null),
            };
            let keep = match max_output {
                None => OutputLimit::default(),
                Some(m) => OutputLimit {
                    head: m / 2,
                    tail: m - m / 2,
                },
            };
            // Checked and opened before anything is decided: the run starts in this very
            // directory, and a `cwd` outside the workspace would make it writable.
            let cwd = cwd
                .map(|c| shared.workspace.beneath(&c))
                .transpose()
                .map_err(|e| fail(format!("`cwd` {e}")))?;
            // Only deciding waits for files that load: a cancel must work while they do not.
            let running = !shared.slots().is_empty();
            let mut check = *defaults;
            check.mode = mode;
            let verdict = shared
                .session
                .decide(&command, unsandboxed, check, running)
                .map_err(|e| (Some(id.clone()), e))?;
            let opts = RunOptions {
                cwd,
                io,
                // Without one of its own, the settings' limit as they are now: edits to them
                // apply to the next run.
                timeout: timeout.or(verdict.timeout),
                keep,
                ..verdict.options(&command)
            };
            let outcome = verdict.outcome;
            {
                let mut slots = shared.slots();
                if slots.contains_key(&id) {
                    return Err((
                        Some(id.clone()),
                        format!("id `{id}` is in use by a run that has not ended; pick another"),
                    ));
                }
                // Refused here rather than queued: the agent hears at once, and decides
                // itself which command to run when one has ended.
                let limit = shared.session.limits().max_commands;
                if slots.len() as u64 >= limit {
                    return Err((
                        Some(id.clone()),
                        format!(
                            "this session has as many runs in flight as it takes at once ({limit}: `limits.max_commands` in cordon.toml, or --max-commands), counting those waiting for an answer; this one was not run: send it again once one has exited"
                        ),
                    ));
                }
                // Taken now, so a cancel that comes before the run starts finds it.
                slots.insert(
                    id.clone(),
                    Slot::Running {
                        control: None,
                        cancel: false,
                    },
                );
            }
            let mut decision = decision_event(&id, &outcome);
            if let Some(d) = decision.as_object_mut() {
                d.extend(opts.placement.fields());
            }
            shared.send(decision);
            match outcome.decision {
                Decision::Deny => shared.refused(&id, false, &outcome.reason),
                Decision::Allow => {
                    let busy = Busy::new(shared);
                    // A kept thread: one made and ended per command cost more than the
                    // command's own work here (see `cordon_app::threads`).
                    threads::spawn(move || start_and_report(&busy.0, &id, &opts, stream));
                }
                Decision::AskUser => {
                    let (tx, rx) = channel();
                    shared.slots().insert(id.clone(), Slot::Asking(tx));
                    let mut ask = json!({
                        "type": "ask", "id": id, "tool": "run_shell_command",
                        "args": { "command": command },
                        "rule": outcome.rule, "reason": outcome.reason,
                    });
                    // Where it runs is part of what is approved: that directory is writable.
                    if let Some(c) = &opts.cwd {
                        ask["args"]["cwd"] = json!(c.shown);
                    }
                    // Whoever answers should know whether a yes lets it out of the sandbox.
                    if let Some(a) = ask.as_object_mut() {
                        a.extend(opts.placement.fields());
                    }
                    shared.send(ask);
                    let busy = Busy::new(shared);
                    std::thread::spawn(move || {
                        let shared = &busy.0;
                        let answer = rx.recv().unwrap_or(Answer::Nobody);
                        match answer {
                            Answer::Allow => {
                                shared.slots().insert(
                                    id.clone(),
                                    Slot::Running {
                                        control: None,
                                        cancel: false,
                                    },
                                );
                                start_and_report(shared, &id, &opts, stream);
                            }
                            Answer::Deny => shared.refused(&id, false, "the user said no"),
                            Answer::Cancel => {
                                shared.refused(&id, true, "cancelled while waiting for an answer")
                            }
                            Answer::Nobody => shared.refused(
                                &id,
                                false,
                                "input ended before an answer came; nobody can answer, so no",
                            ),
                        }
                    });
                }
            }
            Ok(())
        }
        Request::Cancel { id } => {
            let mut slots = shared.slots();
            match slots.get_mut(&id) {
                Some(Slot::Asking(tx)) => {
                    let _ = tx.send(Answer::Cancel);
                }
                Some(Slot::Running { control, cancel }) => match control {
                    Some(c) => c.cancel(),
                    None => *cancel = true,
                },
                None => return Err((Some(id), "no run with this id is in flight".into())),
            }
            Ok(())
        }
        Request::Answer { id, allow } => {
            let slots = shared.slots();
            match slots.get(&id) {
                Some(Slot::Asking(tx)) => {
                    let _ = tx.send(if allow { Answer::Allow } else { Answer::Deny });
                    Ok(())
                }
                _ => Err((
                    Some(id),
                    "no question with this id is waiting for an answer".into(),
                )),
            }
        }
        Request::Input { id, data, eof } => {
            let control = running(shared, &id)?;
            if let Some(d) = data {
                control
                    .send_input(d.into_bytes())
                    .map_err(|e| (Some(id.clone()), e.to_string()))?;
            }
            if eof {
                control
                    .close_input()
                    .map_err(|e| (Some(id.clone()), e.to_string()))?;
            }
            Ok(())
        }
        Request::Resize { id, rows, cols } => {
            let control = running(shared, &id)?;
            control
                .resize(rows, cols)
                .map_err(|e| (Some(id), e.to_string()))
        }
    }
}

/// The control of a run that has started.
fn running(shared: &Shared, id: &str) -> Result<Control, Refusal> {
    match shared.slots().get(id) {
        Some(Slot::Running {
            control: Some(c), ..
        }) => Ok(c.clone()),
        Some(_) => Err((Some(id.into()), "this run has not started yet".into())),
        None => Err((Some(id.into()), "no run with this id is in flight".into())),
    }
}

fn decision_event(id: &str, outcome: &cordon_policy::Outcome) -> Value {
    json!({
        "type": "decision", "id": id, "decision": outcome.decision,
        "rule": outcome.rule, "reason": outcome.reason,
    })
}

/// On a thread of its own: starts the run, streams its output, and reports how it ended.
fn start_and_report(shared: &Arc<Shared>, id: &str, opts: &RunOptions, stream: bool) {
    let text = Arc::new(Mutex::new([Utf8Chunks::default(), Utf8Chunks::default()]));
    let sink = {
        let shared = Arc::clone(shared);
        let text = Arc::clone(&text);
        let id = id.to_string();
        Arc::new(move |event: Event<'_>| match event {
            Event::Started { pid, control } => {
                if let Some(Slot::Running { control: c, cancel }) = shared.slots().get_mut(&id) {
                    *c = Some(control.clone());
                    if *cancel {
                        control.cancel();
                    }
                }
                shared.send(json!({ "type": "started", "id": id, "pid": pid }))
            }
            Event::Output { stream: s, data } if stream => {
                let chunk = text.lock().unwrap_or_else(|e| e.into_inner())[s as usize].push(data);
                if !chunk.is_empty() {
                    shared.send(output_event(&id, s, chunk));
                }
            }
            Event::Output { .. } => {}
        })
    };
    let run = match shared.session.start(opts, sink) {
        Ok(run) => run,
        Err(e) if TooManyCommands::within(&e).is_some() => {
            shared.refused(id, false, &e.to_string());
            return;
        }
        Err(e) => {
            shared.refused(id, false, &format!("cannot start `cordon run`: {e}"));
            return;
        }
    };
    let result = run.wait();
    for (i, s) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
        let rest = text.lock().unwrap_or_else(|e| e.into_inner())[i].finish();
        if stream && !rest.is_empty() {
            shared.send(output_event(id, s, rest));
        }
    }
    for v in &result.violations {
        let mut event = json!({ "type": "violation", "id": id });
        if let (Some(e), Some(v)) = (event.as_object_mut(), v.as_object()) {
            e.extend(v.clone());
        }
        shared.send(event);
    }
    let mut event = json!({ "type": "exited", "id": id, "refused": false });
    if let (Some(e), Ok(Value::Object(r))) = (event.as_object_mut(), serde_json::to_value(&result))
    {
        e.extend(r);
    }
    // The id is free again before the client hears the run ended.
    shared.remove(id);
    shared.send(event);
}

fn output_event(id: &str, stream: Stream, data: String) -> Value {
    json!({ "type": "output", "id": id, "stream": stream, "data": data })
}
