//! `/static/PATH`: files under `--static DIR`, and nothing outside it.
//!
//! The path is percent-decoded once; `..` segments, NUL bytes and invalid encodings are
//! refused outright, and the resolved file must still lie under the canonical root after
//! symlinks are followed.

use std::path::{Path, PathBuf};

use crate::http::Status;

/// Largest file served; larger ones are 404 (the reference server is not a file server).
pub const MAX_FILE: u64 = 64 * 1024 * 1024;

/// Resolves a still-encoded request path against the canonical `root`.
pub fn resolve(root: &Path, encoded: &str) -> Result<PathBuf, Status> {
    let decoded = percent_encoding::percent_decode_str(encoded)
        .decode_utf8()
        .map_err(|_| Status::BadRequest)?;
    if encoded.to_ascii_lowercase().contains("%2f") {
        // An encoded slash would make one segment look like two after decoding.
        return Err(Status::BadRequest);
    }
    let mut path = root.to_path_buf();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => continue,
            ".." => return Err(Status::BadRequest),
            s if s.contains('\0') || s.contains('\\') => return Err(Status::BadRequest),
            s => path.push(s),
        }
    }
    let real = path.canonicalize().map_err(|_| Status::NotFound)?;
    if !real.starts_with(root) {
        return Err(Status::NotFound);
    }
    let meta = real.metadata().map_err(|_| Status::NotFound)?;
    if !meta.is_file() || meta.len() > MAX_FILE {
        return Err(Status::NotFound);
    }
    Ok(real)
}

/// A Content-Type from the file's extension.
pub fn content_type(path: &Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("css") => "text/css",
        Some("js") => "text/javascript",
        Some("json") => "application/json",
        Some("txt") => "text/plain; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("ico") => "image/x-icon",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_inside_and_refuses_escapes() {
        let dir = std::env::temp_dir().join(format!("ts-static-{}", std::process::id()));
        let root_dir = dir.join("root");
        std::fs::create_dir_all(root_dir.join("sub")).unwrap();
        std::fs::write(root_dir.join("sub/a b.txt"), "hi").unwrap();
        std::fs::write(dir.join("secret"), "no").unwrap();
        std::os::unix::fs::symlink(dir.join("secret"), root_dir.join("link")).unwrap();
        let root = root_dir.canonicalize().unwrap();
        assert_eq!(
            resolve(&root, "sub/a%20b.txt").unwrap(),
            root.join("sub/a b.txt")
        );
        assert_eq!(
            resolve(&root, "./sub//a%20b.txt").unwrap(),
            root.join("sub/a b.txt")
        );
        for bad in [
            "../secret",
            "%2e%2e/secret",
            "sub/%2E%2E/%2E%2E/secret",
            "..%2fsecret",
            "%2e%2e%2fsecret",
            "a%00b",
            "%ff",
        ] {
            assert_eq!(resolve(&root, bad), Err(Status::BadRequest), "{bad}");
        }
        assert_eq!(
            resolve(&root, "link"),
            Err(Status::NotFound),
            "a symlink out of the root"
        );
        assert_eq!(resolve(&root, "missing"), Err(Status::NotFound));
        assert_eq!(resolve(&root, "sub"), Err(Status::NotFound), "a directory");
        assert_eq!(
            content_type(Path::new("x.HTML")),
            "text/html; charset=utf-8"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
