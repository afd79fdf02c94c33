//! The Seatbelt profile and log parser, on any OS: golden profiles for a matrix of specs,
//! escaping of hostile paths, the named profiles' meaning, and the parser on log fixtures.
//!
//! Regenerate the golden files after an intended change with
//! `UPDATE_GOLDEN=1 cargo test -p cordon-sandbox --test seatbelt`, then read the diff: the
//! golden files are the specification of what a Mac will enforce.

#![cfg(unix)]

use std::path::{Path, PathBuf};

use cordon_sandbox::seatbelt::{
    IgnoreViolations, NamedProfile, Options, ProfileChoice, ProfileError, generate, glob_to_regex,
    violations,
};
use cordon_sandbox::{Isolation, Limits, NetworkMode, ProxyEndpoint, SandboxSpec};

fn spec() -> SandboxSpec {
    SandboxSpec {
        argv: vec!["echo".into(), "hi".into()],
        cwd: "/Users/me/proj".into(),
        env: vec![
            ("HOME".into(), "/Users/me".into()),
            ("PATH".into(), "/usr/bin:/bin".into()),
        ],
        writable: Vec::new(),
        read_only: Vec::new(),
        network: NetworkMode::None,
        hidden: Vec::new(),
        reopened: Vec::new(),
        limits: Limits::default(),
        cgroups: Vec::new(),
        unix_sockets: Vec::new(),
        isolation: Isolation::Auto,
        allow_local_binding: false,
        inbound: None,
        own_terminal: false,
        cwd_identity: None,
    }
}

fn options() -> Options {
    Options {
        tag: "golden".into(),
        tmpdir: "/var/folders/zz/abc/T/cordon-golden".into(),
        hidden_globs: Vec::new(),
        choice: ProfileChoice::Spec,
    }
}

fn proxy() -> NetworkMode {
    NetworkMode::Proxy(ProxyEndpoint {
        socket: None,
        http_port: 3128,
        socks_port: 1080,
    })
}

/// A spec with a little of everything, for the named profiles.
fn busy_spec() -> SandboxSpec {
    SandboxSpec {
        writable: vec!["/Users/me/.cache/tool".into()],
        read_only: vec!["/Users/me/proj/.git/config".into()],
        hidden: vec!["/Users/me/.ssh".into()],
        reopened: vec!["/Users/me/.ssh/known_hosts".into()],
        network: proxy(),
        ..spec()
    }
}

fn cases() -> Vec<(String, SandboxSpec, Options)> {
    let mut cases = vec![
        ("network-none".to_string(), spec(), options()),
        (
            "network-proxy".to_string(),
            SandboxSpec {
                network: proxy(),
                ..spec()
            },
            options(),
        ),
        (
            "network-host".to_string(),
            SandboxSpec {
                network: NetworkMode::Host,
                ..spec()
            },
            options(),
        ),
        (
            "deny-read-allow-read".to_string(),
            SandboxSpec {
                hidden: vec!["/Users/me/.ssh".into(), "/Users/me/proj/secrets".into()],
                reopened: vec!["/Users/me/.ssh/known_hosts".into()],
                ..spec()
            },
            Options {
                hidden_globs: vec!["/Users/me/**/*.pem".into(), "/tmp/key-?".into()],
                ..options()
            },
        ),
        (
            "extra-writable".to_string(),
            SandboxSpec {
                writable: vec!["/tmp/cache".into(), "/Users/me/.cargo".into()],
                read_only: vec!["/Users/me/.cargo/config.toml".into()],
                ..spec()
            },
            options(),
        ),
        (
            "unix-sockets".to_string(),
            SandboxSpec {
                unix_sockets: vec![
                    "/var/run/docker.sock".into(),
                    "/Users/me/.ssh/agent.sock".into(),
                ],
                ..spec()
            },
            options(),
        ),
        (
            "local-binding".to_string(),
            SandboxSpec {
                allow_local_binding: true,
                ..spec()
            },
            options(),
        ),
    ];
    for named in NamedProfile::ALL {
        cases.push((
            named.name().to_string(),
            busy_spec(),
            Options {
                choice: ProfileChoice::Named(named),
                ..options()
            },
        ));
    }
    cases
}

fn golden_text(name: &str, spec: &SandboxSpec, options: &Options) -> String {
    let profile = generate(spec, options).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut out = format!(
        ";; golden file for `{name}`; regenerate with\n;; UPDATE_GOLDEN=1 cargo test -p cordon-sandbox --test seatbelt\n;; parameters (-D):\n"
    );
    for (k, v) in &profile.params {
        out.push_str(&format!(";;   {k}={v}\n"));
    }
    out.push_str(&profile.text);
    out
}

#[test]
fn profiles_match_their_golden_files() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/seatbelt");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut stale = Vec::new();
    for (name, spec, options) in cases() {
        let path = dir.join(format!("{name}.sb"));
        let got = golden_text(&name, &spec, &options);
        if update {
            std::fs::write(&path, &got).expect("write golden file");
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(want) if want == got => {}
            Ok(want) => {
                let line = want
                    .lines()
                    .zip(got.lines())
                    .position(|(a, b)| a != b)
                    .map_or(want.lines().count().min(got.lines().count()), |i| i)
                    + 1;
                stale.push(format!(
                    "{} (first difference at line {line})",
                    path.display()
                ));
            }
            Err(e) => stale.push(format!("{}: {e}", path.display())),
        }
    }
    assert!(
        stale.is_empty(),
        "generated profiles differ from the golden files (UPDATE_GOLDEN=1 rewrites them; review the diff):\n{}",
        stale.join("\n")
    );
}

/// An SBPL form as the profile compiler would read it.
#[derive(Debug, Clone, PartialEq)]
enum Sexp {
    Atom(String),
    Str(String),
    List(Vec<Sexp>),
}

/// Reads a whole profile: comments dropped, strings decoded. `Err` on anything unbalanced.
fn read_profile(text: &str) -> Result<Vec<Sexp>, String> {
    let mut stack: Vec<Vec<Sexp>> = vec![Vec::new()];
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ';' => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        break;
                    }
                }
            }
            '(' => stack.push(Vec::new()),
            ')' => {
                let list = stack.pop().ok_or("unbalanced )")?;
                stack
                    .last_mut()
                    .ok_or("unbalanced )")?
                    .push(Sexp::List(list));
            }
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next().ok_or("unterminated string")? {
                        '\\' => s.push(chars.next().ok_or("unterminated escape")?),
                        '"' => break,
                        c => s.push(c),
                    }
                }
                stack.last_mut().ok_or("no form")?.push(Sexp::Str(s));
            }
            c if c.is_whitespace() => {}
            c => {
                let mut atom = c.to_string();
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || n == '(' || n == ')' || n == '"' || n == ';' {
                        break;
                    }
                    atom.push(n);
                    chars.next();
                }
                stack.last_mut().ok_or("no form")?.push(Sexp::Atom(atom));
            }
        }
    }
    match stack.len() {
        1 => Ok(stack.pop().unwrap_or_default()),
        _ => Err("unbalanced (".to_string()),
    }
}

fn walk<'a>(forms: &'a [Sexp], out: &mut Vec<&'a Sexp>) {
    for f in forms {
        out.push(f);
        if let Sexp::List(items) = f {
            walk(items, out);
        }
    }
}

/// The parameter names `(param "NAME")` reads.
fn params_read(forms: &[Sexp]) -> Vec<String> {
    let mut all = Vec::new();
    walk(forms, &mut all);
    all.iter()
        .filter_map(|f| match f {
            Sexp::List(items) => match items.as_slice() {
                [Sexp::Atom(a), Sexp::Str(name)] if a == "param" => Some(name.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn golden_profiles_read_back_and_every_parameter_they_read_is_given() {
    for (name, spec, options) in cases() {
        let profile = generate(&spec, &options).expect("profile");
        let forms = read_profile(&profile.text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            forms.first(),
            Some(&Sexp::List(vec![
                Sexp::Atom("version".into()),
                Sexp::Atom("1".into())
            ])),
            "{name}"
        );
        for p in params_read(&forms) {
            assert!(
                profile.params.iter().any(|(k, _)| *k == p),
                "{name}: reads {p}, which is not given"
            );
        }
    }
}

/// Top-level rules of a profile as `(action, operation, filter count)`.
fn rules(text: &str) -> Vec<(String, String, usize)> {
    read_profile(text)
        .expect("profile reads back")
        .into_iter()
        .filter_map(|f| match f {
            Sexp::List(items) => match items.as_slice() {
                [Sexp::Atom(action), rest @ ..] if action == "allow" || action == "deny" => {
                    let ops: Vec<String> = rest
                        .iter()
                        .filter_map(|i| match i {
                            Sexp::Atom(a) => Some(a.clone()),
                            _ => None,
                        })
                        .collect();
                    let filters = rest.iter().filter(|i| matches!(i, Sexp::List(_))).count();
                    Some((action.clone(), ops.join(" "), filters))
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn only_the_permissive_and_open_profiles_allow_everything_of_a_kind() {
    for (name, spec, options) in cases() {
        let profile = generate(&spec, &options).expect("profile");
        let bare: Vec<String> = rules(&profile.text)
            .into_iter()
            .filter(|(action, _, filters)| action == "allow" && *filters == 0)
            .map(|(_, op, _)| op)
            .collect();
        let permissive = name.starts_with("permissive");
        let strict = name.starts_with("strict");
        let open = name.ends_with("-open") || name == "network-host";
        assert_eq!(
            bare.contains(&"file-write*".to_string()),
            permissive,
            "{name}: {bare:?}"
        );
        assert_eq!(bare.contains(&"file-read*".to_string()), !strict, "{name}");
        assert_eq!(bare.contains(&"network*".to_string()), open, "{name}");
        // Every deny carries the run's tag last, or its log lines could not be found.
        let message = Sexp::List(vec![
            Sexp::Atom("with".into()),
            Sexp::Atom("message".into()),
            Sexp::Str("cordon-golden".into()),
        ]);
        let forms = read_profile(&profile.text).expect("reads back");
        let denies: Vec<&Vec<Sexp>> = forms
            .iter()
            .filter_map(|f| match f {
                Sexp::List(items) if items.first() == Some(&Sexp::Atom("deny".into())) => {
                    Some(items)
                }
                _ => None,
            })
            .collect();
        assert!(denies.len() > 1, "{name}");
        for d in denies {
            assert_eq!(d.last(), Some(&message), "{name}: {d:?}");
        }
    }
}

#[test]
fn protected_paths_and_the_directories_above_them_are_guarded_in_every_writable_place() {
    let spec = SandboxSpec {
        writable: vec!["/Users/me/.cache/tool".into()],
        ..spec()
    };
    let profile = generate(&spec, &options()).expect("profile");
    let param = |prefix: &str| -> Vec<&str> {
        profile
            .params
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| v.as_str())
            .collect()
    };
    let protected = param("PROTECTED_");
    for root in ["/Users/me/proj", "/Users/me/.cache/tool"] {
        for name in cordon_sandbox::PROTECTED_NAMES {
            assert!(
                protected.contains(&format!("{root}/{name}").as_str()),
                "{root}/{name}"
            );
        }
    }
    let unlink = param("UNLINK_");
    for dir in [
        "/Users/me/proj/.git",
        "/Users/me/proj",
        "/Users/me/.cache/tool/.git",
    ] {
        assert!(unlink.contains(&dir), "{dir} in {unlink:?}");
    }
    // Directories outside every writable place cannot be renamed anyway; no rule names them.
    for dir in ["/Users/me", "/Users", "/Users/me/.cache"] {
        assert!(!unlink.contains(&dir), "{dir} in {unlink:?}");
    }
}

#[test]
fn named_profiles_override_breadth_and_network_as_they_say() {
    // A proxied profile needs the proxy.
    for named in [
        NamedProfile::PermissiveProxied,
        NamedProfile::RestrictiveProxied,
        NamedProfile::StrictProxied,
    ] {
        let err = generate(
            &spec(),
            &Options {
                choice: ProfileChoice::Named(named),
                ..options()
            },
        );
        assert!(
            matches!(err, Err(ProfileError::NeedsProxy(..))),
            "{named:?}"
        );
    }
    // An open one opens the network even when the spec had none.
    let open = generate(
        &spec(),
        &Options {
            choice: ProfileChoice::Named(NamedProfile::RestrictiveOpen),
            ..options()
        },
    )
    .expect("profile");
    assert!(open.text.contains("\n(allow network*)\n"));
    for named in NamedProfile::ALL {
        assert_eq!(NamedProfile::parse(named.name()), Some(named));
    }
    assert_eq!(NamedProfile::parse("permissive"), None);
}

#[test]
fn bad_tags_and_paths_are_refused_not_written() {
    for tag in ["", "UPPER", "has space", "quote\"", &"x".repeat(65)] {
        let r = generate(
            &spec(),
            &Options {
                tag: tag.to_string(),
                ..options()
            },
        );
        assert!(matches!(r, Err(ProfileError::BadTag(_))), "{tag:?}");
    }
    let relative = SandboxSpec {
        writable: vec!["relative/dir".into()],
        ..spec()
    };
    assert!(matches!(
        generate(&relative, &options()),
        Err(ProfileError::Relative(_))
    ));
    let dotdot = SandboxSpec {
        hidden: vec!["/Users/me/../other".into()],
        ..spec()
    };
    assert!(matches!(
        generate(&dotdot, &options()),
        Err(ProfileError::ParentDir(_))
    ));
}

/// Paths with quotes, parentheses, backslashes, newlines and SBPL of their own in every place
/// a path goes: none of it reaches the profile text, each arrives intact as a parameter, and
/// the profile still reads as the same forms.
#[test]
fn every_path_parameter_is_escaped() {
    let hostile = [
        r#"/Users/me/q"uote"#,
        "/Users/me/paren(s)",
        r"/Users/me/back\slash",
        "/Users/me/new\nline",
        r#"/Users/me/x") (allow default) ("#,
        "/Users/me/semi;colon #| |#",
    ];
    let at = |i: usize, tail: &str| PathBuf::from(format!("{}{tail}", hostile[i % hostile.len()]));
    let spec = SandboxSpec {
        cwd: at(0, "/cwd"),
        env: vec![("HOME".into(), hostile[4].into())],
        writable: vec![at(1, ""), at(2, "")],
        read_only: vec![at(1, "/ro")],
        hidden: vec![at(3, "/hide")],
        reopened: vec![at(3, "/hide/ok")],
        unix_sockets: vec![at(4, "/sock"), at(5, "/sock")],
        network: proxy(),
        ..spec()
    };
    let glob = r#"/Users/me/g"l(o)b\\/[a-c]*.pem"#;
    for choice in std::iter::once(ProfileChoice::Spec)
        .chain(NamedProfile::ALL.into_iter().map(ProfileChoice::Named))
    {
        let options = Options {
            tmpdir: at(5, "/tmp"),
            hidden_globs: vec![glob.to_string()],
            choice,
            ..options()
        };
        let profile = generate(&spec, &options).expect("profile");
        for bad in [
            "q\"uote",
            "paren(s)",
            r"back\slash",
            "new\nline",
            "allow default",
            "semi;colon",
        ] {
            assert!(
                !profile.text.contains(bad),
                "{choice:?}: {bad:?} reached the text"
            );
        }
        let forms = read_profile(&profile.text).unwrap_or_else(|e| panic!("{choice:?}: {e}"));
        let mut all = Vec::new();
        walk(&forms, &mut all);
        assert!(
            !all.iter().any(|f| matches!(f, Sexp::List(items)
                if items == &[Sexp::Atom("allow".into()), Sexp::Atom("default".into())])),
            "{choice:?}"
        );
        for name in params_read(&forms) {
            assert!(profile.params.iter().any(|(k, _)| *k == name), "{name}");
        }
        let values: Vec<&str> = profile.params.iter().map(|(_, v)| v.as_str()).collect();
        for p in spec
            .writable
            .iter()
            .chain(&spec.read_only)
            .chain(&spec.hidden)
            .chain(&spec.unix_sockets)
            .chain([&spec.cwd, &options.tmpdir])
        {
            let p = p.to_str().expect("utf-8");
            assert!(values.contains(&p), "{choice:?}: {p:?} not passed intact");
        }
        // The command line carries each value as one argument, byte for byte.
        let line = profile.command_line(&spec.argv);
        for (k, v) in &profile.params {
            assert!(line.contains(&format!("-D{k}={v}")), "{k}");
        }
        // The glob's regex is the one string literal with user text, and it reads back exact
        // and matches what the glob means.
        let want = glob_to_regex(glob).expect("regex");
        assert!(
            all.iter().any(|f| matches!(f, Sexp::Str(s) if *s == want)),
            "{choice:?}: the regex did not read back as {want}"
        );
        // A backslash escapes only in a component with wildcards (`pattern.rs`): the
        // directory's name holds both of them, as it does for the Linux backend.
        let re = regex::Regex::new(&want).expect("valid regex");
        assert!(re.is_match(r#"/Users/me/g"l(o)b\\/b-key.pem"#));
        assert!(!re.is_match(r#"/Users/me/g"l(o)b\/b-key.pem"#));
        assert!(!re.is_match(r#"/Users/me/g"l(o)b\\/d-key.pem"#));
    }
}

const FIXTURE_TAG: &str = "fixture-run";

fn fixture() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seatbelt-log.ndjson");
    std::fs::read_to_string(path).expect("fixture")
}

#[test]
fn the_log_fixture_yields_this_runs_denials_without_noise_or_ignored_paths() {
    let ignore = IgnoreViolations {
        rules: vec![("npm *".into(), vec!["/Users/me/.npm".into()])],
    };
    let found = violations(&fixture(), FIXTURE_TAG, "npm install", &ignore);
    let got: Vec<(&str, Option<&str>)> = found
        .iter()
        .map(|v| (v.operation, v.path.as_deref().and_then(Path::to_str)))
        .collect();
    assert_eq!(
        got,
        [
            ("create", Some("/private/etc/cordon-x")),
            ("read", Some("/Users/me/.ssh/id_ed25519")),
            ("write", Some("/Users/me/proj/.git")),
            ("network", None),
            ("create", Some("/Users/me/proj/.bashrc")),
        ]
    );
    assert!(found.iter().all(|v| v.exact && v.action.is_none()));
    assert!(
        found[0].rule.contains("file-write-create"),
        "{}",
        found[0].rule
    );
    assert!(
        found[3]
            .evidence
            .as_deref()
            .is_some_and(|e| e.contains("93.184.216.34:443")),
        "{:?}",
        found[3]
    );

    // The same log for another command: npm's cache write is reported.
    let other = violations(&fixture(), FIXTURE_TAG, "yarn install", &ignore);
    assert!(
        other
            .iter()
            .any(|v| v.path.as_deref() == Some(Path::new("/Users/me/.npm/_logs/debug.log")))
    );
    // Another run's tag sees only its own.
    let theirs = violations(&fixture(), "other-run", "x", &IgnoreViolations::default());
    assert_eq!(theirs.len(), 1, "{theirs:?}");
}
