//! `cordon mcp`: an MCP server on standard input and output that any MCP-capable agent can use
//! as its toolbox. Every call is decided by the policy engine under the tool name the policy
//! files use (Gemini CLI's); `ask_user` becomes an elicitation when the client can answer one
//! (an `elicitation/create` request up to protocol 2025-11-25, an input-required result in
//! 2026-07-28), and a refusal when it cannot. `run_shell_command` runs in the sandbox through
//! the executor, its output streamed as progress notifications and stopped by
//! `notifications/cancelled`; the file tools run here, inside the workspace (files.rs). With
//! `--backend docker|podman` the whole server runs in a container instead (worker.rs).

mod input;
mod worker;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use cordon_policy::{CheckOptions, Decision, Outcome, ToolCall};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, Implementation,
    InputRequest, InputRequests, InputRequiredResult, InputResponses, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use super::PolicyFlags;
use super::flags::{BackendFlags, SandboxFlags, SessionFlags};
use crate::exit;
use cordon_app::config::Sources;
use cordon_app::exec::{
    Control, Event, Input, Io, OutputLimit, RunOptions, TooManyCommands, Utf8Chunks,
};
use cordon_app::policy::PolicyConfig;
use cordon_app::run::backend::{Backend, BackendChoice};
use cordon_app::session::Session;
use cordon_app::workspace::{self as files, Workspace};

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    policy: PolicyFlags,
    #[command(flatten)]
    sandbox: SandboxFlags,
    #[command(flatten)]
    session: SessionFlags,
    /// `--backend docker|podman|container` serves from inside a container, `--backend
    /// kubernetes` from a pod whose image holds cordon: every tool, the file tools too, runs
    /// there (see `cordon run --backend`).
    #[command(flatten)]
    backend: BackendFlags,
    /// This is the server cordon started inside its container, which is the sandbox; its
    /// request comes first on standard input.
    #[arg(long, hide = true)]
    worker: bool,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunShellCommand {
    /// The shell command line, run with /bin/sh -c in cordon's sandbox: it may write only the
    /// working directory and /tmp, and reach the network only through cordon's proxy.
    command: String,
    /// What the command is for, in a few words (shown to the person asked about it).
    #[serde(default)]
    description: Option<String>,
    /// The directory to run in, inside the workspace (default: the workspace).
    #[serde(default)]
    dir_path: Option<String>,
    /// Run outside cordon's sandbox: refused unless the user's settings allow asking for it
    /// (`sandbox.allow_unsandboxed_commands`). Only for a command the sandbox stops from
    /// working; the policy still decides.
    #[serde(default)]
    unsandboxed: bool,
    /// Where it runs, as the settings place it (worked out by cordon, not given).
    #[serde(skip)]
    #[schemars(skip)]
    placement: cordon_app::exec::Placement,
    /// The settings' time limit when it was decided (worked out by cordon, not given).
    #[serde(skip)]
    #[schemars(skip)]
    timeout: Option<Duration>,
}

/// A call's arguments, read as its tool takes them.
enum Parsed {
    Shell(RunShellCommand),
    Read(files::ReadFile),
    Write(files::WriteFile),
    Replace(files::Replace),
    List(files::ListDirectory),
    Glob(files::Glob),
    Search(files::SearchFileContent),
}

fn parse(name: &str, args: Value) -> Result<Parsed, String> {
    let bad = |e: serde_json::Error| format!("bad arguments for `{name}`: {e}");
    Ok(match name {
        "run_shell_command" => Parsed::Shell(serde_json::from_value(args).map_err(bad)?),
        "read_file" => Parsed::Read(serde_json::from_value(args).map_err(bad)?),
        "write_file" => Parsed::Write(serde_json::from_value(args).map_err(bad)?),
        "replace" => Parsed::Replace(serde_json::from_value(args).map_err(bad)?),
        "list_directory" => Parsed::List(serde_json::from_value(args).map_err(bad)?),
        "glob" => Parsed::Glob(serde_json::from_value(args).map_err(bad)?),
        "search_file_content" => Parsed::Search(serde_json::from_value(args).map_err(bad)?),
        _ => {
            return Err(format!(
                "cordon has no tool `{name}`; it serves {}",
                TOOL_NAMES.join(", ")
            ));
        }
    })
}

/// The agents' hooks let exactly these through to be decided here.
const TOOL_NAMES: &[&str] = cordon_app::agents::OWN_TOOLS;

/// The tools, named and shaped as Gemini CLI's, so that the same policy files govern both.
fn tools() -> Vec<Tool> {
    let read_only = || ToolAnnotations::new().read_only(true);
    let edits = || {
        ToolAnnotations::new()
            .read_only(false)
            .destructive(true)
            .open_world(false)
    };
    let empty = || Arc::new(serde_json::Map::new());
    vec![
        Tool::new(
            "run_shell_command",
            "Run a shell command in cordon's sandbox, if cordon's policy allows it (it may ask the user). Output streams as progress notifications; cancelling the request stops the command.",
            empty(),
        )
        .with_input_schema::<RunShellCommand>()
        .with_annotations(ToolAnnotations::new().destructive(true).open_world(true)),
        Tool::new("read_file", "Read a text file in the workspace, up to 2000 lines at a time.", empty())
            .with_input_schema::<files::ReadFile>()
            .with_annotations(read_only()),
        Tool::new("write_file", "Write a whole file in the workspace, creating it if missing.", empty())
            .with_input_schema::<files::WriteFile>()
            .with_annotations(edits()),
        Tool::new(
            "replace",
            "Replace exact text in a file in the workspace; the number of occurrences must be as expected.",
            empty(),
        )
        .with_input_schema::<files::Replace>()
        .with_annotations(edits()),
        Tool::new("list_directory", "List a directory in the workspace.", empty())
            .with_input_schema::<files::ListDirectory>()
            .with_annotations(read_only()),
        Tool::new("glob", "Find files in the workspace whose path matches a glob.", empty())
            .with_input_schema::<files::Glob>()
            .with_annotations(read_only()),
        Tool::new(
            "search_file_content",
            "Search the text files of the workspace for lines matching a regular expression.",
            empty(),
        )
        .with_input_schema::<files::SearchFileContent>()
        .with_annotations(read_only()),
    ]
}

/// The runs in flight, so that none outlives the server.
#[derive(Debug, Default)]
struct Runs {
    next: AtomicU64,
    controls: Mutex<HashMap<u64, Control>>,
}

impl Runs {
    fn controls(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Control>> {
        self.controls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Cancels every run and waits until each has ended.
    fn stop_all(&self) {
        let all: Vec<Control> = self.controls().values().cloned().collect();
        for c in &all {
            c.cancel();
        }
        for c in &all {
            c.wait_until_ended();
        }
    }
}

#[derive(Debug, Clone)]
struct Server {
    session: Arc<Session>,
    options: CheckOptions,
    workspace: Arc<Workspace>,
    runs: Arc<Runs>,
    /// Questions asked in the multi-round-trip form (2026-07-28), by the `requestState` the
    /// client echoes with its answer: each is the call it is about, and is answered once.
    asked: Arc<Mutex<HashMap<String, String>>>,
    next_question: Arc<AtomicU64>,
    /// The container this server runs in (`--worker`): it is the sandbox, so commands run
    /// in it directly.
    container: Option<String>,
    /// Whether the client has closed standard input: then nobody can answer a question.
    input_ended: input::Ended,
}

pub fn run(args: McpArgs) -> anyhow::Result<u8> {
    if args.worker {
        let (request, name) = worker::inside()?;
        return serve(
            request.policy,
            request.sources,
            BackendChoice::default(),
            Some(name),
        );
    }
    let policy = args.policy.config();
    let sources = args.session.apply(args.sandbox.sources()?);
    // `sandbox.backend` and `[container]` in the settings choose as for `cordon run` (a
    // project trusted by the policy's `--trust-workspace` may choose too).
    let config = sources.resolve_trusting(policy.trust_workspace)?;
    let mut backend = args.backend.choice();
    backend.settle(&config)?;
    backend.validate()?;
    if backend.container_engine().is_some() || backend.backend() == Backend::Kubernetes {
        return worker::launch(&policy, &sources, backend);
    }
    if backend.dry_run {
        bail!(
            "--dry-run shows the engine's command for --backend docker, podman or container, and the manifests for --backend kubernetes"
        );
    }
    serve(policy, sources, backend, None)
}

/// Serves MCP on standard input and output until the client goes; `container` names the one
/// this server is the worker of.
fn serve(
    policy: PolicyConfig,
    sources: Sources,
    backend: BackendChoice,
    container: Option<String>,
) -> anyhow::Result<u8> {
    // The walls each command's sandbox will have, for the file tools that work outside it.
    let (plan, live) = cordon_app::plan::walls(&sources.resolve()?)?;
    if container.is_none() {
        // In a container, the launcher has said them already.
        plan.warn();
    }
    let mut read_only = plan.read_only;
    // cordon's own settings, also where they do not exist yet (the sandbox makes them then).
    read_only.extend(plan.own_settings);
    let walls = files::Walls {
        hidden: plan.hidden,
        reopened: plan.reopened,
        read_only,
        live,
    };
    let options = policy.options();
    // Each command's run reads the settings again as it starts, with the backend this
    // server settled on; the policy and settings are followed as they change.
    let session = Session::new(policy, sources, backend)?;
    let environment = session
        .decider(false)
        .map_err(anyhow::Error::msg)?
        .engine
        .environment()
        .clone();
    let workspace = Workspace::new(&environment, walls);
    let runs = Arc::new(Runs::default());
    let (stdin, input_ended) = input::Watched::new(tokio::io::stdin());
    let session = Arc::new(session);
    let server_session = Arc::clone(&session);
    let server = Server {
        session,
        options,
        workspace: Arc::new(workspace),
        runs: Arc::clone(&runs),
        asked: Arc::default(),
        next_question: Arc::default(),
        container,
        input_ended,
    };

    // Ended by a signal (the agent went away): every run is cancelled, so that no sandbox is
    // left behind, and cordon leaves once they have ended.
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGHUP, SIGTERM])
        .context("cannot handle signals")?;
    {
        let runs = Arc::clone(&runs);
        let session = Arc::clone(&server_session);
        std::thread::spawn(move || {
            if let Some(signal) = signals.forever().next() {
                runs.stop_all();
                session.end();
                std::process::exit(128 + signal);
            }
        });
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let served = rt.block_on(async {
        let service = server
            .serve((stdin, tokio::io::stdout()))
            .await
            .context("the MCP session did not start")?;
        service.waiting().await.context("the MCP session failed")?;
        anyhow::Ok(())
    });
    // The client has gone: what still runs is cancelled (rmcp cancels its requests at the end
    // of input) and waited for, so no sandbox outlives the server.
    runs.stop_all();
    rt.shutdown_timeout(Duration::from_secs(1));
    server_session.end();
    served?;
    Ok(exit::OK)
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cordon", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "cordon decides every call with its policy (allow, deny, or ask the user) and runs shell commands in its sandbox. A refused call says why; do not try to get around it.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        Ok(self.call(request, context).await)
    }
}

/// Text for a question, quoted and cut short: the person asked should see what matters, not a
/// whole file.
fn shorten(text: &str) -> String {
    const MOST: usize = 300;
    match text.char_indices().nth(MOST) {
        Some((i, _)) => format!("`{}…` ({} bytes)", &text[..i], text.len()),
        None => format!("`{text}`"),
    }
}

/// The question about a call, as an elicitation form with nothing to fill in: accepting it is
/// the yes.
fn question(call: &ToolCall, parsed: &Parsed, outcome: &Outcome) -> ElicitRequestParams {
    let what = match parsed {
        Parsed::Shell(a) => {
            let mut s = format!("run `{}`", a.command);
            if let Some(d) = &a.description {
                s.push_str(&format!(" ({d})"));
            }
            if let Some(d) = &a.dir_path {
                s.push_str(&format!(" in {d}"));
            }
            if let cordon_app::exec::Placement::Outside { why } = &a.placement {
                s.push_str(&format!(", OUTSIDE cordon's sandbox ({why}),"));
            }
            s
        }
        Parsed::Write(a) => format!("write `{}` ({} bytes)", a.file_path, a.content.len()),
        Parsed::Replace(a) => format!(
            "edit `{}`, replacing {} with {}",
            a.file_path,
            shorten(&a.old_string),
            shorten(&a.new_string)
        ),
        _ => format!(
            "call {} with {}",
            call.name,
            shorten(&call.args.to_string())
        ),
    };
    let message = format!(
        "cordon: allow the agent to {what}?\nWhy you are asked: {}",
        outcome.reason
    );
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: ElicitationSchema::new(BTreeMap::new()),
    }
}

fn cannot_ask(outcome: &Outcome) -> String {
    format!(
        "the policy says to ask the user ({}), and this MCP client cannot ask (it did not declare elicitation support), so no",
        outcome.reason
    )
}

/// A call cordon would not make, and why, as the model should read it.
fn refused(tool: &str, reason: &str, outcome: Option<&Outcome>) -> CallToolResult {
    let mut r = CallToolResult::error(vec![ContentBlock::text(format!(
        "cordon refused `{tool}`: {reason}"
    ))]);
    r.structured_content = Some(json!({
        "refused": true,
        "reason": reason,
        "decision": outcome.map(|o| o.decision),
        "rule": outcome.and_then(|o| o.rule.as_ref()),
    }));
    r
}

impl Server {
    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let name = request.name.to_string();
        let answers = request.input_responses;
        let state = request.request_state;
        let args = Value::Object(request.arguments.unwrap_or_default());
        // Arguments are read first: nobody is asked about a call that cannot be made.
        let mut parsed = match parse(&name, args.clone()) {
            Ok(p) => p,
            Err(e) => return CallToolResult::error(vec![ContentBlock::text(e)]).into(),
        };
        let decider = match self.session.decider(false) {
            Ok(d) => d,
            Err(why) => return refused(&name, &why, None).into(),
        };
        let placement = match &mut parsed {
            Parsed::Shell(a) => match decider.placer.place(&a.command, a.unsandboxed) {
                Ok(p) => {
                    a.placement = p.clone();
                    a.timeout = decider.timeout;
                    Some(p)
                }
                Err(why) => return refused(&name, &why, None).into(),
            },
            _ => None,
        };
        let call = ToolCall::new(name.clone(), args);
        // The tools' own wall, whichever rule would allow the call: paths stay in the
        // workspace. Also checked before anyone is asked.
        let verdict = cordon_policy::checkers::workspace_paths(&call, decider.engine.environment());
        if verdict.decision == Decision::Deny {
            return refused(&name, &verdict.reason, None).into();
        }
        let outcome = {
            let call = call.clone();
            let options = self.options;
            // External checkers are programs: they may take a while.
            let check = move || decider.check_placed(&call, options, placement.as_ref());
            match tokio::task::spawn_blocking(check).await {
                Ok(o) => o,
                Err(e) => {
                    return refused(&name, &format!("the policy check failed: {e}"), None).into();
                }
            }
        };
        match outcome.decision {
            Decision::Allow => {}
            Decision::Deny => return refused(&name, &outcome.reason, Some(&outcome)).into(),
            // 2026-07-28 has no requests from server to client: the question goes back as the
            // call's result, and the answer comes with the call made again.
            Decision::AskUser
                if context
                    .protocol_version()
                    .is_some_and(|v| !v.has_initialize()) =>
            {
                match self.ask_in_rounds(&call, &parsed, &outcome, &context, answers, state) {
                    Ok(None) => {}
                    Ok(Some(question)) => return question.into(),
                    Err(why) => return refused(&name, &why, Some(&outcome)).into(),
                }
            }
            Decision::AskUser => {
                if let Err(why) = self.ask(&call, &parsed, &outcome, &context).await {
                    return refused(&name, &why, Some(&outcome)).into();
                }
            }
        }
        let ws = Arc::clone(&self.workspace);
        let done = match parsed {
            Parsed::Shell(a) => return self.shell(a, context).await.into(),
            Parsed::Read(a) => tokio::task::spawn_blocking(move || files::read_file(&ws, &a)).await,
            Parsed::Write(a) => {
                tokio::task::spawn_blocking(move || files::write_file(&ws, &a)).await
            }
            Parsed::Replace(a) => {
                tokio::task::spawn_blocking(move || files::replace(&ws, &a)).await
            }
            Parsed::List(a) => {
                tokio::task::spawn_blocking(move || files::list_directory(&ws, &a)).await
            }
            Parsed::Glob(a) => tokio::task::spawn_blocking(move || files::glob(&ws, &a)).await,
            Parsed::Search(a) => {
                tokio::task::spawn_blocking(move || files::search_file_content(&ws, &a)).await
            }
        };
        match done {
            Ok(Ok(text)) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Ok(Err(e)) => CallToolResult::error(vec![ContentBlock::text(e)]),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                "`{name}` failed inside cordon: {e}"
            ))]),
        }
        .into()
    }

    /// The multi-round-trip ask: `Ok(Some(question))` to send back, `Ok(None)` when this call
    /// carries a yes to the question asked about this very call. Fails closed like
    /// [`Self::ask`].
    fn ask_in_rounds(
        &self,
        call: &ToolCall,
        parsed: &Parsed,
        outcome: &Outcome,
        context: &RequestContext<RoleServer>,
        answers: Option<InputResponses>,
        state: Option<String>,
    ) -> Result<Option<InputRequiredResult>, String> {
        const KEY: &str = "cordon-ask";
        let about = format!("{}\0{}", call.name, call.args);
        let mut asked = self.asked.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(state) = state
            && asked.get(&state) == Some(&about)
        {
            // Answered once: a second call with the same state is asked again.
            asked.remove(&state);
            let answer = answers
                .as_ref()
                .and_then(|a| a.get(KEY))
                .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
            return match answer.map(|a| a.action) {
                Some(ElicitationAction::Accept) => Ok(None),
                Some(ElicitationAction::Decline) => Err("the user said no".into()),
                Some(_) => Err("the user dismissed the question, so no".into()),
                None => {
                    Err("the call came back without an answer to cordon's question, so no".into())
                }
            };
        }
        if context
            .meta
            .client_capabilities()
            .is_none_or(|c| c.elicitation.is_none())
        {
            return Err(cannot_ask(outcome));
        }
        // Questions nobody answers must not pile up without bound.
        if asked.len() >= 1024 {
            asked.clear();
        }
        let state = format!(
            "cordon-ask-{}",
            self.next_question.fetch_add(1, Ordering::Relaxed)
        );
        asked.insert(state.clone(), about);
        let request = ElicitRequest::new(question(call, parsed, outcome));
        let requests = InputRequests::from([(KEY.to_string(), InputRequest::Elicitation(request))]);
        Ok(Some(InputRequiredResult::new(Some(requests), Some(state))))
    }

    /// Asks the user through the client. Fails closed: no elicitation support, an error, a
    /// decline, a dismissal or a cancelled request all mean no.
    async fn ask(
        &self,
        call: &ToolCall,
        parsed: &Parsed,
        outcome: &Outcome,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), String> {
        if !context
            .peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
        {
            return Err(cannot_ask(outcome));
        }
        tokio::select! {
            answer = context.peer.create_elicitation(question(call, parsed, outcome)) => match answer {
                Ok(r) => match r.action {
                    ElicitationAction::Accept => Ok(()),
                    ElicitationAction::Decline => Err("the user said no".into()),
                    _ => Err("the user dismissed the question, so no".into()),
                },
                Err(e) => Err(format!("asking the user failed ({e}), so no")),
            },
            _ = context.ct.cancelled() => Err("cancelled while waiting for the user's answer".into()),
            () = self.input_ended.wait() => Err("the client closed its input before the user answered, so no".into()),
        }
    }

    /// Runs a command in the sandbox, streaming its output as progress when the client gave a
    /// progress token, until it ends or the request is cancelled.
    async fn shell(
        &self,
        a: RunShellCommand,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let cwd = match self.workspace.run_dir(a.dir_path.as_deref()) {
            Ok(dir) => dir,
            Err(e) => return CallToolResult::error(vec![ContentBlock::text(e)]),
        };
        let opts = RunOptions {
            command: a.command.clone(),
            cwd: Some(cwd),
            io: Io::Pipes(Input::Null),
            // Merged with the settings: a run outside `cordon run` (in cordon's container, or
            // placed outside the sandbox) has no child to read them.
            timeout: a.timeout,
            keep: OutputLimit::default(),
            blocked_on_stderr: false,
            // In cordon's container, the container is the sandbox: a second one inside it
            // would need user namespaces, which engines refuse, and could only be weaker.
            placement: match &self.container {
                Some(name) => cordon_app::exec::Placement::Outside {
                    why: format!("inside container {name}, which is the sandbox"),
                },
                None => a.placement.clone(),
            },
        };
        let token = context.meta.get_progress_token();
        // Output waits here for the client; a slow client slows the command (its reader
        // blocks), rather than cordon holding its output.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(64);
        let control: Arc<Mutex<Option<Control>>> = Arc::default();
        let id = self.runs.next.fetch_add(1, Ordering::Relaxed);
        let sink = {
            let control = Arc::clone(&control);
            let runs = Arc::clone(&self.runs);
            let ct = context.ct.clone();
            let text = Mutex::new([Utf8Chunks::default(), Utf8Chunks::default()]);
            let streaming = token.is_some();
            Arc::new(move |event: Event<'_>| match event {
                Event::Started { control: c, .. } => {
                    *control.lock().unwrap_or_else(|e| e.into_inner()) = Some(c.clone());
                    runs.controls().insert(id, c.clone());
                    // A cancel that came before the run had started.
                    if ct.is_cancelled() {
                        c.cancel();
                    }
                }
                Event::Output { stream, data } if streaming => {
                    let chunk =
                        text.lock().unwrap_or_else(|e| e.into_inner())[stream as usize].push(data);
                    if !chunk.is_empty() {
                        let _ = tx.blocking_send(chunk);
                    }
                }
                Event::Output { .. } => {}
            })
        };
        let session = Arc::clone(&self.session);
        let mut run =
            tokio::task::spawn_blocking(move || session.start(&opts, sink).map(|r| r.wait()));
        let forward = {
            let peer = context.peer.clone();
            tokio::spawn(async move {
                let mut sent = 0u64;
                while let Some(chunk) = rx.recv().await {
                    let Some(token) = &token else { continue };
                    sent += chunk.len() as u64;
                    let note = ProgressNotificationParam::new(token.clone(), sent as f64)
                        .with_message(chunk);
                    // A client that stopped listening still gets its result.
                    let _ = peer.notify_progress(note).await;
                }
            })
        };
        let finished = tokio::select! {
            r = &mut run => r,
            _ = context.ct.cancelled() => {
                if let Some(c) = control.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                    c.cancel();
                }
                run.await
            }
        };
        self.runs.controls().remove(&id);
        // Every progress notification goes before the result.
        let _ = forward.await;
        let result = match finished {
            Ok(Ok(r)) => r,
            // Too many at once: the model reads the limit, and may call again later.
            Ok(Err(e)) if TooManyCommands::within(&e).is_some() => {
                return CallToolResult::error(vec![ContentBlock::text(e.to_string())]);
            }
            Ok(Err(e)) => {
                return CallToolResult::error(vec![ContentBlock::text(format!(
                    "cannot start `cordon run`: {e}"
                ))]);
            }
            Err(e) => {
                return CallToolResult::error(vec![ContentBlock::text(format!(
                    "the run failed inside cordon: {e}"
                ))]);
            }
        };
        let mut text = result.output.text.clone();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let mut notes = vec![format!("exit code {}", result.exit_code)];
        if result.cancelled {
            notes.push("cancelled".into());
        }
        if result.timed_out {
            notes.push("timed out".into());
        }
        match (&a.placement, &self.container) {
            (cordon_app::exec::Placement::Outside { why }, None) => {
                notes.push(format!("ran outside the sandbox: {why}"));
            }
            // Nothing leaves the container: what the settings place outside runs in it too.
            (cordon_app::exec::Placement::Outside { why }, Some(name)) => notes.push(format!(
                "ran in container {name}: the settings place it outside cordon's sandbox ({why}), and the container is the sandbox"
            )),
            (cordon_app::exec::Placement::Sandbox, Some(name)) => {
                notes.push(format!("ran in container {name}"));
            }
            (cordon_app::exec::Placement::Sandbox, None) => {}
        }
        if let Some(e) = &result.setup_error {
            notes.push(format!("the sandbox could not be set up: {e}"));
        }
        for v in &result.violations {
            notes.push(format!("the sandbox blocked: {v}"));
        }
        text.push_str(&format!("[{}]", notes.join("; ")));
        // The output's text stays in the structured result as well as in the content: some
        // clients (Claude Code) hand the model the structured result alone.
        let mut structured = serde_json::to_value(&result).unwrap_or_default();
        if let (Some(name), Some(o)) = (&self.container, structured.as_object_mut()) {
            // Contained, though not by cordon's own sandbox: the client is told which.
            o.insert("sandboxed".into(), json!(true));
            o.insert("container".into(), json!(name));
        }
        let mut r = if result.setup_error.is_some() {
            CallToolResult::error(vec![ContentBlock::text(text)])
        } else {
            CallToolResult::success(vec![ContentBlock::text(text)])
        };
        r.structured_content = Some(structured);
        r
    }
}
