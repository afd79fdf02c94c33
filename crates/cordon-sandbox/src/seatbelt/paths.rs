//! Paths as Seatbelt sees them, worked out without touching this machine's file system.
//!
//! Seatbelt compares rules with the path the kernel resolved, and on macOS `/tmp`, `/var` and
//! `/etc` are symbolic links into `/private`. A rule for `/tmp/x` would never match, so every
//! path is written the way the kernel will report it.

use std::path::{Component, Path, PathBuf};

use super::ProfileError;

/// Top-level names macOS links into `/private`.
const PRIVATE_LINKS: [&str; 3] = ["tmp", "var", "etc"];

/// `path` as macOS resolves it: `/tmp/x` → `/private/tmp/x`, `/var/folders/…` →
/// `/private/var/folders/…`, `/etc/hosts` → `/private/etc/hosts`; `.` components and trailing
/// slashes dropped. Only the top-level links are known without a Mac at hand; the front end
/// resolves the rest (`realpath`) before building the spec.
///
/// Refuses relative paths (a rule must not depend on where sandbox-exec starts) and `..`
/// (lexically removing it can name a different file than the kernel resolves).
pub fn canonical(path: &Path) -> Result<PathBuf, ProfileError> {
    let mut out = PathBuf::from("/");
    let mut components = path.components();
    if components.next() != Some(Component::RootDir) {
        return Err(ProfileError::Relative(path.to_path_buf()));
    }
    let mut first = true;
    for c in components {
        match c {
            Component::Normal(name) => {
                if first && PRIVATE_LINKS.iter().any(|l| name == *l) {
                    out.push("private");
                }
                out.push(name);
                first = false;
            }
            Component::CurDir => {}
            Component::ParentDir => return Err(ProfileError::ParentDir(path.to_path_buf())),
            // Unix paths have neither prefixes nor a second root.
            Component::RootDir | Component::Prefix(_) => {}
        }
    }
    Ok(out)
}

/// The directories above `path`, nearest first, without `/`.
pub fn ancestors(path: &Path) -> impl Iterator<Item = &Path> {
    path.ancestors().skip(1).filter(|a| a.parent().is_some())
}

/// `path` as a string for a profile parameter. Paths that are not UTF-8 cannot be passed
/// through sandbox-exec's `-D` reliably from Rust's `String` world, so they are refused.
pub fn text(path: &Path) -> Result<String, ProfileError> {
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| ProfileError::NotUtf8(path.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(p: &str) -> Result<String, ProfileError> {
        canonical(Path::new(p)).map(|p| p.display().to_string())
    }

    #[test]
    fn the_private_links_are_followed_at_the_top_only() {
        assert_eq!(c("/tmp").ok().as_deref(), Some("/private/tmp"));
        assert_eq!(c("/tmp/a b/").ok().as_deref(), Some("/private/tmp/a b"));
        assert_eq!(
            c("/var/folders/x/T").ok().as_deref(),
            Some("/private/var/folders/x/T")
        );
        assert_eq!(c("/etc/hosts").ok().as_deref(), Some("/private/etc/hosts"));
        assert_eq!(c("/Users/me/tmp").ok().as_deref(), Some("/Users/me/tmp"));
        assert_eq!(c("/private/tmp").ok().as_deref(), Some("/private/tmp"));
        assert_eq!(c("/tmpx/y").ok().as_deref(), Some("/tmpx/y"));
        assert_eq!(c("/./etc/./x").ok().as_deref(), Some("/private/etc/x"));
        assert_eq!(c("/").ok().as_deref(), Some("/"));
    }

    #[test]
    fn relative_paths_and_parent_steps_are_refused() {
        assert!(matches!(c("tmp/x"), Err(ProfileError::Relative(_))));
        assert!(matches!(c(""), Err(ProfileError::Relative(_))));
        assert!(matches!(c("/a/../etc"), Err(ProfileError::ParentDir(_))));
    }

    #[test]
    fn ancestors_stop_before_the_root() {
        let a: Vec<_> = ancestors(Path::new("/a/b/c")).collect();
        assert_eq!(a, [Path::new("/a/b"), Path::new("/a")]);
        assert_eq!(ancestors(Path::new("/a")).count(), 0);
    }
}
