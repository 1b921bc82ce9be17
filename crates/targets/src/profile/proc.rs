//! What the profiler reads from /proc: a process's CPU time, its allowed CPUs, the kernel's
//! TCP counters and the network softirqs.

use std::collections::BTreeMap;

/// The TCP counters the report and the forensics read (TcpExt from /proc/net/netstat, Tcp
/// from /proc/net/snmp).
pub const TCP_COUNTERS: [&str; 8] = [
    "ListenOverflows",
    "ListenDrops",
    "TCPSynRetrans",
    "TCPTimeouts",
    "RetransSegs",
    "TCPReqQFullDrop",
    "TCPAbortOnTimeout",
    "TCPLossProbes",
];

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ProcSample {
    pub(super) user_s: f64,
    pub(super) system_s: f64,
}

pub(super) fn sample_process(process: &procfs::process::Process) -> Option<ProcSample> {
    let stat = process.stat().ok()?;
    let tps = procfs::ticks_per_second() as f64;
    Some(ProcSample {
        user_s: stat.utime as f64 / tps,
        system_s: stat.stime as f64 / tps,
    })
}

pub(super) fn cpus_allowed(pid: u32) -> Vec<usize> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Cpus_allowed_list:")
                    .and_then(|v| crate::cpus::parse_list(v).ok())
            })
        })
        .unwrap_or_default()
}

/// Parses the header/value line pairs of /proc/net/netstat or /proc/net/snmp.
pub fn parse_net_counters(text: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((p1, names)), Some((p2, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        if p1 != p2 || !(p1 == "TcpExt" || p1 == "Tcp") {
            continue;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = v.parse::<i64>() {
                out.insert(n.to_string(), v);
            }
        }
    }
    out
}

pub(super) fn read_tcp() -> Option<BTreeMap<String, i64>> {
    let mut all = parse_net_counters(&std::fs::read_to_string("/proc/net/netstat").ok()?);
    all.extend(parse_net_counters(
        &std::fs::read_to_string("/proc/net/snmp").ok()?,
    ));
    Some(all)
}

/// Parses /proc/softirqs into per-CPU (NET_RX, NET_TX) counts.
pub fn parse_softirqs(text: &str) -> Vec<(u64, u64)> {
    let mut rx = Vec::new();
    let mut tx = Vec::new();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let into = match parts.next() {
            Some("NET_RX:") => &mut rx,
            Some("NET_TX:") => &mut tx,
            _ => continue,
        };
        into.extend(parts.filter_map(|v| v.parse::<u64>().ok()));
    }
    rx.into_iter().zip(tx).collect()
}
