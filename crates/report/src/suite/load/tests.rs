//! The typed load writes the very bytes the `json!` object wrote, and reads absent keys as
//! absent.

use super::*;
use crate::suite::file::parse;

/// A suite file with `load` as its [load] section and one endpoint, `endpoint`.
fn suite(load: &str, endpoint: &str) -> String {
    format!(
        "[load]\n{load}\n[[target]]\nname = \"reference\"\nkind = \"embedded\"\n[[endpoint]]\n{endpoint}\n"
    )
}

/// The loads of the kinds a suite runs: closed, open, counted, stages (closed and open), with
/// CPUs and threads, and a request mix as the endpoint.
fn loads() -> Vec<(&'static str, Load)> {
    let dir = std::env::temp_dir().join(format!("ts-suite-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("mix.toml"),
        "[[request]]\npath = \"/json\"\nweight = 3\n[[request]]\npath = \"/plaintext\"\n",
    )
    .unwrap();
    let path = "path = \"/plaintext\"";
    let cases = [
        (
            "closed",
            "connections = 64\nduration = \"10s\"\nwarmup = \"3s\"\nruns = 3",
            path,
        ),
        (
            "open",
            "rate = 2500.5\narrival = \"poisson\"\npipeline = 4",
            path,
        ),
        (
            "counted",
            "runs = 25\nrequests = 2500\nwarmup_requests = 300",
            path,
        ),
        (
            "stages closed",
            "stages = \"1s:c=4,500ms:c=16\"\nthreads = 2\nserver_cpus = \"0\"\nclient_cpus = \"1\"",
            path,
        ),
        ("stages open", "stages = \"2s:1000,1s:250.25\"", path),
        (
            "mix",
            "connections = 8\nduration = \"1500ms\"",
            "load = \"mix.toml\"",
        ),
    ];
    let loads = cases
        .into_iter()
        .map(|(name, load, endpoint)| {
            let s = parse(&dir.join("s.toml"), &suite(load, endpoint))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, s.load)
        })
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    loads
}

/// What the suite report's load was for each of [`loads`], as the untyped `json!` object
/// (Load::to_json, up to 7d9cc8d) wrote it: the typed load must write the same bytes.
const WRITTEN: [(&str, &str); 6] = [
    (
        "closed",
        r#"{"arrival":null,"client_cpus":[2,3],"connections":64,"duration_s":10.0,"pipeline":1,"rate":null,"requests":null,"runs":3,"server_cpus":[0,1],"stages":[],"threads":null,"warmup_requests":null,"warmup_s":3.0}"#,
    ),
    (
        "open",
        r#"{"arrival":"poisson","client_cpus":[2,3],"connections":64,"duration_s":10.0,"pipeline":4,"rate":2500.5,"requests":null,"runs":3,"server_cpus":[0,1],"stages":[],"threads":null,"warmup_requests":null,"warmup_s":3.0}"#,
    ),
    (
        "counted",
        r#"{"arrival":null,"client_cpus":[2,3],"connections":64,"duration_s":null,"pipeline":1,"rate":null,"requests":2500,"runs":25,"server_cpus":[0,1],"stages":[],"threads":null,"warmup_requests":300,"warmup_s":null}"#,
    ),
    (
        "stages closed",
        r#"{"arrival":"uniform","client_cpus":[1],"connections":64,"duration_s":10.0,"pipeline":1,"rate":null,"requests":null,"runs":3,"server_cpus":[0],"stages":[{"connections":4,"duration_s":1.0},{"connections":16,"duration_s":0.5}],"threads":2,"warmup_requests":null,"warmup_s":3.0}"#,
    ),
    (
        "stages open",
        r#"{"arrival":"uniform","client_cpus":[2,3],"connections":64,"duration_s":10.0,"pipeline":1,"rate":null,"requests":null,"runs":3,"server_cpus":[0,1],"stages":[{"duration_s":2.0,"rate":1000.0},{"duration_s":1.0,"rate":250.25}],"threads":null,"warmup_requests":null,"warmup_s":3.0}"#,
    ),
    (
        "mix",
        r#"{"arrival":null,"client_cpus":[2,3],"connections":8,"duration_s":1.5,"pipeline":1,"rate":null,"requests":null,"runs":3,"server_cpus":[0,1],"stages":[],"threads":null,"warmup_requests":null,"warmup_s":3.0}"#,
    ),
];

#[test]
fn the_typed_load_writes_the_bytes_the_json_object_wrote() {
    let loads = loads();
    assert_eq!(loads.len(), WRITTEN.len());
    for ((name, load), (written_name, written)) in loads.into_iter().zip(WRITTEN) {
        assert_eq!(name, written_name);
        let (server, client) = (
            load.server_cpus.clone().unwrap_or(vec![0, 1]),
            load.client_cpus.clone().unwrap_or(vec![2, 3]),
        );
        let new = load.report(&server, &client);
        assert_eq!(serde_json::to_string(&new).unwrap(), written, "{name}");
        // Read back, it is the same load.
        let back: SuiteLoad = serde_json::from_str(written).unwrap();
        assert_eq!(back, new, "{name}");
    }
}

#[test]
fn a_key_absent_stays_absent_and_null_stays_null() {
    let empty: SuiteLoad = serde_json::from_str("{}").unwrap();
    assert_eq!(empty, SuiteLoad::default());
    assert_eq!(serde_json::to_string(&empty).unwrap(), "{}");
    let closed: SuiteLoad = serde_json::from_str(r#"{"rate": null, "connections": 50}"#).unwrap();
    assert_eq!(closed.rate, Some(None), "null: recorded as a closed loop");
    assert_eq!(closed.duration_s, None, "absent: not recorded");
    assert_eq!(
        serde_json::to_string(&closed).unwrap(),
        r#"{"connections":50,"rate":null}"#
    );
}
