//! Fuzzes the reference server's request parsing and routing: arbitrary bytes must never
//! panic, a complete request never claims more bytes than it was given, and pipelined
//! requests are consumed one after another until the input runs out or is rejected; a
//! `/static/` path never resolves outside its root.
//! Run: `cargo +nightly fuzz run request_parser` (from the repository root).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tailscope_server::http::{parse, Limits, Parsed, Route};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let root = std::env::temp_dir();
    let mut rest = data;
    while let Parsed::Request(r) = parse(rest, &limits) {
        assert!(r.len > 0 && r.len <= rest.len());
        if let Route::Static(path) = r.route {
            if let Ok(file) = tailscope_server::static_files::resolve(&root, path) {
                assert!(file.starts_with(&root));
            }
        }
        rest = &rest[r.len..];
    }
});
