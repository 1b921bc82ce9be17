#!/usr/bin/env python3
"""Scale figures: what a connection costs the reference server and the generator to hold,
serve and close, at several connection counts. Server on CPU 0, generator(s) on CPU 1."""
import json, subprocess, sys, time, os, signal

BIN = sys.argv[1]
COUNTS = [int(c) for c in sys.argv[2].split(",")]

def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def rss_kb(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])

def serve():
    p = subprocess.Popen(["taskset", "-c", "0", BIN, "serve", "--addr", "127.0.0.1:0", "--threads", "1", "--max-conns", "40000"], stdout=subprocess.PIPE)
    addr = p.stdout.readline().decode().strip().split("http://")[1]
    return p, addr

def stop(p):
    t = time.monotonic(); p.send_signal(signal.SIGINT); p.wait(); return time.monotonic() - t

for n in COUNTS:
    # Serve: closed loop, n connections, one generator thread.
    p, addr = serve()
    t0 = time.monotonic()
    out = subprocess.run(["taskset", "-c", "1", BIN, "run", f"http://{addr}/", "-c", str(n), "--threads", "1", "-z", "3s",
                          "--pid", str(p.pid), "--json", "-"], capture_output=True)
    wall = time.monotonic() - t0
    r = json.loads(out.stdout)
    s = r["summary"]; prof = r["profile"]
    over = wall - s["duration_s"] - (s.get("grace_s") or 0)
    print(f"serve n={n}: {s['rps']:.0f} req/s, server {prof['target'].get('service_demand_us') or float('nan'):.2f} µs CPU/req, "
          f"generator {prof['generator'].get('cpu_us_per_request') or float('nan'):.2f} µs CPU/req, p99 {r['latency_us']['p99']} µs, "
          f"opened {s['connections_opened']}, generator exit {over:+.2f} s past run+grace ({wall:.2f} s wall)")
    stop(p)
    # Hold and close: n idle connections held by a second generator, then closed at once.
    p, addr = serve()
    rss0 = rss_kb(p.pid)
    g = subprocess.Popen(["taskset", "-c", "1", BIN, "run", f"http://{addr}/", "-c", "1", "-q", "10", "--warmup", "3s", "-z", "2s",
                          "--idle-conns", str(n), "--source-addrs", "auto", "--connect-rate", "20000/s", "--connect-timeout", "20s",
                          "--json", "-"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    time.sleep(3.5)
    rss1 = rss_kb(p.pid); c1 = cpu_s(p.pid)
    time.sleep(1.0)
    c2 = cpu_s(p.pid)
    gr = json.loads(g.communicate()[0])
    opened = gr["connections"]["idle"]["opened"]
    c3 = cpu_s(p.pid)
    time.sleep(1.0)
    c4 = cpu_s(p.pid)
    # Closing: the server's CPU from the held second's end through 1 s after the generator exits,
    # less what that second of holding cost.
    close_us = max(0.0, (c4 - c2) - (c2 - c1)) * 1e6
    ex = stop(p)
    print(f"hold/close n={n}: opened {opened}, server RSS +{(rss1 - rss0) / max(opened,1):.2f} KiB/conn held, "
          f"holding {(c2 - c1) * 1e3:.0f} ms CPU/s, closing {close_us / max(opened,1):.2f} µs CPU/conn "
          f"({close_us / 1e3:.0f} ms for all), serve exit {ex:.2f} s after SIGINT")
