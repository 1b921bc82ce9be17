//! `tailscope find-max` end to end (issue 34): the capacity of a fixed pool of connections on
//! the reference server, and the knee of nginx (one worker) and of Python's http.server,
//! checked by separate runs at the rate found and a quarter above it.

use crate::common;

/// Runs `tailscope find-max ARGS --json FILE` and returns the exit code, the document and
/// stderr.
fn find_max(args: &[&str]) -> (i32, serde_json::Value, String) {
    let dir = common::scratch_dir("find-max");
    let json = dir.path().join("knee.json");
    let mut all = vec!["find-max", "--json", json.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = common::tailscope(&all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc = std::fs::read_to_string(&json)
        .map(|s| serde_json::from_str(&s).unwrap())
        .unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap_or(-1), doc, stderr)
}

/// `program` to run on CPU 0 alone (`taskset -c 0`, which execs it: the child's pid is the
/// program's); `None`, after saying so, without taskset.
fn pinned_to_cpu0(program: &str) -> Option<std::process::Command> {
    if std::process::Command::new("taskset")
        .arg("-V")
        .output()
        .is_err()
    {
        common::skip("taskset not installed (apt-get install util-linux)");
        return None;
    }
    let mut c = std::process::Command::new("taskset");
    c.args(["-c", "0", program]);
    Some(c)
}

/// Whether the machine took the generator's CPU in a step (more than 1 % of its sends waited
/// for one): the step then measured the machine, not the server.
fn machine_interfered(doc: &serde_json::Value) -> bool {
    doc["steps"].as_array().is_some_and(|steps| {
        steps.iter().any(|s| {
            s["late_waited_for_cpu"].as_f64().unwrap_or(0.0)
                > 0.01 * s["requests"].as_f64().unwrap_or(0.0)
        })
    })
}

#[test]
fn find_max_finds_the_capacity_of_a_fixed_pool_of_connections() {
    // A search reads the server's limit: alone among the tests that load the machine.
    let _alone = common::quiet_machine();
    // /delay/5 behind 20 connections: at most 20 / 5 ms = 4,000 requests a second. Each
    // connection carries one request at a time, so above the pool's capacity sends wait for
    // a connection and the backlog grows through the step: the step fails as fallen behind,
    // whatever the noise in its p99. 4 s steps, bisection to 3 %: about 40 s.
    // Server and generator pinned apart: unpinned, the quiet CI machine's generator waited
    // for the server's CPU and the test ended inconclusive in every rehearsal.
    let Some((mut server, addr)) = common::spawn_serve(&["--cpus", "0"]) else {
        return;
    };
    let url = format!("http://{addr}/delay/5");
    let (code, doc, stderr) = find_max(&[
        &url,
        "--cpus",
        "1",
        "-c",
        "20",
        "--slo",
        "p99<100ms",
        "--start-rate",
        "1000",
        "--max-rate",
        "4400",
        "--step",
        "4s",
        "--precision",
        "3",
    ]);
    let _ = server.kill();
    let _ = server.wait();
    let found = doc["highest_pass_rps"].as_f64();
    // The diagnosis of the step at the lowest failing rate, and of the first failing step
    // when the climb's overshoot was another.
    let why = format!("{} {}", doc["diagnosis"], doc["first_fail_diagnosis"]);
    // What a request held its connection for at the lowest rate: 5 ms and what this machine
    // adds to it. 20 connections over it is the most the pool could answer.
    let held_ms = doc["steps"][0]["p50_us"].as_f64().unwrap_or(f64::NAN) / 1000.0;
    let ceiling = (20.0 / held_ms * 1000.0).min(4000.0);
    // The pool's capacity as measured: the most it answered in a step whose sends (half or
    // more) waited for a free connection. Saturated, 20 connections answer as fast as the
    // server and the machine turn them round, and nothing more can be asked of them. On a
    // quiet machine that is 3,556–3,716/s against a ceiling of 3,865; in CI's failed run
    // 3,423/s against 3,769 (the same server answered 3,069–3,423/s in its saturated steps
    // as the machine slowed), and the 3,363 found was 10.8 % below the ceiling but 2 % below
    // what the pool answered.
    let saturated = doc["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(doc["confirmation"].as_array().into_iter().flatten())
        .filter(|s| {
            s["late_no_free_connection"].as_f64().unwrap_or(0.0)
                >= 0.5 * s["requests"].as_f64().unwrap_or(f64::INFINITY)
        })
        .filter_map(|s| s["answered_rps"].as_f64())
        .fold(f64::NAN, f64::max);
    let verdict = (|| {
        if code != 0 {
            return Err(format!("exit {code}"));
        }
        let found = found.ok_or("no rate passed")?;
        if saturated.is_nan() {
            return Err("no step saturated the pool: the search never reached its limit".into());
        }
        // The pool saturated must answer near its ceiling: a generator that turned
        // connections round slowly would make every bound below meaningless.
        if saturated < 0.8 * ceiling {
            return Err(format!(
                "the saturated pool answered {saturated:.0}/s, under 80 % of its ceiling \
                 {ceiling:.0}/s (a request held its connection {held_ms:.2} ms at the lowest rate)"
            ));
        }
        // The issue's bound: within 10 % below the pool's capacity, and never above
        // 20 / 5 ms = 4,000 (nothing answers before its 5 ms).
        let lowest = 0.9 * saturated.min(ceiling);
        if !(found >= lowest && found <= 4000.0) {
            return Err(format!(
                "{found} req/s found, {lowest:.0}–4,000 expected (the saturated pool \
                 answered {saturated:.0}/s; a request held its connection {held_ms:.2} ms at \
                 the lowest rate: ceiling {ceiling:.0}/s)"
            ));
        }
        if !why.contains("no free connection") || !why.contains("queue") {
            return Err(format!("the stop is not named: {why}"));
        }
        Ok(())
    })();
    match verdict {
        Ok(()) => {
            let fail = doc["lowest_fail_rps"].as_f64().unwrap();
            assert!(fail > found.unwrap());
            // The confirmation holds the rate found first (10 s, measured from its start).
            assert_eq!(
                doc["confirmation"][0]["offered_rps"].as_f64(),
                found,
                "{doc:#}"
            );
            assert_eq!(doc["confirmation"][0]["phase"], "hold", "{doc:#}");
            assert_eq!(doc["crossings"][0]["slo"], "p99<100ms");
            // The failing step reads as one the server could not keep up with.
            let first = &doc["steps"][doc["first_fail_step"].as_u64().unwrap() as usize];
            assert!(
                first["unsent_end"].as_u64().unwrap() > 0,
                "{first:#}\n{stderr}"
            );
        }
        Err(e) if machine_interfered(&doc) => {
            common::inconclusive(format!("the generator waited for a CPU: {e}"));
        }
        Err(e) => panic!("{e}\n{doc:#}\n{stderr}"),
    }
}

/// A 10 s open-loop run at `rate` against `url` (with `extra` flags): whether `slo` held
/// (exit 0 of --fail-if).
fn meets(url: &str, rate: f64, slo: &str, extra: &[&str]) -> bool {
    let rate = format!("{rate:.0}");
    let mut args = vec![
        "run",
        url,
        "-q",
        &rate,
        "-z",
        "10s",
        "-c",
        "16",
        "--fail-if",
        slo,
        "--cpus",
        "1",
    ];
    args.extend_from_slice(extra);
    common::tailscope(&args).status.code() == Some(0)
}

/// find-max on a real server from `start_rate` (with `extra` flags), then the check the issue
/// asks for, in runs of their own: 10 s at the rate found (the rate its confirmation held for
/// 10 s, `confirmed_rps`) meets the SLO, 10 s at 1.25× it does not. On a machine that took
/// the generator's CPU in a step the result is inconclusive, else it must hold.
fn found_rate_holds_and_a_quarter_more_does_not(
    url: &str,
    slo: &str,
    start_rate: &str,
    extra: &[&str],
) {
    let mut args = vec![
        url,
        "-c",
        "16",
        "--slo",
        slo,
        "--start-rate",
        start_rate,
        "--max-rate",
        "12800",
        "--step",
        "3s",
        "--precision",
        "10",
        "--cpus",
        "1",
    ];
    args.extend_from_slice(extra);
    // Other work on the machine slows the server by more than its knee's width: a search
    // and the checks after it then measure that work (seen at load average 13: the same
    // nginx answered 110/s one minute and 212/s the next).
    let busy_before = common::machine_busy_before();
    let (code, doc, stderr) = find_max(&args);
    let interfered = |doc: &serde_json::Value| machine_interfered(doc) || busy_before > 0.15;
    if code != 0 && interfered(&doc) {
        common::inconclusive(format!(
            "the generator waited for a CPU or the machine was {:.0} % busy before: exit {code}, passed {}, held {}, {}",
            busy_before * 100.0,
            doc["highest_pass_rps"],
            doc["confirmed_rps"],
            doc["stopped_because"]
        ));
        return;
    }
    assert_eq!(code, 0, "{doc:#}\n{stderr}");
    assert!(
        doc["stopped_because"]
            .as_str()
            .is_some_and(|w| w.contains("within 10 %")),
        "the knee must be below --max-rate, found by bisection: {doc:#}\n{stderr}"
    );
    let searched = doc["highest_pass_rps"].as_f64().unwrap();
    let found = doc["confirmed_rps"]
        .as_f64()
        .unwrap_or_else(|| panic!("exit 0 and no rate held for 10 s: {doc:#}\n{stderr}"));
    assert!(found <= searched, "{doc:#}");
    let holds = meets(url, found, slo, extra);
    let above = meets(url, found * 1.25, slo, extra);
    if (!holds || above) && (interfered(&doc) || common::machine_busy_before() > 0.15) {
        common::inconclusive(format!("{found} req/s: held {holds}, 1.25× held {above}"));
        return;
    }
    assert!(
        holds,
        "10 s at the {found} req/s found missed {slo}\n{stderr}"
    );
    assert!(
        !above,
        "10 s at 1.25 × {found} req/s still met {slo}\n{stderr}"
    );
}

/// 3 s steps (a step the server falls behind in fails at once), bisection to 10 %, then the
/// two 10 s checks: about a minute.
#[test]
fn find_max_on_python_http_server() {
    // A search reads the server's limit: alone among the tests that load the machine.
    let _alone = common::quiet_machine();
    if !common::tree::has_python() {
        common::skip("python3 not installed");
        return;
    }
    let port = common::tree::free_port();
    let dir = common::scratch_dir("find-max-python");
    // The server on CPU 0, the generator on CPU 1 (found_rate_holds_...): sharing them, the
    // generator waited for the server's CPU near its knee in every CI rehearsal, and the
    // checks were called inconclusive.
    let Some(mut server) = pinned_to_cpu0("python3")
        .map(|mut c| {
            c.args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
            ])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
            c
        })
        .map(|mut c| c.spawn().unwrap())
    else {
        return;
    };
    std::thread::sleep(std::time::Duration::from_millis(500));
    found_rate_holds_and_a_quarter_more_does_not(
        &format!("http://127.0.0.1:{port}/"),
        "p99<50ms",
        "200",
        &[],
    );
    let _ = server.kill();
    let _ = server.wait();
}

/// nginx with one worker, as a site that turns gzip on runs it, stopped by SIGINT (its fast
/// shutdown: master and worker go) however the test ends.
struct GzipNginx {
    master: std::process::Child,
    _dir: tempfile::TempDir,
    url: String,
}

impl GzipNginx {
    /// A 58 kB JSON document compressed per request (`gzip on`, level 1, no
    /// `gzip_static`): the worker's CPU bounds it at several hundred responses a second on
    /// this 2-CPU machine (about 330/s closed loop at load average 13; 4,000–5,000/s pinned to
    /// a quiet CPU), below what the generator offers, so the knee found is the server's.
    /// nginx's own `return 200 "Hello"` (the `--target nginx:1` default) answers as fast as
    /// the generator asks, so its search ran into --max-rate or measured the generator.
    fn start(bin: &std::path::Path) -> Option<GzipNginx> {
        let dir = common::scratch_dir("find-max-nginx");
        let d = dir.path().display().to_string();
        let doc: Vec<String> = (0..500)
            .map(|i| {
                format!(
                    r#"{{"id":{i},"name":"item-{i}","price":{}.{:02},"tags":["t{}","t{}"],"note":"lorem ipsum dolor sit amet {}"}}"#,
                    i * 7 % 100,
                    i * 13 % 100,
                    i % 7,
                    i % 11,
                    i * 7919 % 1_000_003
                )
            })
            .collect();
        std::fs::create_dir_all(dir.path().join("www")).unwrap();
        std::fs::write(
            dir.path().join("www/catalog.json"),
            format!("[{}]", doc.join(",")),
        )
        .unwrap();
        let port = common::tree::free_port();
        let conf = format!(
            "worker_processes 1;\ndaemon off;\nmaster_process on;\nerror_log {d}/error.log warn;\npid {d}/nginx.pid;\n\
events {{ worker_connections 1024; }}\n\
http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
  fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
  types {{ application/json json; }}\n  gzip on;\n  gzip_comp_level 1;\n  gzip_types application/json;\n\
  server {{ listen 127.0.0.1:{port}; root {d}/www; }}\n}}\n"
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        // Master and worker on CPU 0, the generator on CPU 1 (as the Python test's).
        let mut master = pinned_to_cpu0(bin.to_str().unwrap())?;
        let master = master
            .args(["-c", &format!("{d}/nginx.conf")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "nginx did not listen");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Some(GzipNginx {
            master,
            _dir: dir,
            url: format!("http://127.0.0.1:{port}/catalog.json"),
        })
    }
}

impl Drop for GzipNginx {
    fn drop(&mut self) {
        common::interrupt(self.master.id());
        common::wait_bounded(&mut self.master, std::time::Duration::from_secs(10));
    }
}

/// As the Python test: about a minute.
#[test]
fn find_max_on_nginx_one_worker() {
    // A search reads the server's limit: alone among the tests that load the machine.
    let _alone = common::quiet_machine();
    let Some(bin) = common::tree::nginx_bin() else {
        common::skip("nginx not installed (apt-get install nginx-light)");
        return;
    };
    let Some(nginx) = GzipNginx::start(&bin) else {
        return;
    };
    found_rate_holds_and_a_quarter_more_does_not(
        &nginx.url,
        "p99<50ms",
        "200",
        &["-H", "Accept-Encoding: gzip"],
    );
}

/// Ctrl-C (SIGINT) during a headless search: it ends with what it found, exit 130, the
/// report says it was cut short, and the step the signal cut is not counted (before, the cut
/// step was judged on its part and kept, and the report said only "interrupted").
#[test]
fn sigint_cuts_the_search_short_without_counting_the_step_it_cut() {
    let _alone = common::quiet_machine();
    let server = common::serve(|_| common::Reply::Send(common::ok("Hello, World!")));
    let dir = common::scratch_dir("find-max-sigint");
    let json = dir.path().join("knee.json");
    let url = server.url("/plaintext");
    let args = [
        "find-max",
        &url,
        "--slo",
        "p90<500ms",
        "--start-rate",
        "200",
        "--max-rate",
        "100000",
        "--step",
        "3s",
        "-c",
        "4",
        "--threads",
        "1",
        "--json",
        json.to_str().unwrap(),
    ];
    // The second step has started: the first is judged, the second is under way.
    let (mut child, seen) = common::spawn_until(&args, "find-max step 2");
    assert!(seen.contains("find-max step 2"), "{seen}");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    common::interrupt(child.id());
    let code = common::wait_bounded(&mut child, std::time::Duration::from_secs(30));
    assert_eq!(code, 130, "{seen}");
    let doc = common::read_json(&json);
    let why = doc["stopped_because"].as_str().unwrap_or_default();
    assert!(why.starts_with("cut short"), "{doc:#}");
    let steps = doc["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "the judged steps are kept: {doc:#}");
    for step in steps {
        assert!(
            step["seconds"].as_u64().unwrap() >= 3,
            "a cut step counted: {step:#}"
        );
    }
}

/// An error-rate SLO with no errors at all: a step of a few hundred flawless requests cannot
/// show a rate under 0.1 % (Wilson's upper bound for 0 of n is about 3.84 / n), so it is
/// unsure, and the search climbs on from it until a step has requests enough (before, the
/// first unsure step capped the search: "No rate met the SLO", exit 99, with 0 errors).
/// Whether a step's generator waited for a CPU on more than one send in ten: such a step is
/// unsure and caps the search (`tailscope_report::knee::generator_bound`).
fn generator_bound(doc: &serde_json::Value) -> bool {
    doc["steps"].as_array().is_some_and(|steps| {
        steps.iter().any(|s| {
            s["late_waited_for_cpu"].as_f64().unwrap_or(0.0)
                > 0.1 * s["requests"].as_f64().unwrap_or(0.0)
        })
    })
}

#[test]
fn find_max_with_only_an_error_rate_slo_and_no_errors_finds_a_rate() {
    let _alone = common::quiet_machine();
    // 500 req/s: 1,000 then (repeated, twice as long) 2,000 requests, unsure of 0.1 %; 1,000
    // req/s repeated gives 4,000 and 2,000 req/s gives 4,000 in 2 s: both enough.
    let (code, doc, stderr) = find_max(&[
        "--target",
        "embedded",
        "--slo",
        "error_rate<0.1%",
        "--start-rate",
        "500",
        "--max-rate",
        "2000",
        "--step",
        "2s",
    ]);
    let errors: u64 = doc["steps"].as_array().map_or(0, |s| {
        s.iter().map(|s| s["errors"].as_u64().unwrap_or(0)).sum()
    });
    assert_eq!(
        errors, 0,
        "the embedded server failed requests\n{doc:#}\n{stderr}"
    );
    assert_eq!(doc["steps"][0]["call"], "unsure", "{doc:#}");
    let found = doc["highest_pass_rps"].as_f64();
    match found {
        Some(r) => {
            assert_eq!(code, 0, "{doc:#}\n{stderr}");
            assert!(r >= 1000.0, "{doc:#}");
        }
        // Every step unsure: only a generator short of CPU (more than one send in ten)
        // caps a flawless search.
        None if generator_bound(&doc) => {
            common::inconclusive(format!(
                "the generator waited for a CPU; stopped because: {}",
                doc["stopped_because"]
            ));
            return;
        }
        None => panic!("no rate found with 0 errors (exit {code})\n{doc:#}\n{stderr}"),
    }

    // Capped at 500 req/s, no step is shown to pass: the search says "not shown to be met"
    // with the requests a step needs, and exits 0 (not 99: nothing missed the SLO).
    let (code, doc, stderr) = find_max(&[
        "--target",
        "embedded",
        "--slo",
        "error_rate<0.1%",
        "--start-rate",
        "500",
        "--max-rate",
        "500",
        "--step",
        "2s",
    ]);
    if generator_bound(&doc) && doc["highest_unsure_rps"].is_null() {
        common::inconclusive("the generator waited for a CPU at 500 req/s");
        return;
    }
    assert_eq!(code, 0, "{doc:#}\n{stderr}");
    assert!(doc["highest_pass_rps"].is_null(), "{doc:#}");
    assert_eq!(doc["highest_unsure_rps"], 500.0, "{doc:#}");
    let why = doc["stopped_because"].as_str().unwrap_or_default();
    assert!(
        why.contains("not shown to be met") && why.contains("at least 3,838 requests"),
        "{why}"
    );
}

/// `tailscope report KNEE.json` writes a find-max search again (its text, its page, its
/// JSON), as `report` does a run's; it said "not a tailscope JSON report" before.
#[test]
fn report_reads_a_find_max_document_back() {
    let Some((mut server, addr)) = common::spawn_serve(&[]) else {
        return;
    };
    let url = format!("http://{addr}/");
    let dir = common::scratch_dir("find-max-report");
    let json = dir.path().join("knee.json");
    let json = json.to_str().unwrap();
    let search = common::tailscope(&[
        "find-max",
        &url,
        "--slo",
        "p99<200ms",
        "--start-rate",
        "200",
        "--max-rate",
        "400",
        "--step",
        "1s",
        "--confirm",
        "2s",
        "--json",
        json,
    ]);
    let _ = server.kill();
    let _ = server.wait();
    let stderr = String::from_utf8_lossy(&search.stderr);
    assert!(std::path::Path::new(json).exists(), "{stderr}");
    let html = dir.path().join("knee.html");
    let again = dir.path().join("again.json");
    let out = common::tailscope(&[
        "report",
        json,
        "--text",
        "--html",
        html.to_str().unwrap(),
        "--json",
        again.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    // The text find-max printed, again, its confirmation with it.
    assert!(text.contains("for 2 s"), "{text}");
    assert_eq!(text, String::from_utf8_lossy(&search.stdout), "{said}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains(&addr), "{page}");
    assert_eq!(
        std::fs::read_to_string(&again).unwrap().trim_end(),
        std::fs::read_to_string(json).unwrap().trim_end()
    );
}

/// The confirmation must step down, and give up after its bound: the reference server stalls
/// its loop for 400 ms every 6 s, so every 8 s run holds at least one whole stall (5 % of its
/// requests wait up to 400 ms: p99 far above 100 ms), while a 1 s step misses the stalls
/// about four times in five. The search passes a rate on its short steps, and no rate holds
/// for 8 s: each hold steps down by the precision, 4 runs in all, no rate confirmed, exit
/// 99. (A pass rule as generous as the search's 1 s steps would have confirmed it.)
#[test]
fn a_rate_that_does_not_hold_steps_down_and_the_confirmation_gives_up() {
    let _alone = common::quiet_machine();
    let Some((mut server, addr)) =
        common::spawn_serve(&["--stall-every", "6s", "--stall-for", "400ms"])
    else {
        return;
    };
    let url = format!("http://{addr}/");
    let (code, doc, stderr) = find_max(&[
        &url,
        "-c",
        "16",
        "--slo",
        "p99<100ms",
        "--start-rate",
        "500",
        "--max-rate",
        "1000",
        "--step",
        "1s",
        "--confirm",
        "8s",
        "--no-tui",
    ]);
    let _ = server.kill();
    let _ = server.wait();
    let Some(searched) = doc["highest_pass_rps"].as_f64() else {
        // Every rate's steps met a stall (two runs of three): nothing to confirm.
        common::inconclusive(format!(
            "every rate's steps met the server's stalls, nothing to confirm: exit {code}, {}",
            doc["stopped_because"]
        ));
        return;
    };
    let holds = doc["confirmation"]
        .as_array()
        .expect("the confirmation's runs");
    let rates: Vec<f64> = holds
        .iter()
        .map(|h| h["offered_rps"].as_f64().unwrap())
        .collect();
    assert_eq!(rates.len(), 4, "{doc:#}\n{stderr}");
    assert_eq!(rates[0], searched, "{doc:#}");
    for w in rates.windows(2) {
        assert!((w[0] / w[1] - 1.05).abs() < 1e-9, "steps of 5 %: {rates:?}");
    }
    for h in holds {
        assert_eq!(h["phase"], "hold", "{h:#}");
        assert_ne!(h["call"], "pass", "a hold of a stall passed: {h:#}");
        assert!(h["seconds"].as_u64().unwrap() >= 8, "{h:#}");
    }
    assert!(doc["confirmed_rps"].is_null(), "{doc:#}");
    assert_eq!(code, 99, "{doc:#}\n{stderr}");
    assert!(
        stderr.contains("did not hold for 8s: holding"),
        "the step down is said: {stderr}"
    );
}
