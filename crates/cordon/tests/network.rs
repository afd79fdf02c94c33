//! Network egress through the real binary: `cordon run --allow-domain …` against servers this
//! suite starts on loopback, reached by names the proxy is told with `--resolve`. Nothing here
//! touches an address outside this machine.
//!
//! These need user namespaces and curl; where they are missing the tests skip with the reason,
//! unless `CORDON_TEST_NO_SKIP` is set (CI).

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::mpsc;
use std::time::Duration;

use common::{Sandbox, stderr, stdout};

/// An HTTP server on 127.0.0.1 that answers every request with `body`; each accepted
/// connection is reported on the returned channel when it ends.
fn origin(body: &'static str) -> (u16, mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (ended, ends) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let ended = ended.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => {
                            let _ = ended.send(());
                            return;
                        }
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes());
                // Hold the connection until the client goes.
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                }
                let _ = ended.send(());
            });
        }
    });
    (port, ends)
}

fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    if Command::new("curl").arg("--version").output().is_err() {
        common::skip("curl is not installed");
    }
    sb
}

/// `cordon run` with the names `allowed.test`, `other.test` and `denied.test` all pointing at
/// 127.0.0.1, and `extra` flags, running `script`.
fn run(sb: &Sandbox, extra: &[&str], script: &str, report: Option<&Path>) -> Output {
    let mut args: Vec<String> = ["allowed.test", "other.test", "denied.test"]
        .iter()
        .map(|n| format!("--resolve={n}=127.0.0.1"))
        .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    if let Some(r) = report {
        args.push(format!("--report={}", r.display()));
    }
    args.push("-c".into());
    args.push(script.into());
    sb.command().args(&args).output().expect("run")
}

fn an_allowed_domain_is_reachable_and_others_are_not() {
    let sb = sandbox();
    let (port, _) = origin("hello from origin");
    let report = sb.outside.join("report.json");
    let o = run(
        &sb,
        &[
            "--allow-domain=allowed.test",
            // Subdomains of test, but on another port: other.test stays unlisted.
            "--allow-domain=*.test:1",
            "--deny-domain=denied.test",
            "--allow-private-ips",
        ],
        &format!(
            "curl -sS http://allowed.test:{port}/; echo; curl -sS http://other.test:{port}/; \
             curl -sS http://denied.test:{port}/; curl -sS --noproxy '' -x http://127.0.0.1:3128 http://127.0.0.1:{port}/"
        ),
        Some(&report),
    );
    let out = stdout(&o);
    assert!(out.contains("hello from origin"), "{out}{}", stderr(&o));
    assert_eq!(out.matches("hello from origin").count(), 1, "{out}");
    assert!(out.contains("cordon blocked other.test"), "{out}");
    assert!(
        out.contains("cordon blocked denied.test") && out.contains("denied by `denied.test`"),
        "{out}"
    );
    assert!(out.contains("raw IP address"), "{out}");
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("JSON");
    let blocked: Vec<&serde_json::Value> = r["blocked"]
        .as_array()
        .expect("list")
        .iter()
        .filter(|b| b["operation"] == "connect")
        .collect();
    assert_eq!(blocked.len(), 3, "{r}");
    assert!(blocked.iter().all(|b| b["exact"] == true), "{r}");
    assert!(
        blocked
            .iter()
            .any(|b| b["destination"] == format!("other.test:{port}")),
        "{r}"
    );
}

/// With a Unix socket allowed, every `connect` of the command goes through the sandbox's
/// supervisor, TCP to the proxy included: that way out still works, blocking (curl) or not
/// (python with a timeout).
fn the_proxy_is_reachable_with_a_unix_socket_allowed() {
    let sb = sandbox();
    let (port, _) = origin("hello through the supervisor");
    let agent = sb.outside.join("agent.sock");
    let _agent = std::os::unix::net::UnixListener::bind(&agent).expect("bind");
    let o = run(
        &sb,
        &[
            "--allow-domain=allowed.test",
            "--allow-private-ips",
            &format!("--allow-unix-socket={}", agent.display()),
        ],
        &format!(
            "curl -sS http://allowed.test:{port}/; echo; python3 -c \"
import os, socket, urllib.parse
proxy = urllib.parse.urlsplit(os.environ['HTTP_PROXY'])
s = socket.create_connection((proxy.hostname, proxy.port), timeout=30)
s.sendall(b'GET http://allowed.test:{port}/ HTTP/1.1\\r\\nHost: allowed.test:{port}\\r\\n\\r\\n')
print(s.recv(4096).decode().split('\\r\\n\\r\\n')[-1])
\""
        ),
        None,
    );
    let out = stdout(&o);
    assert_eq!(
        out.matches("hello through the supervisor").count(),
        2,
        "{out}{}",
        stderr(&o)
    );
}

fn a_name_pointing_at_this_machine_is_refused_without_allow_private_ips() {
    let sb = sandbox();
    let (port, _) = origin("should not be seen");
    let o = run(
        &sb,
        &["--allow-domain=allowed.test"],
        &format!("curl -sS http://allowed.test:{port}/"),
        None,
    );
    assert!(!stdout(&o).contains("should not be seen"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("private or local address"),
        "{}",
        stdout(&o)
    );
}

fn socks5h_reaches_an_allowed_name_and_nothing_else() {
    let sb = sandbox();
    let (port, _) = origin("via socks");
    let o = run(
        &sb,
        &["--allow-domain=allowed.test", "--allow-private-ips"],
        &format!(
            "curl -sS -x \"$ALL_PROXY\" http://allowed.test:{port}/; echo; \
             curl -sS -x \"$ALL_PROXY\" http://other.test:{port}/ || echo refused"
        ),
        None,
    );
    let out = stdout(&o);
    assert!(
        out.contains("via socks") && out.contains("refused"),
        "{out}{}",
        stderr(&o)
    );
}

fn a_tunnel_whose_tls_names_another_host_is_cut() {
    let sb = sandbox();
    let (port, _) = origin("unused");
    let report = sb.outside.join("report.json");
    // curl asks the proxy for allowed.test but speaks TLS to other.test (domain fronting).
    let o = run(
        &sb,
        &["--allow-domain=allowed.test", "--allow-private-ips"],
        &format!(
            "curl -sS --connect-to other.test:{port}:allowed.test:{port} https://other.test:{port}/ || echo cut"
        ),
        Some(&report),
    );
    assert!(stdout(&o).contains("cut"), "{}{}", stdout(&o), stderr(&o));
    let r = std::fs::read_to_string(&report).expect("report");
    assert!(r.contains("differs from the tunnel's host"), "{r}");
}

fn without_allowed_domains_there_is_no_way_out() {
    let sb = sandbox();
    let (port, _) = origin("should not be seen");
    let o = run(
        &sb,
        &[],
        &format!(
            "curl -sS --max-time 3 http://allowed.test:{port}/; \
             curl -sS --max-time 3 -x http://127.0.0.1:3128 http://allowed.test:{port}/; echo done"
        ),
        None,
    );
    assert!(stdout(&o).contains("done"), "{}", stderr(&o));
    assert!(!stdout(&o).contains("should not be seen"), "{}", stdout(&o));
}

fn connections_left_open_end_with_the_run() {
    let sb = sandbox();
    let (port, ends) = origin("x");
    // A background client that keeps its tunnel open long after the command has ended.
    let script = format!(
        "python3 -c \"
import socket, time
s = socket.create_connection(('127.0.0.1', 3128))
s.sendall(b'CONNECT allowed.test:{port} HTTP/1.1\\r\\n\\r\\n')
s.recv(100)
s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')
time.sleep(60)
\" & sleep 1; echo started"
    );
    let o = run(
        &sb,
        &["--allow-domain=allowed.test", "--allow-private-ips"],
        &script,
        None,
    );
    assert!(stdout(&o).contains("started"), "{}", stderr(&o));
    assert!(
        ends.recv_timeout(Duration::from_secs(5)).is_ok(),
        "the tunnel outlived the run"
    );
}

fn bad_network_flags_are_named() {
    let sb = sandbox();
    for (flag, want) in [
        ("--allow-domain=*", "wildcard"),
        ("--deny-domain=exa mple.com", "not a valid host name"),
        ("--resolve=allowed.test", "NAME=ADDRESS"),
        ("--allow-domain=a.com:0", "port"),
        ("--upstream-proxy=ftp://x:1", "unknown scheme"),
    ] {
        let o = sb
            .command()
            .args([flag, "--", "true"])
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{flag}: {}", stderr(&o));
    }
    let o = sb
        .command()
        .args(["--allow-domain=a.com", "--network=host", "--", "true"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--network none"), "{}", stderr(&o));
}

/// A TLS server for `allowed.test` on 127.0.0.1, with a certificate from a throw-away CA
/// written to `dir/ca.pem`; answers every request with `body`.
fn tls_origin(dir: &Path, body: &str) -> Option<(std::process::Child, u16)> {
    let openssl = |args: &[&str]| {
        Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    std::fs::write(dir.join("ext"), "subjectAltName=DNS:allowed.test").ok()?;
    let made = openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=cordon test CA",
    ]) && openssl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "srv.key",
        "-out",
        "srv.csr",
        "-subj",
        "/CN=allowed.test",
    ]) && openssl(&[
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.pem",
        "-days",
        "1",
        "-extfile",
        "ext",
    ]);
    if !made {
        return None;
    }
    let server = format!(
        r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"{body}"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("srv.pem", "srv.key")
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#
    );
    let mut child = Command::new("python3")
        .args(["-c", &server])
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take()?),
        &mut line,
    )
    .ok()?;
    let port = line.trim().parse().ok()?;
    Some((child, port))
}

fn https_to_an_allowed_domain_works_through_the_tunnel() {
    let sb = sandbox();
    let Some((mut server, port)) = tls_origin(&sb.ws, "hello over tls") else {
        common::skip("the HTTPS test needs openssl and python3's ssl module");
    };
    let o = run(
        &sb,
        &["--allow-domain=allowed.test", "--allow-private-ips"],
        &format!("curl -sS --cacert ca.pem https://allowed.test:{port}/"),
        None,
    );
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(stdout(&o), "hello over tls", "{}", stderr(&o));
}

/// A standalone `cordon proxy` on 127.0.0.1 with `args`, and the address it listens on.
fn standalone_proxy(args: &[&str]) -> (std::process::Child, String) {
    standalone_proxy_with(args, |_| {})
}

/// `cordon proxy --listen=127.0.0.1:0 ARGS`, set up further by `setup` (standard input, the
/// environment), and the address it says it listens on.
fn standalone_proxy_with(
    args: &[&str],
    setup: impl FnOnce(&mut Command),
) -> (std::process::Child, String) {
    let mut cmd = Command::new(common::cordon_bin());
    cmd.args(["proxy", "--listen=127.0.0.1:0"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    setup(&mut cmd);
    let mut proxy = cmd.spawn().expect("proxy");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(proxy.stderr.take().expect("stderr")),
        &mut line,
    )
    .expect("read");
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .expect("an address")
        .to_string();
    (proxy, addr)
}

fn the_proxy_runs_alone_for_other_tools() {
    if Command::new("curl").arg("--version").output().is_err() {
        common::skip("curl is not installed");
    }
    let (port, _) = origin("alone");
    let (mut proxy, addr) = standalone_proxy(&[
        "--allow-domain=allowed.test",
        "--allow-private-ips",
        "--resolve=allowed.test=127.0.0.1",
        "--resolve=other.test=127.0.0.1",
    ]);
    let curl = |url: &str| {
        Command::new("curl")
            .args(["-sS", "--noproxy", "", "-x", &format!("http://{addr}"), url])
            .output()
            .expect("curl")
    };
    let ok = curl(&format!("http://allowed.test:{port}/"));
    let refused = curl(&format!("http://other.test:{port}/"));
    // The refusal's line may follow the 403 by a moment: read it before ending the proxy.
    let mut event = String::new();
    let _ = std::io::BufRead::read_line(
        &mut std::io::BufReader::new(proxy.stdout.take().expect("stdout")),
        &mut event,
    );
    let _ = proxy.kill();
    let _ = proxy.wait();
    assert_eq!(stdout(&ok), "alone", "{addr}: {}", stderr(&ok));
    assert!(stdout(&refused).contains("cordon blocked other.test"));
    let event: serde_json::Value = serde_json::from_str(&event).expect("an event line, JSON");
    assert_eq!(event["host"], "other.test");

    let o = Command::new(common::cordon_bin())
        .args(["proxy", "--listen=nowhere", "--allow-domain=a.com"])
        .output()
        .expect("proxy");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--listen nowhere"), "{}", stderr(&o));
}

fn cordon_connect_carries_ssh_and_git_through_the_socks_proxy() {
    let sb = sandbox();
    let (port, _) = origin("through connect");
    let cordon = common::cordon_bin();
    let o = run(
        &sb,
        &["--allow-domain=allowed.test", "--allow-private-ips"],
        &format!(
            "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | '{c}' connect allowed.test {port}; echo; \
             '{c}' connect other.test {port} </dev/null || echo refused; echo \"$GIT_SSH_COMMAND\"",
            c = cordon.display()
        ),
        None,
    );
    let out = stdout(&o);
    assert!(out.contains("through connect"), "{out}{}", stderr(&o));
    assert!(out.contains("refused"), "{out}");
    assert!(
        stderr(&o).contains("not allowed by cordon's rules"),
        "{}",
        stderr(&o)
    );
    assert!(
        out.contains("ProxyCommand=") && out.contains(" connect %h %p"),
        "{out}"
    );
}

fn an_upstream_proxy_carries_the_runs_connections() {
    let sb = sandbox();
    let (port, _) = origin("via upstream");
    // The upstream is cordon's own proxy, allowing only allowed.test; the run would also
    // allow other.test, so a refusal of it shows the connection went upstream.
    let (mut upstream, addr) = standalone_proxy(&[
        "--allow-domain=allowed.test",
        "--allow-private-ips",
        "--resolve=allowed.test=127.0.0.1",
        "--resolve=other.test=127.0.0.1",
    ]);
    let o = run(
        &sb,
        &[
            "--allow-domain=allowed.test",
            "--allow-domain=other.test",
            "--allow-private-ips",
            &format!("--upstream-proxy=http://{addr}"),
        ],
        &format!(
            "curl -sS http://allowed.test:{port}/; echo; curl -sS http://other.test:{port}/ || echo refused-upstream"
        ),
        None,
    );
    let _ = upstream.kill();
    let _ = upstream.wait();
    let out = stdout(&o);
    assert!(out.contains("via upstream"), "{out}{}", stderr(&o));
    assert!(out.contains("upstream proxy"), "{out}");
}

/// A program embedding `cordon run`, in Python as an agent might be: it hands cordon one end
/// of a socket pair as `--ask-domains fd:N`, answers each question from `answers` (host →
/// once/always/deny), and prints the questions it got to its standard error.
const EMBEDDER: &str = r#"
import json, socket, subprocess, sys
answers = json.loads(sys.argv[1])
ours, theirs = socket.socketpair()
cmd = sys.argv[2:]
cmd.insert(2, "--ask-domains=fd:%d" % theirs.fileno())
run = subprocess.Popen(cmd, pass_fds=[theirs.fileno()])
theirs.close()
channel = ours.makefile("rw")
channel.write("not json\n")
channel.write("x" * ((1 << 20) + 10) + "\n")
channel.flush()
for line in channel:
    msg = json.loads(line)
    print(line.strip(), file=sys.stderr, flush=True)
    if msg["type"] == "ask":
        channel.write(json.dumps({"type": "answer", "id": msg["id"],
                                  "answer": answers.get(msg["host"], "deny")}) + "\n")
        channel.flush()
sys.exit(run.wait())
"#;

fn need_python() {
    if Command::new("python3").arg("--version").output().is_err() {
        common::skip("python3 is not installed");
    }
}

fn an_embedding_program_answers_about_unlisted_hosts_and_always_is_kept() {
    let sb = sandbox();
    need_python();
    let (port, _) = origin("asked and allowed");
    let config = sb.outside.join("config");
    let script = format!(
        "for h in other.test other.test denied.test allowed.test; do \
         curl -sS --max-time 5 http://$h:{port}/; echo; done"
    );
    let run_embedded = |answers: &str| {
        Command::new("python3")
            .args(["-c", EMBEDDER, answers])
            .arg(common::cordon_bin())
            .args([
                "run",
                "--allow-domain=allowed.test",
                "--deny-domain=denied.test",
                "--allow-private-ips",
                "--resolve=other.test=127.0.0.1",
                "--resolve=allowed.test=127.0.0.1",
                "--resolve=denied.test=127.0.0.1",
                "-c",
                &script,
            ])
            .current_dir(&sb.ws)
            .env("XDG_CONFIG_HOME", &config)
            .output()
            .expect("python3")
    };
    let o = run_embedded(r#"{"other.test": "always"}"#);
    let (out, err) = (stdout(&o), stderr(&o));
    // other.test: asked once for two connections; denied.test: the rules said no, nobody is
    // asked; allowed.test: allowed, nobody is asked.
    assert_eq!(out.matches("asked and allowed").count(), 3, "{out}{err}");
    assert!(out.contains("cordon blocked denied.test"), "{out}");
    let asks: Vec<&str> = err.lines().filter(|l| l.contains(r#""ask""#)).collect();
    assert_eq!(asks.len(), 1, "{err}");
    assert!(
        asks[0].contains(&format!(r#""host":"other.test","port":{port}"#)),
        "{err}"
    );
    assert!(
        err.contains(r#""type":"error","line":1"#),
        "a malformed line gets an error naming it: {err}"
    );
    assert!(
        err.lines()
            .any(|l| l.contains(r#""line":2"#) && l.contains("longer than 1048576 bytes")),
        "a line over the bound is refused, not held: {err}"
    );
    let saved = config.join("cordon").join("remembered-domains.toml");
    let text = std::fs::read_to_string(&saved).expect("the always answer was kept");
    assert!(text.contains(&format!("\"other.test:{port}\"")), "{text}");

    // The next run reaches other.test without asking; a deny answer holds for the run.
    let o = run_embedded(r#"{}"#);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(
        !err.contains(r#""ask""#) || !err.contains("other.test"),
        "{err}"
    );
    assert_eq!(out.matches("asked and allowed").count(), 3, "{out}{err}");

    // A broken file of kept answers stops the run and is named.
    std::fs::write(&saved, "allow = [\"not a rule!\"]\n").expect("write");
    let o = run_embedded(r#"{}"#);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("remembered-domains.toml"),
        "{}",
        stderr(&o)
    );
}

/// Runs `cordon ARGS` on a fresh pseudo-terminal, answering each prompt that ends in `? ` with
/// the next of `answers`, one key and no Enter (the question takes a key as it is typed);
/// prints everything the terminal showed.
const ON_A_TERMINAL: &str = r#"
import os, pty, sys
answers = sys.argv[1].split(",")
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
seen = b""
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
    if seen.rstrip().endswith(b"[d]eny?") and answers:
        os.write(fd, answers.pop(0).encode())
        seen += b"<answered>"
sys.stdout.write(seen.decode(errors="replace"))
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"#;

fn the_person_at_the_terminal_is_asked_once_per_host() {
    let sb = sandbox();
    need_python();
    let (port, _) = origin("the person said yes");
    let o = Command::new("python3")
        .args(["-c", ON_A_TERMINAL, "o,d"])
        .arg(common::cordon_bin())
        .args([
            "run",
            "--allow-domain=allowed.test",
            "--allow-private-ips",
            "--resolve=other.test=127.0.0.1",
            "--resolve=denied.test=127.0.0.1",
            "-c",
            &format!(
                "for h in other.test other.test denied.test denied.test; do \
                 curl -sS --max-time 20 http://$h:{port}/; echo; done"
            ),
        ])
        .current_dir(&sb.ws)
        .env("XDG_CONFIG_HOME", sb.outside.join("config"))
        .output()
        .expect("python3");
    let shown = stdout(&o);
    assert_eq!(shown.matches("which no rule allows").count(), 2, "{shown}");
    assert!(
        shown.contains(&format!("wants to reach other.test:{port}")),
        "{shown}"
    );
    assert_eq!(shown.matches("the person said yes").count(), 2, "{shown}");
    assert_eq!(
        shown
            .matches(&format!(
                "cordon blocked denied.test:{port}: refused when asked"
            ))
            .count(),
        2,
        "{shown}"
    );
}

fn the_standalone_proxy_asks_on_standard_output() {
    let (port, _) = origin("asked over stdio");
    let (mut proxy, addr) = standalone_proxy_with(
        &[
            "--allow-domain=allowed.test",
            "--allow-private-ips",
            "--resolve=other.test=127.0.0.1",
            "--ask-domains=stdio",
        ],
        |cmd| {
            cmd.stdin(std::process::Stdio::piped());
        },
    );
    let mut answers = proxy.stdin.take().expect("stdin");
    let mut questions = std::io::BufReader::new(proxy.stdout.take().expect("stdout"));
    let client = std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(&addr).expect("connect");
        write!(
            c,
            "GET http://other.test:{port}/ HTTP/1.1\r\nHost: other.test:{port}\r\n\r\n"
        )
        .expect("write");
        // The origin holds the connection open: read until the body is in.
        c.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while !out.ends_with(b"asked over stdio") {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    });
    let mut ask = String::new();
    std::io::BufRead::read_line(&mut questions, &mut ask).expect("a question");
    let q: serde_json::Value = serde_json::from_str(&ask).expect("JSON");
    assert_eq!(q["type"], "ask");
    assert_eq!(q["host"], "other.test");
    writeln!(
        answers,
        r#"{{"type":"answer","id":{},"answer":"once"}}"#,
        q["id"]
    )
    .expect("answer");
    let out = client.join().expect("client");
    let _ = proxy.kill();
    let _ = proxy.wait();
    assert!(out.ends_with("asked over stdio"), "{out}");
}

fn asking_flags_that_cannot_work_are_named() {
    let sb = sandbox();
    for (flag, says) in [
        ("--ask-domains=stdio", "for `cordon proxy`"),
        ("--ask-domains=fd:57", "descriptor 57 is not open"),
        ("--ask-domains=terminal", "no terminal"),
        ("--ask-domains=fd:1", "above 2"),
        ("--ask-domains=maybe", "terminal, fd:N, stdio or deny"),
    ] {
        let o = Command::new("setsid")
            .arg(common::cordon_bin())
            .args(["run", "--allow-domain=a.test", flag, "--", "true"])
            .current_dir(&sb.ws)
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{flag}: {}", stderr(&o));
    }
}

/// A port on the host's loopback nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// One GET of `/` on 127.0.0.1:`port`, or why not.
fn get(port: u16) -> Result<String, String> {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(c, "GET / HTTP/1.0\r\n\r\n").map_err(|e| e.to_string())?;
    let mut out = String::new();
    c.read_to_string(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}

fn a_published_port_leads_to_a_server_inside_and_ends_with_the_run() {
    let sb = sandbox();
    need_python();
    std::fs::write(sb.ws.join("served-from-inside.txt"), "x").expect("write");
    let host_port = free_port();
    let mut run = sb
        .command()
        .arg(format!("--publish={host_port}:8000"))
        .args(["--timeout=60", "--", "python3", "-m", "http.server", "8000"])
        .args(["--bind", "127.0.0.1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run");
    // The server takes a moment to start inside; until then the connection is cut.
    let mut answer = Err(String::new());
    for _ in 0..100 {
        answer = get(host_port);
        if answer.as_ref().is_ok_and(|a| a.contains("200")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = run.kill();
    let _ = run.wait();
    let answer = answer.expect("the published port answered");
    assert!(answer.contains("served-from-inside.txt"), "{answer}");
    // Once the run is gone, so is the port.
    let mut closed = false;
    for _ in 0..50 {
        if std::net::TcpStream::connect(("127.0.0.1", host_port)).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(closed, "127.0.0.1:{host_port} still listens after the run");
}

fn publishing_is_refused_where_it_cannot_be_confined_and_bad_ports_are_named() {
    let sb = sandbox();
    let alone = Sandbox::with_mode(common::Mode::LandlockOnly);
    for args in [&["--publish=8000"][..], &["--allow-local-binding"]] {
        let o = alone.run(&[args, &["--", "true"]].concat());
        assert_eq!(o.status.code(), Some(125), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("need a network namespace"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken = taken.local_addr().expect("addr").port();
    for (args, says) in [
        (vec!["--publish=0"], "write PORT or HOST_PORT:PORT"),
        (vec!["--publish=80:x"], "write PORT or HOST_PORT:PORT"),
        (vec!["--publish=1:2:3"], "write PORT or HOST_PORT:PORT"),
        (
            vec!["--publish=8000", "--network=host"],
            "--publish needs the sandbox's own network",
        ),
    ] {
        let o = sb.run(&[&args[..], &["--", "true"]].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    let o = sb.run(&[&format!("--publish={taken}:80"), "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("cannot listen on 127.0.0.1:{taken}")),
        "{}",
        stderr(&o)
    );
}

fn the_standalone_proxy_follows_settings_as_they_change() {
    let (port, _) = origin("allowed by settings");
    let dir = tempfile::tempdir().expect("tmp");
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".config/cordon")).expect("mkdir");
    let settings = home.join(".config/cordon/cordon.toml");
    std::fs::write(&settings, "[network]\nallow_domains = [\"allowed.test\"]\n").expect("write");
    let (mut proxy, addr) = standalone_proxy_with(
        &[
            "--allow-private-ips",
            "--resolve=allowed.test=127.0.0.1",
            "--resolve=other.test=127.0.0.1",
        ],
        |cmd| {
            cmd.env("HOME", &home)
                .env_remove("XDG_CONFIG_HOME")
                .env("CORDON_MANAGED_SETTINGS", dir.path().join("managed.toml"))
                .current_dir(dir.path())
                .stdout(std::process::Stdio::null());
        },
    );
    let fetch = |host: &str| -> String {
        let mut c = std::net::TcpStream::connect(&addr).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        write!(
            c,
            "GET http://{host}:{port}/ HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n"
        )
        .expect("write");
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while !out.ends_with(b"allowed by settings") && !out.windows(3).any(|w| w == b"403") {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    // Settings are read at start.
    assert!(fetch("allowed.test").ends_with("allowed by settings"));
    assert!(fetch("other.test").contains("403"));
    // An edit takes effect without a restart (the proxy looks every two seconds).
    std::fs::write(&settings, "[network]\nallow_domains = [\"other.test\"]\n").expect("write");
    let mut followed = false;
    for _ in 0..100 {
        if fetch("other.test").ends_with("allowed by settings") {
            followed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(followed, "the proxy did not take the new settings");
    assert!(
        fetch("allowed.test").contains("403"),
        "the old allow list still held"
    );
    // A broken file: nothing is allowed until it is fixed.
    std::fs::write(&settings, "[network]\nallow_domainz = []\n").expect("write");
    let mut closed = false;
    for _ in 0..100 {
        if fetch("other.test").contains("403") {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = proxy.kill();
    let _ = proxy.wait();
    assert!(closed, "a broken settings file left the old rules in force");
}

/// A long run (an agent under `cordon run`) gets the allowed hosts of settings edited while it
/// runs, without a restart; hosts dropped from them are refused from then on.
fn a_runs_proxy_follows_settings_edited_during_the_run() {
    let sb = sandbox();
    let (port, _) = origin("hello from origin");
    let home = sb.outside.join("home");
    std::fs::create_dir_all(home.join(".config/cordon")).expect("mkdir");
    let settings = home.join(".config/cordon/cordon.toml");
    std::fs::write(
        &settings,
        "[network]\nallow_domains = [\"allowed.test\"]\nallow_private_ips = true\n",
    )
    .expect("write");
    let script = format!(
        "curl -sS http://allowed.test:{port}/; echo; touch ready; i=0; \
         until curl -sS http://other.test:{port}/ 2>/dev/null | grep -q 'from origin'; do \
           i=$((i+1)); [ $i -gt 1200 ] && echo gave-up && exit 1; sleep 0.05; done; \
         echo other-reached; curl -sS http://allowed.test:{port}/"
    );
    let child = sb
        .command()
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .env("CORDON_MANAGED_SETTINGS", sb.outside.join("managed.toml"))
        .args([
            "--resolve=allowed.test=127.0.0.1",
            "--resolve=other.test=127.0.0.1",
        ])
        .args(["-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start cordon run");
    let ready = sb.ws.join("ready");
    for _ in 0..1200 {
        if ready.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ready.exists(), "the command never got going");
    std::fs::write(
        &settings,
        "[network]\nallow_domains = [\"other.test\"]\nallow_private_ips = true\n",
    )
    .expect("write");
    let o = child.wait_with_output().expect("wait");
    let out = stdout(&o);
    assert!(out.starts_with("hello from origin"), "{out}{}", stderr(&o));
    assert!(out.contains("other-reached"), "{out}{}", stderr(&o));
    assert!(
        out.trim_end().ends_with("cordon blocked allowed.test")
            || out.contains("cordon blocked allowed.test"),
        "the old allow list still held: {out}"
    );
    assert!(
        stderr(&o).contains("settings changed; new rules in force"),
        "{}",
        stderr(&o)
    );
}

/// An answer's `id` out of range (a float, a negative, past what JSON carries exactly) is an
/// error line naming `id` and its range; the question stays open and a good answer still
/// lets the connection through.
fn a_domain_answer_with_an_id_out_of_range_is_named_and_asking_goes_on() {
    let (port, _) = origin("answered after bad ids");
    let (mut proxy, addr) = standalone_proxy_with(
        &[
            "--allow-domain=allowed.test",
            "--allow-private-ips",
            "--resolve=other.test=127.0.0.1",
            "--ask-domains=stdio",
        ],
        |cmd| {
            cmd.stdin(std::process::Stdio::piped());
        },
    );
    let mut answers = proxy.stdin.take().expect("stdin");
    let mut questions = std::io::BufReader::new(proxy.stdout.take().expect("stdout"));
    let client = std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(&addr).expect("connect");
        write!(
            c,
            "GET http://other.test:{port}/ HTTP/1.1\r\nHost: other.test:{port}\r\n\r\n"
        )
        .expect("write");
        c.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while !out.ends_with(b"answered after bad ids") {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    });
    let mut read = || {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut questions, &mut line).expect("a line");
        serde_json::from_str::<serde_json::Value>(&line).expect("JSON")
    };
    let q = read();
    assert_eq!(q["type"], "ask", "{q}");
    for bad in ["1e300", "-1", "0", "1.5", "9007199254740992", "\"1\""] {
        writeln!(answers, r#"{{"type":"answer","id":{bad},"answer":"once"}}"#).expect("answer");
        let e = read();
        let error = e["error"].as_str().unwrap_or_default();
        assert_eq!(e["type"], "error", "{bad}: {e}");
        assert!(
            error.contains("`id`") && error.contains("from 1 to 9007199254740991"),
            "{bad}: {e}"
        );
    }
    writeln!(
        answers,
        r#"{{"type":"answer","id":{},"answer":"once"}}"#,
        q["id"]
    )
    .expect("answer");
    let out = client.join().expect("client");
    let _ = proxy.kill();
    let _ = proxy.wait();
    assert!(out.ends_with("answered after bad ids"), "{out}");
}

/// An HTTP server on 127.0.0.1 that answers every request on a connection, pipelined ones too
/// (keeping the connection open), and records the Host header of each.
fn recording_origin() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let hosts = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen_hosts = hosts.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let hosts = seen_hosts.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut seen: Vec<u8> = Vec::new();
                loop {
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&seen[..end]).to_string();
                        seen.drain(..end + 4);
                        let host = head
                            .lines()
                            .find_map(|l| {
                                l.split_once(':')
                                    .filter(|(k, _)| k.eq_ignore_ascii_case("host"))
                                    .map(|(_, v)| v.trim().to_string())
                            })
                            .unwrap_or_default();
                        hosts.lock().expect("lock").push(host);
                        let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                        if head.to_ascii_lowercase().contains("connection: close") {
                            return;
                        }
                    }
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
            });
        }
    });
    (port, hosts)
}

/// A host the rules allow may serve others too (shared hosting, a CDN): a plain-HTTP request
/// naming another Host must never reach it, whether pipelined after an allowed request on a
/// proxied connection, or sent inside a CONNECT tunnel granted for the allowed host (alone,
/// after an allowed request, after blank lines, or with a request line a lenient server
/// still takes).
fn plain_http_on_an_allowed_connection_cannot_name_another_host() {
    let sb = sandbox();
    let (port, hosts) = recording_origin();
    let script = format!(
        r#"
import socket
P = {port}
def talk(first, then=None):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.settimeout(5)
    s.sendall(first)
    if then is not None:
        reply = b""
        while b"\r\n\r\n" not in reply:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
        s.sendall(then)
    try:
        while s.recv(4096):
            pass
    except OSError:
        pass
    s.close()
ok = b"GET / HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n" % P
evil = b"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n"
connect = b"CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n" % (P, P)
talk(b"GET http://allowed.test:%d/ HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n" % (P, P) + evil)
talk(connect, evil)
talk(connect, ok + evil)
talk(connect, b"\r\n\r\n" + evil)
talk(connect, b"GET http://evil.test/ HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n" % P)
# Request lines that lenient servers take, though they do not start with a letter, and one
# with no version and so no Host (HTTP/0.9: the server's default site).
for line in (b"_GET / HTTP/1.1", b"1GET / HTTP/1.1", b"  GET / HTTP/1.1", b"GET /"):
    talk(connect, line + b"\r\nHost: evil.test\r\n\r\n")
print("tried")
"#
    );
    let o = run(
        &sb,
        &["--allow-domain=allowed.test", "--allow-private-ips"],
        &format!("python3 -c '{}'", script.replace('\'', "'\\''")),
        None,
    );
    assert!(stdout(&o).contains("tried"), "{}{}", stdout(&o), stderr(&o));
    let hosts = hosts.lock().expect("lock").clone();
    assert!(
        hosts.iter().all(|h| h == &format!("allowed.test:{port}")),
        "the server was asked for other hosts: {hosts:?}\n{}",
        stderr(&o)
    );
    assert!(
        hosts.len() >= 2,
        "allowed requests should still get through: {hosts:?}\n{}",
        stderr(&o)
    );
}

/// The proxy rereads the remembered hosts every few seconds, so a run that could write that
/// file (its directory missing, in a writable place) would widen its own way out: with the
/// file planted and the reload waited for, a host no rule allows is still refused.
fn a_run_cannot_plant_remembered_hosts_for_its_own_proxy() {
    let sb = sandbox();
    let (port, _) = origin("reached through a planted rule");
    let config = sb.ws.join(".config");
    let file = config.join("cordon/remembered-domains.toml");
    let script = format!(
        "mkdir -p {dir} 2>/dev/null; printf 'allow = [\"other.test:{port}\"]\\n' > {file} 2>/dev/null \
         && echo planted; sleep 3; curl -sS http://other.test:{port}/",
        dir = common::q(file.parent().expect("parent")),
        file = common::q(&file),
    );
    let o = sb
        .command()
        .env("XDG_CONFIG_HOME", &config)
        .args([
            "--resolve=allowed.test=127.0.0.1",
            "--resolve=other.test=127.0.0.1",
            "--allow-domain=allowed.test",
            "--allow-private-ips",
            "-c",
            &script,
        ])
        .output()
        .expect("run");
    let out = stdout(&o);
    assert!(
        !out.contains("reached through a planted rule"),
        "the planted rule let the run out: {out}{}",
        stderr(&o)
    );
    assert!(
        out.contains("cordon blocked other.test"),
        "{out}{}",
        stderr(&o)
    );
    assert!(!file.exists(), "the planted file is left behind");
}

common::tests!(
    "network.rs":
    an_allowed_domain_is_reachable_and_others_are_not,
    the_proxy_is_reachable_with_a_unix_socket_allowed,
    a_name_pointing_at_this_machine_is_refused_without_allow_private_ips,
    socks5h_reaches_an_allowed_name_and_nothing_else,
    a_tunnel_whose_tls_names_another_host_is_cut,
    without_allowed_domains_there_is_no_way_out,
    connections_left_open_end_with_the_run,
    bad_network_flags_are_named,
    https_to_an_allowed_domain_works_through_the_tunnel,
    the_proxy_runs_alone_for_other_tools,
    cordon_connect_carries_ssh_and_git_through_the_socks_proxy,
    an_upstream_proxy_carries_the_runs_connections,
    an_embedding_program_answers_about_unlisted_hosts_and_always_is_kept,
    the_person_at_the_terminal_is_asked_once_per_host,
    the_standalone_proxy_asks_on_standard_output,
    asking_flags_that_cannot_work_are_named,
    a_published_port_leads_to_a_server_inside_and_ends_with_the_run,
    publishing_is_refused_where_it_cannot_be_confined_and_bad_ports_are_named,
    the_standalone_proxy_follows_settings_as_they_change,
    a_runs_proxy_follows_settings_edited_during_the_run,
    a_domain_answer_with_an_id_out_of_range_is_named_and_asking_goes_on,
    plain_http_on_an_allowed_connection_cannot_name_another_host,
    a_run_cannot_plant_remembered_hosts_for_its_own_proxy,
);
