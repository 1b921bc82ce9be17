//! What is under test and how it is watched (issues: targets, profiler).
//!
//! Not built yet. It will launch and tear down the server under test (the embedded reference
//! server as `current_exe() serve`, nginx from a generated config, or any command), pin the
//! server and the generator to disjoint CPUs, and profile the run: per-core perf counters,
//! /proc per-core CPU, the target's own CPU, and the kernel's TCP counters.
