"""Drives `cordon mcp` with the official MCP Python SDK (the `mcp` package from PyPI), a client
cordon did not write: it lists the tools, calls each, watches output stream as progress,
cancels a long run and checks nothing of it is left, and answers (or cannot answer) the
questions cordon asks through elicitation.

It does all of that twice: in the handshake era (protocol 2025-11-25, where cordon asks with
an `elicitation/create` request) and in 2026-07-28 (where it asks with an input-required
result and the call comes back with the answer), each in a workspace of its own.

With ENGINE and IMAGE after the others, it drives `cordon mcp --backend ENGINE --image IMAGE`
instead: the server runs in a container, and the checks are that its tools act there.

Run by tests/mcp.rs:  python drive.py CORDON WORKSPACE OUTSIDE MARKER [ENGINE IMAGE EXTENSION_DIR]
Prints one line per check; any failure raises, so the exit status is not 0.
"""

import os
import socket
import subprocess
import sys
import time

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

CORDON, TOP, OUTSIDE, MARKER = sys.argv[1:5]
ENGINE, IMAGE, EXTENSION = (sys.argv[5:8] + [None, None, None])[:3]
# Set for each era by main().
WS = TOP
MODE = "legacy"
PATIENCE = 60.0
TOOLS = {
    "run_shell_command",
    "read_file",
    "write_file",
    "replace",
    "list_directory",
    "glob",
    "search_file_content",
}


def server(*flags: str) -> StdioServerParameters:
    env = dict(os.environ)
    return StdioServerParameters(command=CORDON, args=["mcp", *flags], cwd=WS, env=env)


def client(*flags: str, **kw) -> Client:
    if ENGINE:
        flags = ("--backend", ENGINE, "--image", IMAGE, "--extension-policy-dir", EXTENSION, *flags)
    return Client(server("--workspace", WS, *flags), mode=MODE, **kw)


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if c.type == "text")


def ok(what: str) -> None:
    print(f"ok: {what}", flush=True)


def expect(cond: bool, what: str, result: object = None) -> None:
    if not cond:
        raise AssertionError(f"{what}: {result!r}")
    ok(what)


async def call(client: Client, name: str, args: dict, **kw) -> types.CallToolResult:
    with anyio.fail_after(PATIENCE):
        return await client.call_tool(name, args, **kw)


async def answer_yes(_ctx, params: types.ElicitRequestParams) -> types.ElicitResult:
    asked.append(params.message)
    return types.ElicitResult(action="accept", content={})


async def answer_no(_ctx, params: types.ElicitRequestParams) -> types.ElicitResult:
    asked.append(params.message)
    return types.ElicitResult(action="decline")


asked: list[str] = []


def running(marker: str) -> str:
    out = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True)
    # pgrep matches itself only with -f on some systems; leave it out either way.
    return "\n".join(l for l in out.stdout.splitlines() if "pgrep" not in l)


async def cancel_a_long_run(c: Client) -> None:
    """Starts a command that ignores SIGTERM and leaves a child, cancels the call once its
    output says it is ready, and checks that nothing of it is left running."""
    command = f"trap '' TERM; sleep {MARKER} & echo ready; wait; wait"
    started = anyio.Event()

    async def on_ready(_p: float, _t: float | None, message: str | None) -> None:
        if message and "ready" in message:
            started.set()

    t0 = time.monotonic()
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_when_ready() -> None:
                with anyio.fail_after(PATIENCE):
                    await started.wait()
                expect(bool(running(f"sleep {MARKER}")), "the long command runs", running(f"sleep {MARKER}"))
                scope.cancel()

            tg.start_soon(cancel_when_ready)
            await call(c, "run_shell_command", {"command": command}, progress_callback=on_ready)
            raise AssertionError("the long command ended on its own")
    expect(scope.cancelled_caught, "the client cancelled the call")
    left = running(f"sleep {MARKER}")
    deadline = time.monotonic() + 20
    while left and time.monotonic() < deadline:
        await anyio.sleep(0.1)
        left = running(f"sleep {MARKER}")
    expect(not left, f"nothing is left running after the cancel ({time.monotonic() - t0:.1f}s)", left)


async def with_a_user_who_says_yes() -> None:
    async with client(elicitation_callback=answer_yes) as c:
        want = "2025-11-25" if MODE == "legacy" else "2026-07-28"
        expect(c.protocol_version == want, f"the client speaks {want}", c.protocol_version)
        listed = await c.list_tools()
        names = {t.name for t in listed.tools}
        expect(names == TOOLS, "tools/list names the seven tools", names)
        schemas = {t.name: t.input_schema for t in listed.tools}
        expect(
            "file_path" in schemas["read_file"]["properties"]
            and "command" in schemas["run_shell_command"]["properties"]
            and "dir_path" in schemas["list_directory"]["properties"],
            "the schemas use the argument names the policy files use",
            schemas,
        )

        # write_file asks in the default mode; the user says yes.
        before = len(asked)
        r = await call(c, "write_file", {"file_path": "notes.txt", "content": "hello\nworld\n"})
        expect(not r.is_error and len(asked) == before + 1, "write_file asked, was allowed and wrote", (r, asked))
        expect("write `notes.txt` (12 bytes)" in asked[-1], "the question names the file", asked[-1])
        expect(open(os.path.join(WS, "notes.txt")).read() == "hello\nworld\n", "the file holds what was written")

        r = await call(c, "read_file", {"file_path": "notes.txt"})
        expect(not r.is_error and text(r) == "hello\nworld\n", "read_file reads it", r)

        r = await call(c, "replace", {"file_path": "notes.txt", "old_string": "world", "new_string": "there"})
        expect(not r.is_error, "replace edits it", r)
        expect(open(os.path.join(WS, "notes.txt")).read() == "hello\nthere\n", "the edit landed")

        os.makedirs(os.path.join(WS, "sub"), exist_ok=True)
        r = await call(c, "list_directory", {"dir_path": "."})
        expect(not r.is_error and "notes.txt" in text(r) and "[DIR] sub" in text(r), "list_directory lists it", r)

        r = await call(c, "glob", {"pattern": "*.txt"})
        expect(not r.is_error and "notes.txt" in text(r), "glob finds it", r)

        r = await call(c, "search_file_content", {"pattern": "^the", "include": "*.txt"})
        expect(not r.is_error and "L2: there" in text(r), "search_file_content finds the line", r)

        # The file tools keep to the workspace, whatever the rule that allowed them.
        for name, args in [
            ("read_file", {"file_path": "/etc/shadow"}),
            ("read_file", {"file_path": "../outside/secret"}),
            ("write_file", {"file_path": os.path.join(OUTSIDE, "planted"), "content": "x"}),
            ("list_directory", {"dir_path": "/etc"}),
            ("glob", {"pattern": "../**"}),
            ("search_file_content", {"pattern": "s", "dir_path": OUTSIDE}),
            ("run_shell_command", {"command": "touch escaped", "dir_path": OUTSIDE}),
        ]:
            r = await call(c, name, args)
            t = text(r)
            expect(r.is_error and ("outside the workspace" in t or "without `..`" in t), f"{name} {args} is refused", r)
        expect(not os.path.exists(os.path.join(OUTSIDE, "planted")), "nothing was written outside")
        expect(not os.path.exists(os.path.join(OUTSIDE, "escaped")), "no command ran outside")

        # Output streams as progress while the command runs.
        progress: list[tuple[float, float | None, str | None, float]] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append((p, total, message, time.monotonic()))

        r = await call(
            c,
            "run_shell_command",
            {"command": "for i in 1 2 3; do echo $i; sleep 0.3; done"},
            progress_callback=on_progress,
        )
        ended = time.monotonic()
        expect(not r.is_error and "1\n2\n3\n" in text(r) and "exit code 0" in text(r), "the command ran", r)
        expect(r.structured_content is not None and r.structured_content["exit_code"] == 0, "its result says exit code 0", r)
        streamed = "".join(m or "" for _, _, m, _ in progress)
        expect(streamed == "1\n2\n3\n", "its output came as progress notifications", progress)
        expect(
            len(progress) >= 2 and ended - progress[0][3] > 0.3,
            "the first of them came while it still ran",
            (progress, ended),
        )
        values = [p for p, _, _, _ in progress]
        expect(values == sorted(values) and len(set(values)) == len(values), "progress only grows", values)

        r = await call(c, "run_shell_command", {"command": "echo oops >&2; exit 3"})
        expect(not r.is_error and "oops" in text(r) and r.structured_content["exit_code"] == 3, "a failing command reports its exit code", r)

        # A command that asks (it writes); the user says yes, so it runs.
        before = len(asked)
        r = await call(c, "run_shell_command", {"command": "touch said-yes"})
        expect(len(asked) == before + 1 and "touch said-yes" in asked[-1], "touch asked the user, naming the command", asked)
        expect(not r.is_error and os.path.exists(os.path.join(WS, "said-yes")), "and ran on yes", r)

        # Cancelling a long run stops it and leaves nothing behind.
        await cancel_a_long_run(c)

        # The session goes on after a cancel.
        r = await call(c, "run_shell_command", {"command": "echo still here"})
        expect("still here" in text(r), "the server still serves after a cancel", r)


async def an_answer_is_for_its_own_call() -> None:
    # 2026-07-28 only: the client echoes cordon's requestState with its answer. A yes given
    # for one call must not let another through, nor be used twice.
    async with client(elicitation_callback=answer_yes) as c:
        s = c.session
        first = await s.call_tool("run_shell_command", {"command": "touch asked-about"}, allow_input_required=True)
        expect(isinstance(first, types.InputRequiredResult) and first.request_state, "the ask comes back as input required", first)
        yes = {k: {"action": "accept", "content": {}} for k in (first.input_requests or {})}
        other = await s.call_tool(
            "run_shell_command",
            {"command": "touch not-asked-about"},
            input_responses=yes,
            request_state=first.request_state,
            allow_input_required=True,
        )
        expect(isinstance(other, types.InputRequiredResult), "a yes for another call is not taken: asked afresh", other)
        expect(not os.path.exists(os.path.join(WS, "not-asked-about")), "and nothing ran")
        done = await s.call_tool(
            "run_shell_command",
            {"command": "touch asked-about"},
            input_responses=yes,
            request_state=first.request_state,
            allow_input_required=True,
        )
        expect(isinstance(done, types.CallToolResult) and not done.is_error, "the yes runs its own call", done)
        again = await s.call_tool(
            "run_shell_command",
            {"command": "touch asked-about"},
            input_responses=yes,
            request_state=first.request_state,
            allow_input_required=True,
        )
        expect(isinstance(again, types.InputRequiredResult), "and is spent: the same state asks afresh", again)


async def with_a_user_who_says_no() -> None:
    async with client(elicitation_callback=answer_no) as c:
        before = len(asked)
        r = await call(c, "run_shell_command", {"command": "touch said-no"})
        expect(len(asked) == before + 1, "touch asked the user", asked)
        expect(r.is_error and "said no" in text(r), "and was refused on no", r)
        expect(not os.path.exists(os.path.join(WS, "said-no")), "nothing ran")


async def with_nobody_to_ask() -> None:
    # No elicitation callback: the client declares no elicitation, so asking means no.
    async with client() as c:
        r = await call(c, "run_shell_command", {"command": "touch nobody-asked"})
        expect(r.is_error and "cannot ask" in text(r), "without elicitation an ask is a refusal", r)
        expect(not os.path.exists(os.path.join(WS, "nobody-asked")), "nothing ran")
        r = await call(c, "read_file", {"file_path": "notes.txt"})
        expect(not r.is_error, "what the policy allows still runs", r)


async def in_plan_mode() -> None:
    async with client("--mode", "plan", elicitation_callback=answer_yes) as c:
        before = len(asked)
        r = await call(c, "run_shell_command", {"command": "touch planned"})
        expect(r.is_error and len(asked) == before, "the policy's deny is a refusal, asking nobody", r)
        expect(r.structured_content["decision"] == "deny", "the result names the decision", r)
        expect(not os.path.exists(os.path.join(WS, "planned")), "nothing ran")


async def with_the_sandbox_walls() -> None:
    # What a sandboxed command could not read, the file tools do not read either.
    os.makedirs(os.path.join(WS, "private"), exist_ok=True)
    with open(os.path.join(WS, "private", "key"), "w") as f:
        f.write("do not show")
    async with client("--deny-read", "private") as c:
        r = await call(c, "read_file", {"file_path": "private/key"})
        expect(r.is_error and "keeps from being read" in text(r), "read_file keeps to --deny-read", r)
        r = await call(c, "search_file_content", {"pattern": "do not"})
        expect(not r.is_error and "private" not in text(r), "search_file_content does not look there", r)
        r = await call(c, "run_shell_command", {"command": "cat private/key"})
        expect("do not show" not in text(r), "nor can a command read it", r)


async def asking_to_leave_the_sandbox() -> None:
    # A command may ask to run outside the sandbox only where the settings allow it.
    target = os.path.join(OUTSIDE, f"left-{MODE}")
    args = {"command": f"touch {target}", "unsandboxed": True}
    async with client("--mode", "yolo") as c:
        r = await call(c, "run_shell_command", args)
        expect(r.is_error and "allow_unsandboxed_commands" in text(r), "leaving the sandbox is refused by default", r)
        expect(not os.path.exists(target), "and nothing ran")
    allowed = os.path.join(TOP, f"unsandboxed-{MODE}.toml")
    with open(allowed, "w") as f:
        f.write("[sandbox]\nallow_unsandboxed_commands = true\n")
    async with client("--mode", "yolo", "--settings", allowed) as c:
        r = await call(c, "run_shell_command", {"command": f"touch {target}"})
        expect(not os.path.exists(target), "a command that does not ask stays sandboxed", r)
        r = await call(c, "run_shell_command", args)
        expect(not r.is_error and "ran outside the sandbox" in text(r), "with the setting it runs outside, and says so", r)
        expect(os.path.exists(target), "and reached the host")
        expect(r.structured_content["sandboxed"] is False, "the result says it was not sandboxed", r)


def containers() -> list[str]:
    """The containers of this workspace, running or not (cordon names them after it)."""
    base = "".join(c if c.isalnum() or c in "_.-" else "-" for c in os.path.basename(WS).lower())
    out = subprocess.run(
        [ENGINE, "ps", "-a", "--format", "{{.Names}}", "--filter", f"name=cordon-{base}-"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


async def none_left(what: str) -> None:
    left = containers()
    deadline = time.monotonic() + 30
    while left and time.monotonic() < deadline:
        await anyio.sleep(0.2)
        left = containers()
    expect(not left, what, left)


async def in_a_container() -> None:
    """`cordon mcp --backend ENGINE`: every tool acts inside the container."""
    async with client(elicitation_callback=answer_yes) as c:
        listed = await c.list_tools()
        expect({t.name for t in listed.tools} == TOOLS, "tools/list names the seven tools", listed)
        running_now = containers()
        expect(len(running_now) == 1, "one container serves the session", running_now)

        # The image has no /usr; the host does. CORDON_SANDBOX names the container.
        r = await call(c, "run_shell_command", {"command": "echo in=$CORDON_SANDBOX; [ -e /usr ] || echo image-root; pwd"})
        t = text(r)
        expect(
            not r.is_error and f"in={running_now[0]}\n" in t and "image-root" in t and f"{WS}\n" in t,
            "run_shell_command runs inside the container, in the workspace",
            r,
        )

        # The user's settings exclude `hostname` from cordon's sandbox (tests/mcp.rs): it runs
        # in the container all the same, which has a hostname of its own.
        r = await call(c, "run_shell_command", {"command": "hostname"})
        expect(
            not r.is_error
            and "the settings place it outside cordon's sandbox" in text(r)
            and text(r).split("\n")[0] != socket.gethostname(),
            "a command excluded from the sandbox still runs in the container",
            (r, socket.gethostname()),
        )

        # The project's settings give each command 3 seconds (tests/mcp.rs); the session,
        # which lasts longer, goes on.
        r = await call(c, "run_shell_command", {"command": "sleep 20"})
        expect(r.structured_content["timed_out"] and "timed out" in text(r), "the settings' time limit stops a command", r)

        before = len(asked)
        r = await call(c, "write_file", {"file_path": "notes.txt", "content": "from the container\n"})
        expect(not r.is_error and len(asked) == before + 1, "write_file asked, was allowed and wrote", (r, asked))
        path = os.path.join(WS, "notes.txt")
        expect(open(path).read() == "from the container\n", "the file is in the host's workspace")
        expect(os.stat(path).st_uid == os.getuid(), "owned by the host user", os.stat(path))
        r = await call(c, "run_shell_command", {"command": "echo made > by-shell.txt"})
        made = os.path.join(WS, "by-shell.txt")
        expect(not r.is_error and os.path.exists(made) and os.stat(made).st_uid == os.getuid(), "so is what a command writes", r)
        r = await call(c, "read_file", {"file_path": "by-shell.txt"})
        expect(not r.is_error and text(r) == "made\n", "read_file reads it", r)

        # Outside the workspace: refused by the tools, and absent from the container.
        r = await call(c, "write_file", {"file_path": os.path.join(OUTSIDE, "planted"), "content": "x"})
        expect(r.is_error and "outside the workspace" in text(r), "write_file outside the workspace is refused", r)
        r = await call(c, "run_shell_command", {"command": f"cat {OUTSIDE}/secret; mkdir -p {OUTSIDE} && echo x > {OUTSIDE}/escaped && echo wrote-inside"})
        expect("not for the agent" not in text(r) and "wrote-inside" in text(r), "a command cannot read the host outside the workspace", r)
        expect(not os.path.exists(os.path.join(OUTSIDE, "planted")), "nothing was planted outside")
        expect(not os.path.exists(os.path.join(OUTSIDE, "escaped")), "what a command wrote outside stayed in the container")

        # The host's policy files decide inside: the user's deny (tests/mcp.rs writes it).
        before = len(asked)
        r = await call(c, "run_shell_command", {"command": "touch denied-by-policy"})
        expect(r.is_error and len(asked) == before and r.structured_content["decision"] == "deny", "the user's deny rule refuses the command", r)
        expect("not in a container" in text(r), "with the rule's message", r)
        expect(not os.path.exists(os.path.join(WS, "denied-by-policy")), "nothing ran")
        r = await call(c, "run_shell_command", {"command": "touch denied-by-extension"})
        expect(r.is_error and r.structured_content["decision"] == "deny", "so does the extension's, from a directory outside the workspace", r)
        expect(not os.path.exists(os.path.join(WS, "denied-by-extension")), "nothing ran")

        # Cancelling a long run stops it inside the container.
        await cancel_a_long_run(c)
        r = await call(c, "run_shell_command", {"command": "echo still here"})
        expect("still here" in text(r), "the server still serves after a cancel", r)
    await none_left("no container is left once the client has gone")

    # The mode is the host's: plan mode denies inside too.
    async with client("--mode", "plan", elicitation_callback=answer_yes) as c:
        r = await call(c, "run_shell_command", {"command": "touch planned"})
        expect(r.is_error and r.structured_content["decision"] == "deny", "--mode plan holds inside", r)
        expect(not os.path.exists(os.path.join(WS, "planned")), "nothing ran")
    await none_left("and none after the second session")

    # What --deny-read hides stays hidden from the tools and the commands inside; one the
    # container does not show at all (OUTSIDE) needs nothing there, and does not stop it.
    os.makedirs(os.path.join(WS, "private"), exist_ok=True)
    with open(os.path.join(WS, "private", "key"), "w") as f:
        f.write("do not show")
    async with client("--deny-read", "private", "--deny-read", OUTSIDE) as c:
        r = await call(c, "read_file", {"file_path": "private/key"})
        # The container shows an empty directory there, so the file is not found at all.
        expect(r.is_error and "do not show" not in text(r), "read_file keeps to --deny-read inside", r)
        r = await call(c, "run_shell_command", {"command": "cat private/key; echo done"})
        expect("done" in text(r) and "do not show" not in text(r), "nor can a command inside read it", r)
    await none_left("and none after the third")


async def main() -> None:
    global WS, MODE, MARKER
    if ENGINE:
        MODE = "legacy"
        print(f"== cordon mcp --backend {ENGINE}", flush=True)
        await in_a_container()
        print("all checks passed", flush=True)
        return
    marker = MARKER
    # "auto" probes with server/discover and takes the newest revision both sides speak.
    for n, mode in enumerate(["legacy", "auto"]):
        MODE, WS, MARKER = mode, os.path.join(TOP, mode), f"{marker}{n}"
        os.makedirs(WS, exist_ok=True)
        print(f"== mode {mode}", flush=True)
        await with_a_user_who_says_yes()
        await with_a_user_who_says_no()
        await with_nobody_to_ask()
        await in_plan_mode()
        await with_the_sandbox_walls()
        await asking_to_leave_the_sandbox()
        if mode == "auto":
            await an_answer_is_for_its_own_call()
    print("all checks passed", flush=True)


anyio.run(main)
