//! The io_uring reference HTTP server that `tailscope serve` runs (issue: server).
//!
//! Not built yet. It will be tailscope's calibration target and spike laboratory: a thread per
//! core, each owning its ring, its own `SO_REUSEPORT` listener with multishot accept, multishot
//! recv into a registered provided-buffer ring, pipelined responses in one send, and fault
//! injection (`--stall-every`, a small `--backlog`) so tail spikes can be reproduced on purpose.
