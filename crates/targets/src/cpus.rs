//! Which CPUs the server and the generator get: disjoint sets, so neither steals the other's.

/// The CPUs this process may run on, in order.
pub fn available() -> Vec<usize> {
    let mut ids: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    ids.sort_unstable();
    if ids.is_empty() {
        ids.push(0);
    }
    ids
}

/// The default split: the server gets the first half of the CPUs (at least one), the
/// generator the rest. With a single CPU both share it (and the caller should say so).
pub fn default_split(available: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let server_count = (available.len() / 2).max(1);
    let server = available[..server_count.min(available.len())].to_vec();
    let mut client = available[server.len()..].to_vec();
    if client.is_empty() {
        client = server.clone();
    }
    (server, client)
}

/// A CPU list as the command line writes it: `0`, `0,2`, `0-3`.
pub fn format_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            end += 1;
            i += 1;
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// Parses a CPU list as the command line and the kernel write it: `1`, `0,2`, `0-3,6`.
pub fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    let bad = |part: &str| format!("{part:?} is not a CPU number or range: write e.g. 1 or 0,2-3");
    let mut cpus = Vec::new();
    for part in s.trim().split(',').map(str::trim) {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| bad(part))?;
                let b: usize = b.trim().parse().map_err(|_| bad(part))?;
                if a > b {
                    return Err(bad(part));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad(part))?),
        }
    }
    cpus.dedup();
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_half_and_half_with_at_least_one_each() {
        assert_eq!(default_split(&[0, 1]), (vec![0], vec![1]));
        assert_eq!(default_split(&[0, 1, 2, 3, 4]), (vec![0, 1], vec![2, 3, 4]));
        assert_eq!(default_split(&[3]), (vec![3], vec![3]));
        assert_eq!(format_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(format_list(&[1]), "1");
    }
}
