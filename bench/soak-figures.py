#!/usr/bin/env python3
"""Figures of a bench/soak-hour.sh directory: per run, RSS and open fds at its first and last
samples, journal bytes an hour, and the generator's CPU per request over its first and last
sampled minutes (utime+stime between two samples over the requests the JSON report's time
series has between the same instants, placed by generator.started_unix_s).
Usage: bench/soak-figures.py OUTDIR [YYYY-MM-DD]   (the samples' UTC date; default today)"""
import datetime, json, sys
from collections import defaultdict

out = sys.argv[1]
day = sys.argv[2] if len(sys.argv) > 2 else datetime.date.today().isoformat()
TICK_US = 1e6 / 100  # USER_HZ

rows = defaultdict(list)
with open(f"{out}/samples.tsv") as f:
    next(f)
    for line in f:
        minute, utc, run, rss, fds, ticks, jb = line.rstrip("\n").split("\t")
        at = datetime.datetime.fromisoformat(f"{day}T{utc}+00:00").timestamp()
        rows[run].append((at, int(rss), int(fds), int(ticks), None if jb == "n/a" else int(jb)))


def requests_by(series, t):
    """Requests finished by t seconds into the run (whole seconds; the one t falls in pro rata)."""
    done, before = 0.0, 0.0
    for p in series:
        if p["t_s"] <= t:
            done += p["requests"]
        else:
            width = p["t_s"] - before
            done += p["requests"] * max(0.0, t - before) / width if width > 0 else 0
            break
        before = p["t_s"]
    return done


def cpu_us_per_request(report, a, b):
    start = report["generator"]["started_unix_s"]
    n = requests_by(report["timeseries"], b[0] - start) - requests_by(report["timeseries"], a[0] - start)
    return (b[3] - a[3]) * TICK_US / n if n > 0 else float("nan")


print("| run | requests (errors) | RSS KiB first → mid → last sample | fds first → last | journal bytes an hour | CPU µs/request first minute → last minute (whole run) | RSS KiB sampled after the load ended (the report being built) |")
print("|---|---|---|---|---|---|---|")
for run in ["ref-open", "ref-closed", "ngx-open", "ngx-closed"]:
    s = rows.get(run)
    if not s or len(s) < 4:
        continue
    try:
        report = json.load(open(f"{out}/{run}.json"))
    except (OSError, ValueError):
        print(f"| {run} | n/a (no JSON report) | | | | | |")
        continue
    gen = report["generator"]
    after = [r for r in s if r[0] >= gen["ended_unix_s"]]  # building the report, then gone
    s = [r for r in s if gen["started_unix_s"] <= r[0] < gen["ended_unix_s"]]
    # s[0] is the run's first seconds; s[1] ends its first whole minute
    first, last = (s[1], s[2]), (s[-2], s[-1])
    jb = (s[-1][4] - s[1][4]) / (s[-1][0] - s[1][0]) * 3600
    whole = cpu_us_per_request(report, s[1], s[-1])
    sm = report["summary"]
    mid = s[len(s) // 2]
    print(f"| {run} | {sm['requests']:,} ({sm.get('errors', 'n/a')}) | {s[1][1]:,} → {mid[1]:,} → {s[-1][1]:,} "
          f"(minutes {round((s[1][0]-s[0][0])/60)+0}, {round((mid[0]-s[0][0])/60)}, {round((s[-1][0]-s[0][0])/60)} of this sampling) "
          f"| {s[1][2]} → {s[-1][2]} | {jb/1e6:.2f} MB | {cpu_us_per_request(report, *first):.1f} → {cpu_us_per_request(report, *last):.1f} ({whole:.1f}) "
          f"| {max((r[1] for r in after), default='n/a')} |")
