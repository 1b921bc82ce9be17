#!/bin/bash
# RSS of the reference server holding N idle connections (issue 32: the output buffer was
# allocated at accept, 4 KiB a connection). Opens N connections that never send, then one
# request on a connection opened after them (the one worker accepts in order), and reads
# the server's VmRSS before and after. usage: bench/idle-rss.sh BIN [N, default 19000]
BIN=$1; N=${2:-19000}
ulimit -n "$(ulimit -Hn)"
taskset -c 0 "$BIN" serve --addr 127.0.0.1:0 --threads 1 --max-conns 40000 > /tmp/idle-rss.serve 2>&1 &
SP=$!
for i in $(seq 100); do grep -q listening /tmp/idle-rss.serve && break; sleep 0.05; done
ADDR=$(sed -n 's/.*http:\/\///p' /tmp/idle-rss.serve)
taskset -c 1 python3 - "$ADDR" "$N" "$SP" <<'PY'
import socket, sys
host, port = sys.argv[1].rsplit(':', 1); n = int(sys.argv[2]); pid = sys.argv[3]
def rss():
    for l in open(f'/proc/{pid}/status'):
        if l.startswith('VmRSS:'): return int(l.split()[1])
def answered():
    s = socket.create_connection((host, int(port))); s.settimeout(60)
    s.sendall(b'GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n'); assert s.recv(256).startswith(b'HTTP/1.1 200'); s.close()
answered(); before = rss()
held = [socket.create_connection((host, int(port))) for _ in range(n)]
answered(); after = rss()
print(f"{n} idle connections: server RSS {before} -> {after} KiB, {(after-before)/n:.2f} KiB a connection, {(after-before)/1024:.1f} MiB in all")
PY
kill -INT $SP; wait $SP
