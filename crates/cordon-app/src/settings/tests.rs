use super::*;

fn src(layer: Layer) -> Source {
    Source {
        layer,
        file: (layer != Layer::Flags).then(|| PathBuf::from(format!("/{layer:?}.toml"))),
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn deny_lists_add_up_and_the_last_layer_to_speak_says_what_is_allowed() {
    let managed = LayerValues {
        allow_domains: Some(strings(&["corp.example"])),
        deny_domains: strings(&["evil.example"]),
        max_processes: Some(500),
        ..Default::default()
    };
    let user = LayerValues {
        allow_domains: Some(strings(&["github.com"])),
        deny_domains: strings(&["worse.example"]),
        deny_read: vec![PathBuf::from("/home/u/.ssh")],
        ..Default::default()
    };
    let flags = LayerValues {
        deny_read: vec![PathBuf::from("/home/u/.aws")],
        ..Default::default()
    };
    let s = merge(
        &[
            (src(Layer::Managed), managed),
            (src(Layer::User), user),
            (src(Layer::Flags), flags),
        ],
        Locks::default(),
        false,
    );
    let allowed = s.allow_domains.expect("set");
    assert_eq!(allowed.value, ["github.com"], "replaced, not added to");
    assert_eq!(allowed.from.layer, Layer::User);
    let denied: Vec<(&str, Layer)> = s
        .deny_domains
        .iter()
        .map(|d| (d.value.as_str(), d.from.layer))
        .collect();
    assert_eq!(
        denied,
        [
            ("evil.example", Layer::Managed),
            ("worse.example", Layer::User)
        ]
    );
    assert_eq!(s.deny_read.len(), 2);
    assert_eq!(s.max_processes.expect("kept").from.layer, Layer::Managed);
    assert!(s.left_out.is_empty(), "{:?}", s.left_out);
}

#[test]
fn an_untrusted_project_may_only_tighten() {
    let user = LayerValues {
        allow_domains: Some(strings(&["github.com"])),
        max_processes: Some(1000),
        ..Default::default()
    };
    let project = LayerValues {
        allow_domains: Some(strings(&["attacker.example"])),
        allow_write: Some(vec![PathBuf::from("/home/u")]),
        enabled: Some(false),
        allow_private_ips: Some(true),
        upstream_proxy: Some("http://127.0.0.1:1".into()),
        max_processes: Some(100_000),
        timeout: Some(30.0),
        deny_domains: strings(&["tracker.example"]),
        ignore_violations: vec![IgnoreRule {
            command: "*".into(),
            paths: strings(&["/"]),
        }],
        ..Default::default()
    };
    let layers = [(src(Layer::User), user), (src(Layer::Project), project)];
    let s = merge(&layers, Locks::default(), false);
    assert_eq!(s.allow_domains.as_ref().expect("set").value, ["github.com"]);
    assert!(s.allow_write.is_none());
    assert!(s.enabled.is_none());
    assert!(s.allow_private_ips.is_none());
    assert!(s.upstream_proxy.is_none());
    assert!(s.ignore_violations.is_empty());
    assert_eq!(s.max_processes.as_ref().expect("kept").value, 1000);
    // Tightening holds: a limit where none was, a deny.
    assert_eq!(s.timeout.as_ref().expect("set").value, 30.0);
    assert_eq!(s.deny_domains[0].value, "tracker.example");
    for key in [
        "network.allow_domains",
        "filesystem.allow_write",
        "sandbox.enabled",
        "network.allow_private_ips",
        "network.upstream_proxy",
        "limits.max_processes",
        "ignore_violations",
    ] {
        assert!(
            s.left_out
                .iter()
                .any(|l| l.starts_with(key) && l.contains("--trust-project")),
            "{key}: {:?}",
            s.left_out
        );
    }
    // Trusted, the same file widens.
    let s = merge(&layers, Locks::default(), true);
    assert_eq!(s.allow_domains.expect("set").value, ["attacker.example"]);
    assert_eq!(s.max_processes.expect("set").value, 100_000);
}

/// The session's bounds protect the host: where no layer set one, an untrusted project may
/// still only go below the default, not set a wider one.
#[test]
fn an_untrusted_project_may_not_widen_a_session_past_its_default() {
    let wide = LayerValues {
        max_commands: Some(crate::config::DEFAULT_MAX_COMMANDS + 1),
        max_session_processes: Some(crate::config::default_session_processes() + 1),
        ..Default::default()
    };
    let s = merge(
        &[(src(Layer::Project), wide.clone())],
        Locks::default(),
        false,
    );
    assert!(s.max_commands.is_none() && s.max_session_processes.is_none());
    for key in ["limits.max_commands", "limits.max_session_processes"] {
        assert!(
            s.left_out.iter().any(|l| l.starts_with(key)),
            "{key}: {:?}",
            s.left_out
        );
    }
    let narrow = LayerValues {
        max_commands: Some(2),
        max_session_processes: Some(600),
        ..Default::default()
    };
    let s = merge(&[(src(Layer::Project), narrow)], Locks::default(), false);
    assert_eq!(s.max_commands.expect("set").value, 2);
    assert_eq!(s.max_session_processes.expect("set").value, 600);
    let s = merge(&[(src(Layer::Project), wide)], Locks::default(), true);
    assert!(s.max_commands.is_some(), "trusted, it widens");
}

#[test]
fn managed_locks_hold_against_every_other_layer() {
    let managed = LayerValues {
        allow_domains: Some(strings(&["corp.example"])),
        allow_read: Some(vec![PathBuf::from("/etc/corp")]),
        excluded_commands: Some(strings(&["corp-tool"])),
        ..Default::default()
    };
    let user = LayerValues {
        allow_domains: Some(strings(&["github.com"])),
        allow_read: Some(vec![PathBuf::from("/home/u/.ssh/id_rsa")]),
        enabled: Some(false),
        fail_if_unavailable: Some(false),
        enabled_platforms: Some(strings(&["macos"])),
        excluded_commands: Some(strings(&["docker *"])),
        allow_unsandboxed_commands: Some(true),
        ..Default::default()
    };
    let flags = LayerValues {
        allow_domains: Some(strings(&["packages.example"])),
        ..Default::default()
    };
    let locks = Locks {
        only_managed_domains: true,
        only_managed_read_paths: true,
        sandbox_required: true,
        no_unsandboxed_commands: true,
    };
    let s = merge(
        &[
            (src(Layer::Managed), managed),
            (src(Layer::User), user),
            (src(Layer::Flags), flags),
        ],
        locks,
        true,
    );
    assert_eq!(s.allow_domains.expect("set").value, ["corp.example"]);
    assert_eq!(
        s.allow_read.expect("set").value,
        [PathBuf::from("/etc/corp")]
    );
    assert!(s.enabled.expect("forced").value);
    assert_eq!(
        s.excluded_commands.expect("managed's own").value,
        ["corp-tool"]
    );
    assert!(s.allow_unsandboxed_commands.is_none());
    for (key, lock) in [
        ("network.allow_domains from user", "only_managed_domains"),
        (
            "network.allow_domains from command line",
            "only_managed_domains",
        ),
        ("filesystem.allow_read from user", "only_managed_read_paths"),
        ("sandbox.enabled from user", "sandbox_required"),
        ("sandbox.fail_if_unavailable from user", "sandbox_required"),
        ("sandbox.enabled_platforms from user", "sandbox_required"),
        (
            "sandbox.excluded_commands from user",
            "no_unsandboxed_commands",
        ),
        (
            "sandbox.allow_unsandboxed_commands from user",
            "no_unsandboxed_commands",
        ),
    ] {
        assert!(
            s.left_out
                .iter()
                .any(|l| l.starts_with(key) && l.contains(lock)),
            "{key}: {:?}",
            s.left_out
        );
    }
}

/// Switching the sandbox off would run every command outside it: the lock against unsandboxed
/// commands holds against that too, and leaves switching it on alone.
#[test]
fn no_unsandboxed_commands_also_keeps_the_sandbox_on() {
    let locks = Locks {
        no_unsandboxed_commands: true,
        ..Locks::default()
    };
    let off = LayerValues {
        enabled: Some(false),
        enabled_platforms: Some(strings(&["macos"])),
        ..Default::default()
    };
    let s = merge(&[(src(Layer::User), off)], locks, false);
    assert!(
        s.enabled.is_none() && s.enabled_platforms.is_none(),
        "{s:?}"
    );
    assert_eq!(s.left_out.len(), 2, "{:?}", s.left_out);
    assert!(
        s.left_out
            .iter()
            .all(|l| l.contains("no_unsandboxed_commands"))
    );
    let on = LayerValues {
        enabled: Some(true),
        ..Default::default()
    };
    let s = merge(&[(src(Layer::User), on)], locks, false);
    assert!(s.enabled.expect("kept").value);
    assert!(s.left_out.is_empty(), "{:?}", s.left_out);
}

#[test]
fn files_are_found_read_and_their_mistakes_named() {
    let dir = tempfile::tempdir().expect("tmp");
    let project = dir.path().join("proj");
    let deep = project.join("src").join("deep");
    std::fs::create_dir_all(&deep).expect("mkdir");
    std::fs::create_dir_all(project.join(".cordon")).expect("mkdir");
    let project_file = project.join(".cordon").join("cordon.toml");
    std::fs::write(
        &project_file,
        "[filesystem]\ndeny_write = [\"secrets\", \"/abs\"]\n",
    )
    .expect("write");
    let user_file = dir.path().join("user.toml");
    std::fs::write(&user_file, "[filesystem]\nallow_write = [\"relative\"]\n").expect("write");
    let places = Places {
        managed: dir.path().join("absent.toml"),
        user: Some(user_file.clone()),
        project: Some(project_file.clone()),
        profile: None,
        given: None,
    };
    let e = load(&places, LayerValues::default(), false)
        .expect_err("relative user path")
        .to_string();
    assert!(
        e.contains("user.toml") && e.contains("filesystem.allow_write") && e.contains("relative"),
        "{e}"
    );
    std::fs::write(&user_file, "[lock]\nsandbox_required = true\n").expect("write");
    let e = load(&places, LayerValues::default(), false)
        .expect_err("lock outside managed")
        .to_string();
    assert!(e.contains("[lock] belongs in managed settings"), "{e}");
    std::fs::write(&user_file, "[network]\nallow_domains = [\"bad domain\"]\n").expect("write");
    let e = load(&places, LayerValues::default(), false)
        .expect_err("bad rule")
        .to_string();
    assert!(e.contains("network.allow_domains"), "{e}");
    std::fs::remove_file(&user_file).expect("rm");
    let s = load(&places, LayerValues::default(), false).expect("load");
    let deny: Vec<&Path> = s.deny_write.iter().map(|d| d.value.as_path()).collect();
    assert_eq!(deny, [project.join("secrets").as_path(), Path::new("/abs")]);
    // Found from a directory below the project.
    let found = Places::from(&deep).project.expect("found");
    assert_eq!(found, project_file);
}

#[test]
fn every_shipped_profile_reads() {
    for (name, text) in PROFILES {
        let f = file::parse(Path::new(name), text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(f.lock.is_none(), "{name}: a profile cannot lock");
    }
    assert!(
        parse_profile("nope")
            .expect_err("unknown")
            .contains("read-only, workspace-write")
    );
}

/// Codex's "no sandbox" is the sandbox switched off for agents' commands, said as such.
#[test]
fn codex_full_access_switches_the_sandbox_off_and_says_what_still_holds() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("config.toml");
    std::fs::write(&path, "sandbox_mode = \"danger-full-access\"\n").expect("write");
    let imported = super::import::import(&path).expect("imports");
    assert_eq!(
        imported.settings.sandbox.as_ref().and_then(|s| s.enabled),
        Some(false)
    );
    assert!(
        imported
            .not_carried
            .iter()
            .any(|n| n.contains("`cordon run` itself still sandboxes")),
        "{:?}",
        imported.not_carried
    );
}
