"""One `cordon exec --jsonl --mode yolo` session, for the scripts that time commands through it:
start it, send a `run`, wait for its `exited`. Any error, a failed run or an early end stops
the script, so that no figure comes from runs that did not happen."""

import json
import subprocess
import sys


def start(cordon, cwd, env):
    return subprocess.Popen([cordon, "exec", "--jsonl", "--mode", "yolo"], cwd=cwd, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)


def send(proc, run_id, command="true"):
    proc.stdin.write(json.dumps({"type": "run", "id": str(run_id), "command": command}) + "\n")
    proc.stdin.flush()


def exited(proc):
    """The next run's `exited` event, which must say exit code 0."""
    for line in proc.stdout:
        event = json.loads(line)
        if event["type"] == "error":
            sys.exit(f"cordon exec said: {event['message']}")
        if event["type"] == "exited":
            if event.get("exit_code") != 0:
                sys.exit(f"a run failed: {event}")
            return event
    sys.exit("cordon exec ended early")
