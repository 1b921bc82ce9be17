//! Fuzzes the generator's response framing: arbitrary bytes, fed in arbitrary pieces, must
//! never panic, never claim more bytes than it was given, and always make progress or ask
//! for more. Run: `cargo +nightly fuzz run response_parser` (from the repository root).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tailscope_loadgen::http::ResponseParser;

fuzz_target!(|data: &[u8]| {
    let Some((&split, bytes)) = data.split_first() else { return };
    let method = if split & 1 == 0 { "GET" } else { "HEAD" };
    let step = usize::from(split >> 1).max(1);
    let mut parser = ResponseParser::new(method);
    let mut pending: Vec<u8> = Vec::new();
    for piece in bytes.chunks(step) {
        pending.extend_from_slice(piece);
        loop {
            match parser.parse(&pending) {
                Ok(p) => {
                    assert!(p.consumed <= pending.len());
                    pending.drain(..p.consumed);
                    if p.completed.is_none() {
                        break;
                    }
                }
                Err(_) => return,
            }
        }
    }
    let _ = parser.on_eof(pending.len());
});
