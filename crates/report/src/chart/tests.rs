//! The charts drawn from fixed series: points, steps, gaps, hover titles, bars.

use super::*;

#[test]
fn a_line_chart_has_its_points_and_hover_titles() {
    let html = line_chart(&LineChart {
        id: "t",
        title: "Latency <over> time",
        x_desc: "s",
        y_desc: "µs",
        x_scale: Scale::Linear,
        y_scale: Scale::Log,
        x_fmt: &|v| format!("{v:.0}"),
        y_fmt: &|v| format!("{v:.0}µs"),
        series: vec![Series {
            name: "p99".into(),
            color: RED,
            points: vec![(1.0, 100.0), (2.0, 2_000.0), (3.0, 0.0)],
            dashed: false,
        }],
        per_second: false,
    });
    assert!(html.contains("data-chart=\"t\""));
    assert!(
        html.contains("data-points=\"2\""),
        "the 0 is off a log axis"
    );
    assert!(html.contains("Latency &lt;over&gt; time"));
    assert_eq!(html.matches("<circle class=\"pt\"").count(), 2);
    assert!(html.contains("<title>p99: 2000µs at 2</title>"));
    assert!(html.contains("<polyline"), "{html}");
    // The legend is under the plot, not drawn over the data.
    let legend = html.find("<div class=\"legend\">").expect("a legend");
    assert!(legend > html.find("</svg>").unwrap());
    assert!(html[legend..].contains("p99"));
}

/// A per-second chart of one blue line.
fn per_second_chart(name: &str, y_scale: Scale, points: Vec<(f64, f64)>) -> String {
    line_chart(&LineChart {
        id: "t",
        title: "Per second",
        x_desc: "s",
        y_desc: name,
        x_scale: Scale::Linear,
        y_scale,
        x_fmt: &|v| format!("{v}s"),
        y_fmt: &|v| format!("{v:.0}"),
        series: vec![Series {
            name: name.into(),
            color: BLUE,
            points,
            dashed: false,
        }],
        per_second: true,
    })
}

#[test]
fn one_second_is_a_step_over_the_second_with_a_marker() {
    let chart = |points| per_second_chart("requests/s", Scale::Linear, points);
    let one = chart(vec![(1.0, 500.0)]);
    assert!(one.contains("data-points=\"1\""));
    // The line is drawn (a segment from 0 to 1 s, not a lone point plotters skips) and
    // the point is marked, its hover naming the second it covers.
    let line = one
        .split("<polyline")
        .find(|l| l.contains("stroke=\"#0000FF\" stroke-width=\"2\""))
        .and_then(|l| l.split("points=\"").nth(1))
        .and_then(|l| l.split('"').next())
        .expect("a polyline");
    let xs: Vec<&str> = line
        .split_whitespace()
        .map(|p| p.split(',').next().unwrap())
        .collect();
    assert_eq!(xs.len(), 2, "{line}");
    assert_ne!(xs[0], xs[1], "a segment of width, not a dot: {line}");
    assert!(one.contains("<circle cx="), "a visible marker: {one}");
    assert!(
        one.contains("<title>requests/s: 500 in 0s–1s</title>"),
        "{one}"
    );
    // The spike of second 2 (the point at 3 s) lies over 2–3 s, where the diagnosis says.
    let three = chart(vec![(1.0, 1.0), (2.0, 1.0), (3.0, 9.0)]);
    assert!(
        three.contains("<title>requests/s: 9 in 2s–3s</title>"),
        "{three}"
    );
}

/// A second without a response (its latency null, 0 in memory: not drawable on a log
/// axis) is a gap in the latency line, not a diagonal from the second before to the one
/// after.
#[test]
fn an_empty_second_is_a_gap_in_the_line() {
    let svg = per_second_chart(
        "p50",
        Scale::Log,
        vec![(1.0, 100.0), (2.0, 200.0), (3.0, 0.0), (4.0, 100.0)],
    );
    let pieces: Vec<usize> = svg
        .split("<polyline")
        .filter(|l| l.contains("stroke=\"#0000FF\" stroke-width=\"2\""))
        .map(|l| {
            let pts = l
                .split("points=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            pts.split_whitespace().count()
        })
        .collect();
    // 0–1 s and 1–2 s as one step line, 3–4 s on its own: nothing over 2–3 s.
    assert_eq!(pieces, vec![4, 2], "{svg}");
    assert_eq!(
        steps(&spans(&[(1.0, 1.0), (2.0, 1.0), (2.5, 3.0)])).len(),
        1,
        "a partial last second joins the one before"
    );
}

#[test]
fn nothing_to_draw_says_so() {
    let html = bar_chart("h", "Histogram", "requests", &[], &|v| v.to_string());
    assert!(html.contains("data-points=\"0\""));
    assert!(html.contains("nothing was measured"));
    assert!(!html.contains("<svg"));
}

#[test]
fn bars_have_titles() {
    let html = bar_chart(
        "h",
        "Histogram",
        "requests",
        &[
            Bar {
                label: "1ms".into(),
                value: 5.0,
                tooltip: "1ms–2ms: 5".into(),
                whisker: None,
                color: None,
            },
            Bar {
                label: "2ms".into(),
                value: 0.0,
                tooltip: "2ms–5ms: 0".into(),
                whisker: None,
                color: None,
            },
        ],
        &|v| v.to_string(),
    );
    assert!(html.contains("data-points=\"1\""));
    assert!(html.contains("<title>1ms–2ms: 5</title>"));
}
