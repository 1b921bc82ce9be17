//! The files a command reads and writes, checked before anything runs.

use crate::UsageError;

/// Checks that a report (`what`, written for `flag`) can be written to `path` before the run,
/// so a long run does not end with its report lost. `-` (stdout) always can. A file that did
/// not exist is created and removed again.
pub fn check_writable(path: &std::path::Path, what: &str, flag: &str) -> Result<(), String> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    // procfs and sysfs open their files for writing and then refuse what is written (a
    // newcomer's `--json /proc/version` sent the whole load, then failed with EIO).
    // A pipe, socket or terminal named through /dev/fd or /proc/self/fd (`--json >(jq .)`)
    // is written like any stream.
    let stream = std::fs::metadata(path).is_ok_and(|m| {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        t.is_fifo() || t.is_socket() || t.is_char_device()
    });
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| std::env::current_dir().ok(), |p| p.canonicalize().ok());
    if !stream && dir.is_some_and(|d| d.starts_with("/proc") || d.starts_with("/sys")) {
        return Err(format!(
            "cannot write the {what} to {}: /proc and /sys hold the kernel's files, not reports; pick a writable path ({flag})",
            path.display()
        ));
    }
    let existed = path.exists();
    match std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
    {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => Err(format!(
            "cannot write the {what} to {}: {e}; pick a writable path ({flag})",
            path.display()
        )),
    }
}

/// A file a command writes, named by the flag that asked for it.
pub struct Output<'a> {
    /// The flag (`--json`).
    pub flag: &'static str,
    /// What goes there, for the message (`JSON report`).
    pub what: &'static str,
    /// Where.
    pub path: &'a std::path::Path,
}

impl<'a> Output<'a> {
    /// An output, when its flag was given.
    pub fn of(
        flag: &'static str,
        what: &'static str,
        path: Option<&'a std::path::Path>,
    ) -> Option<Output<'a>> {
        path.map(|path| Output { flag, what, path })
    }
}

/// Checks the files a command reads and writes before anything runs, so that no run ends
/// with its report lost or a report destroyed: every output can be written (only `--json`
/// may be `-`, stdout; the others would make a file named `-`), and none is an input or
/// another output (writing it would truncate the other).
pub fn check_files(inputs: &[&std::path::Path], outputs: &[Output<'_>]) -> Result<(), UsageError> {
    for (i, out) in outputs.iter().enumerate() {
        if out.path.as_os_str() == "-" {
            if out.flag != "--json" {
                return Err(UsageError(format!(
                    "{} takes a file path, not '-': only --json writes to stdout",
                    out.flag
                )));
            }
            continue;
        }
        let id = FileId::of(out.path);
        if let Some(input) = inputs.iter().find(|p| FileId::of(p) == id) {
            return Err(UsageError(format!(
                "{} is the same file as the input {}: writing it would destroy what is read; give {} a path of its own",
                out.flag,
                input.display(),
                out.flag
            )));
        }
        if let Some(other) = outputs[..i]
            .iter()
            .find(|o| o.path.as_os_str() != "-" && FileId::of(o.path) == id)
        {
            return Err(UsageError(format!(
                "{} is the same file as {} ({}): give each output a path of its own",
                out.flag,
                other.flag,
                out.path.display()
            )));
        }
    }
    for out in outputs {
        check_writable(out.path, out.what, out.flag).map_err(UsageError)?;
    }
    Ok(())
}

/// What makes two paths the same file: the device and inode of a file that exists, else the
/// path made absolute and normalised (its directory resolved through symlinks when it exists).
#[derive(Debug, PartialEq, Eq)]
enum FileId {
    Inode(u64, u64),
    Path(std::path::PathBuf),
}

impl FileId {
    fn of(path: &std::path::Path) -> FileId {
        use std::os::unix::fs::MetadataExt as _;
        if let Ok(m) = std::fs::metadata(path) {
            return FileId::Inode(m.dev(), m.ino());
        }
        let absolute =
            std::env::current_dir().map_or_else(|_| path.to_path_buf(), |d| d.join(path));
        let mut normal = std::path::PathBuf::new();
        for part in absolute.components() {
            match part {
                std::path::Component::CurDir => {}
                std::path::Component::ParentDir => {
                    normal.pop();
                }
                other => normal.push(other),
            }
        }
        if let (Some(dir), Some(name)) = (normal.parent(), normal.file_name()) {
            if let Ok(dir) = dir.canonicalize() {
                return FileId::Path(dir.join(name));
            }
        }
        FileId::Path(normal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn out<'a>(flag: &'static str, path: &'a Path) -> Output<'a> {
        Output {
            flag,
            what: "report",
            path,
        }
    }

    #[test]
    fn an_output_that_is_an_input_or_another_output_is_refused() {
        let dir = std::env::temp_dir().join(format!("tailscope-files-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let input = dir.join("in.json");
        std::fs::write(&input, "{}").unwrap();
        let err =
            check_files(&[&input], &[out("--html", &dir.join("sub/../in.json"))]).unwrap_err();
        assert!(
            err.0.contains("--html is the same file as the input"),
            "{err}"
        );
        std::fs::hard_link(&input, dir.join("link.json")).unwrap();
        assert!(check_files(&[&input], &[out("--html", &dir.join("link.json"))]).is_err());
        let fresh = dir.join("fresh.out");
        let err = check_files(
            &[],
            &[
                out("--json", &fresh),
                out("--html", &dir.join("./sub/../fresh.out")),
            ],
        )
        .unwrap_err();
        assert!(err.0.contains("--html is the same file as --json"), "{err}");
        assert!(!fresh.exists(), "a refused check leaves no file behind");
        check_files(&[&input], &[out("--json", Path::new("-"))]).expect("stdout is not a file");
        // A pipe named through /dev/fd (`--json >(jq .)`) is no kernel file.
        let (read_end, write_end) = std::io::pipe().unwrap();
        let named = format!("/dev/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&write_end));
        check_writable(Path::new(&named), "JSON report", "--json").expect("a pipe can be written");
        drop((read_end, write_end));
        let kernel =
            check_writable(Path::new("/proc/version"), "JSON report", "--json").unwrap_err();
        assert!(
            kernel.contains("/proc and /sys hold the kernel's files"),
            "{kernel}"
        );
        for flag in ["--markdown", "--html", "--hdr-log", "--flamegraph"] {
            let err = check_files(&[], &[out(flag, Path::new("-"))]).unwrap_err();
            assert!(
                err.0.contains("only --json writes to stdout"),
                "{flag}: {err}"
            );
        }
        check_files(
            &[&input],
            &[out("--json", &fresh), out("--html", &dir.join("b.html"))],
        )
        .expect("distinct paths");
        assert!(!fresh.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
