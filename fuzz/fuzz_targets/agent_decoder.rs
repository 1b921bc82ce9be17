//! The agent's frame decoder on arbitrary bytes: it answers (a message, "more", an error)
//! and never panics, and a decoded frame never claims more bytes than it was given.
//! Run: `cargo +nightly fuzz run agent_decoder` (from the repository root).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tailscope_agent::wire::{decode, Reply, Request};

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((_, used))) = decode::<Request>(data) {
        assert!(used <= data.len());
    }
    if let Ok(Some((_, used))) = decode::<Reply>(data) {
        assert!(used <= data.len());
    }
});
