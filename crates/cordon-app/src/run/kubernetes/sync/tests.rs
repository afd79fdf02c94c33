//! The copy back keeps to the local sandbox's walls: each test plays the pod with a real
//! directory (unpacked from what [`pack`] sent, changed, and packed again by the tar crate) or
//! with a hand-made hostile stream, and checks what this side holds afterwards.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};

use super::*;

struct Pair {
    _tmp: tempfile::TempDir,
    here: PathBuf,
    pod: PathBuf,
    outside: PathBuf,
}

fn pair() -> Pair {
    let tmp = tempfile::tempdir().expect("tempdir");
    let here = tmp.path().join("here");
    let pod = tmp.path().join("pod");
    let outside = tmp.path().join("outside");
    for d in [&here, &pod, &outside] {
        fs::create_dir(d).expect("mkdir");
    }
    Pair {
        _tmp: tmp,
        here,
        pod,
        outside,
    }
}

fn walls(p: &Pair) -> Walls {
    Walls {
        hidden: vec![p.here.join(".env")],
        read_only: vec![p.here.join("vendor")],
        ..Walls::default()
    }
}

/// Sends `here` to the pod directory, lets `change` act there, and returns the pod's
/// directory packed again.
fn round(p: &Pair, change: impl FnOnce(&Path)) -> (Sent, Vec<u8>) {
    let root = Root::open(&p.here).expect("open");
    let mut out = Vec::new();
    let sent = pack(&root, &walls(p), &mut out).expect("pack");
    tar::Archive::new(out.as_slice())
        .unpack(&p.pod)
        .expect("the pod unpacks what was sent");
    change(&p.pod);
    let mut back = tar::Builder::new(Vec::new());
    back.follow_symlinks(false);
    back.append_dir_all(".", &p.pod).expect("pack the pod");
    (sent, back.into_inner().expect("tar"))
}

fn back(p: &Pair, sent: &Sent, stream: &[u8]) -> Report {
    let root = Root::open(&p.here).expect("open");
    unpack(&root, &walls(p), sent, stream).expect("unpack")
}

fn write(path: &Path, text: &str) {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).expect("mkdir");
    }
    fs::write(path, text).expect("write");
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| format!("<{e}>"))
}

#[test]
fn what_the_pod_changed_comes_back_and_nothing_else() {
    let p = pair();
    write(&p.here.join("src/main.rs"), "fn main() {}\n");
    write(&p.here.join("old.txt"), "old\n");
    write(&p.here.join("same.txt"), "same\n");
    write(&p.here.join(".env"), "TOKEN=secret\n");
    write(&p.here.join("run.sh"), "echo\n");
    let mtime = |f: &Path| fs::metadata(f).expect("stat").modified().expect("mtime");
    let here_time = mtime(&p.here.join("same.txt"));
    let (sent, stream) = round(&p, |pod| {
        assert!(!pod.join(".env").exists(), "a hidden file is not sent");
        let secs = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970")
                .as_secs()
        };
        assert_eq!(
            secs(mtime(&pod.join("same.txt"))),
            secs(here_time),
            "times arrive as they are"
        );
        assert_eq!(read(&pod.join("src/main.rs")), "fn main() {}\n");
        write(&pod.join("src/main.rs"), "fn main() { run() }\n");
        write(&pod.join("src/new/lib.rs"), "pub fn run() {}\n");
        fs::remove_file(pod.join("old.txt")).expect("rm");
        fs::set_permissions(pod.join("run.sh"), fs::Permissions::from_mode(0o755)).expect("chmod");
    });
    assert_eq!(sent.files, 4);
    let r = back(&p, &sent, &stream);
    assert_eq!(read(&p.here.join("src/main.rs")), "fn main() { run() }\n");
    assert_eq!(read(&p.here.join("src/new/lib.rs")), "pub fn run() {}\n");
    assert!(!p.here.join("old.txt").exists());
    assert_eq!(read(&p.here.join(".env")), "TOKEN=secret\n");
    let mode = fs::metadata(p.here.join("run.sh"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "the mode change came back");
    assert!(r.refused.is_empty() && r.conflicts.is_empty(), "{r:?}");
    let mut written: Vec<_> = r.written.iter().map(|w| w.display().to_string()).collect();
    written.sort();
    assert_eq!(
        written,
        ["run.sh", "src/main.rs", "src/new", "src/new/lib.rs"]
    );
    assert_eq!(r.removed, [PathBuf::from("old.txt")]);
}

/// What the local sandbox keeps read-only or unreadable is not written by the copy back
/// either, whatever the pod did to it.
#[test]
fn protected_hidden_and_read_only_paths_are_not_copied_back() {
    let p = pair();
    write(&p.here.join(".git/config"), "[core]\n");
    write(&p.here.join("vendor/lib.c"), "int x;\n");
    let (sent, stream) = round(&p, |pod| {
        write(&pod.join(".git/config"), "[core]\n\tfsmonitor = ./evil\n");
        write(&pod.join(".git/hooks/pre-commit"), "#!/bin/sh\nevil\n");
        write(&pod.join(".bashrc"), "evil\n");
        write(&pod.join(".claude/settings.json"), "{}\n");
        write(&pod.join(".env"), "TOKEN=planted\n");
        write(&pod.join("vendor/lib.c"), "evil\n");
        write(&pod.join("ok.txt"), "ok\n");
    });
    let r = back(&p, &sent, &stream);
    assert_eq!(read(&p.here.join(".git/config")), "[core]\n");
    assert_eq!(read(&p.here.join("vendor/lib.c")), "int x;\n");
    for planted in [".git/hooks/pre-commit", ".bashrc", ".claude", ".env"] {
        assert!(!p.here.join(planted).exists(), "{planted} was copied back");
    }
    assert_eq!(read(&p.here.join("ok.txt")), "ok\n");
    let refused: Vec<_> = r
        .refused
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    for want in [
        ".git/config",
        ".git/hooks/pre-commit",
        ".bashrc",
        ".env",
        "vendor/lib.c",
    ] {
        assert!(refused.iter().any(|r| r == want), "{want} in {refused:?}");
    }
}

/// A stream that names paths outside the directory, or a link and then a file through it,
/// writes nothing outside.
#[test]
fn a_hostile_stream_writes_nothing_outside() {
    let p = pair();
    let (sent, _) = round(&p, |_| {});
    let outside = p.outside.to_str().expect("utf-8");
    let mut b = tar::Builder::new(Vec::new());
    let mut raw = |name: &str, kind: tar::EntryType, link: Option<&str>, body: &[u8]| {
        let mut h = tar::Header::new_gnu();
        let field = &mut h.as_gnu_mut().expect("gnu").name;
        field[..name.len()].copy_from_slice(name.as_bytes());
        h.set_entry_type(kind);
        h.set_mode(0o644);
        h.set_size(body.len() as u64);
        if let Some(l) = link {
            h.set_link_name(l).expect("link name");
        }
        h.set_cksum();
        b.append(&h, body).expect("append");
    };
    raw("../escaped", tar::EntryType::Regular, None, b"x");
    raw(
        &format!("{outside}/absolute"),
        tar::EntryType::Regular,
        None,
        b"x",
    );
    raw("out", tar::EntryType::Symlink, Some(outside), b"");
    raw("out/through-link", tar::EntryType::Regular, None, b"x");
    raw("hard", tar::EntryType::Link, Some("/etc/passwd"), b"");
    let stream = b.into_inner().expect("tar");
    let r = back(&p, &sent, &stream);
    assert_eq!(fs::read_dir(&p.outside).expect("ls").count(), 0, "{r:?}");
    assert!(!p.here.parent().expect("parent").join("escaped").exists());
    assert!(!p.here.join("hard").exists());
    // The link itself is as harmless here as in the pod: the local sandbox lets a command make
    // one too. Nothing was written through it.
    assert!(fs::symlink_metadata(p.here.join("out")).is_ok());
    assert_eq!(r.refused.len(), 4, "{r:?}");
}

/// A file the person edited while the command ran keeps their version, whether the pod
/// changed or removed it; so does a file they made that the pod made too.
#[test]
fn this_sides_changes_during_the_run_are_kept() {
    let p = pair();
    write(&p.here.join("edited.txt"), "v1\n");
    write(&p.here.join("kept.txt"), "v1\n");
    fs::create_dir(p.here.join("dir")).expect("mkdir");
    let (sent, stream) = round(&p, |pod| {
        write(&pod.join("edited.txt"), "pod\n");
        fs::remove_file(pod.join("kept.txt")).expect("rm");
        write(&pod.join("both.txt"), "pod\n");
        fs::remove_dir(pod.join("dir")).expect("rmdir");
        write(&pod.join("dir"), "now a file\n");
    });
    write(&p.here.join("edited.txt"), "mine\n");
    write(&p.here.join("kept.txt"), "mine\n");
    write(&p.here.join("both.txt"), "mine\n");
    write(&p.here.join("dir/mine.txt"), "mine\n");
    let r = back(&p, &sent, &stream);
    for f in ["edited.txt", "kept.txt", "both.txt", "dir/mine.txt"] {
        assert_eq!(read(&p.here.join(f)), "mine\n", "{f}");
    }
    let mut conflicts: Vec<_> = r
        .conflicts
        .iter()
        .map(|c| c.display().to_string())
        .collect();
    conflicts.sort();
    assert_eq!(conflicts, ["both.txt", "dir", "edited.txt", "kept.txt"]);
    assert!(r.written.is_empty(), "{r:?}");
}

/// A directory the pod replaced with a file is replaced here too when nothing of this side's
/// is in it; links are sent as links, not followed.
#[test]
fn links_go_as_links_and_an_emptied_directory_gives_way() {
    let p = pair();
    write(&p.outside.join("secret"), "secret\n");
    symlink(&p.outside, p.here.join("link")).expect("symlink");
    write(&p.here.join("dir/a.txt"), "a\n");
    let (sent, stream) = round(&p, |pod| {
        let link = fs::symlink_metadata(pod.join("link")).expect("the link was sent");
        assert!(link.file_type().is_symlink());
        assert!(!pod.join("secret").exists());
        fs::remove_dir_all(pod.join("dir")).expect("rm");
        write(&pod.join("dir"), "file\n");
    });
    let r = back(&p, &sent, &stream);
    assert_eq!(read(&p.here.join("dir")), "file\n", "{r:?}");
    assert_eq!(read(&p.outside.join("secret")), "secret\n");
}
