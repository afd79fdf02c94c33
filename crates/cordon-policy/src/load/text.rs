//! Reading a settings or policy file from where cordon looks for one.

use std::io::Read;
use std::path::Path;

/// The largest settings or policy file read: far past anything written by hand.
pub const MAX_SETTINGS_BYTES: u64 = 4 << 20;

/// The text of the settings or policy file at `path`, if it is a regular file of at most
/// [`MAX_SETTINGS_BYTES`]. Whatever else stands at a place cordon reads settings from would
/// hold it: a FIFO until someone writes to it (for ever, in an agent's hook), `/dev/zero`
/// until memory runs out. Such a file is refused with an error that says why; the check is of
/// the file opened, so nothing can be put in its place after it. A missing file is
/// `NotFound`, as from `std::fs::read_to_string`, for callers that skip those.
pub fn read_settings_text(path: &Path) -> std::io::Result<String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Without O_NONBLOCK the open of a FIFO itself waits for a writer; a terminal opened
        // without O_NOCTTY could become this process's.
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device, socket or directory); cordon reads settings and policy only from regular files: put a file there, or remove it",
        ));
    }
    let too_large = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than {} MiB, which no settings or policy file needs; is it the right file?",
                MAX_SETTINGS_BYTES >> 20
            ),
        )
    };
    if meta.len() > MAX_SETTINGS_BYTES {
        return Err(too_large());
    }
    let mut text = String::new();
    // A file that grows while it is read stops at the limit too.
    file.take(MAX_SETTINGS_BYTES + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > MAX_SETTINGS_BYTES {
        return Err(too_large());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_and_a_missing_one_is_not_found() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("cordon.toml");
        std::fs::write(&file, "[sandbox]\n").expect("write");
        assert_eq!(read_settings_text(&file).expect("read"), "[sandbox]\n");
        let missing = read_settings_text(&dir.path().join("none.toml")).expect_err("missing");
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }

    /// Each of these held the reader for ever (a FIFO nobody writes to) or without bound
    /// (`/dev/zero`); a directory only failed later, with a less helpful error.
    #[cfg(unix)]
    #[test]
    fn what_is_not_a_regular_file_is_refused_at_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("cordon.toml");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid C string, and mkfifo takes no other pointer.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        for path in [fifo.as_path(), Path::new("/dev/zero"), dir.path()] {
            let e = read_settings_text(path).expect_err("refused");
            assert_eq!(
                e.kind(),
                std::io::ErrorKind::InvalidInput,
                "{}",
                path.display()
            );
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
    }

    #[test]
    fn a_file_past_the_limit_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("cordon.toml");
        let f = std::fs::File::create(&file).expect("create");
        f.set_len(MAX_SETTINGS_BYTES + 1).expect("grow");
        let e = read_settings_text(&file).expect_err("refused");
        assert!(e.to_string().contains("larger than 4 MiB"), "{e}");
    }
}
