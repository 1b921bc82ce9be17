# tailscope as an orchestrator runs it (examples/kubernetes): built in the official Rust image,
# run on a slim Debian base holding the binary and a shell (the merge Job's glob needs one).
#
#   docker build -t tailscope:latest .
#   docker run --rm --network host tailscope:latest run http://127.0.0.1:8080/ -z 10s
#
# The generator needs no privilege. The profiler's perf counters and `--stacks` need
# CAP_PERFMON (or kernel.perf_event_paranoid <= 0) and say "n/a" without it; the embedded
# reference server (`--target embedded`, `serve`) needs io_uring, which some container runtimes'
# seccomp profiles block (it then says so and exits 1).
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
# The registry and target caches make a rebuild after a source change take minutes, not tens.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin tailscope \
    && cp target/release/tailscope /usr/local/bin/tailscope

FROM debian:bookworm-slim
COPY --from=build /usr/local/bin/tailscope /usr/local/bin/tailscope
# Reports go to a mounted volume (/out in the Kubernetes example).
WORKDIR /out
ENTRYPOINT ["tailscope"]
CMD ["--help"]
