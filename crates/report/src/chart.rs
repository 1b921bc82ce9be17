//! Charts as inline SVG, drawn with plotters' SVG backend when the page is built.
//!
//! Each chart is a `<figure data-chart="ID">` holding one `<svg>`; every data point also gets
//! an invisible circle with a `<title>`, so hovering shows its value without a script. A chart
//! with nothing to draw says so in words instead of showing an empty axis.

use std::fmt::Write as _;
use std::ops::Range;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::page::escape;

/// Width and height of every chart, in SVG pixels (the page scales them to its width).
const SIZE: (u32, u32) = (900, 320);

/// One line of a chart.
pub struct Series {
    /// Its name in the legend and the hover text.
    pub name: String,
    /// Its colour.
    pub color: RGBColor,
    /// (x, y) points, in x order.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed, so a line under another of the same values still shows.
    pub dashed: bool,
}

/// How the y (or x) axis is scaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Linear from zero.
    Linear,
    /// Logarithmic, for latencies that span decades.
    Log,
}

/// A line chart: x in seconds (or any linear quantity), y linear or log.
pub struct LineChart<'a> {
    /// The figure's id (`data-chart`), for tests and links.
    pub id: &'a str,
    /// Caption above the chart.
    pub title: &'a str,
    /// The x axis' description.
    pub x_desc: &'a str,
    /// The y axis' description.
    pub y_desc: &'a str,
    /// The x axis' scale.
    pub x_scale: Scale,
    /// The y axis' scale.
    pub y_scale: Scale,
    /// Formats an x value for ticks and hover text.
    pub x_fmt: &'a dyn Fn(f64) -> String,
    /// Formats a y value for ticks and hover text.
    pub y_fmt: &'a dyn Fn(f64) -> String,
    /// The lines.
    pub series: Vec<Series>,
    /// Whether each point is a second's figure at the second's end (`t_s`): drawn as a step
    /// over the second it covers, so a spike in second 2 (2–3 s) shows between 2 and 3 s,
    /// where the diagnosis puts it, and a run of one second is a segment, not an invisible
    /// dot.
    pub per_second: bool,
}

/// Series with at most this many points also get a marker on each point, so that one point,
/// or a few far apart, are seen.
const MARKERS_UP_TO: usize = 30;

/// The span each per-second point covers: from the previous point (or one second before,
/// not before 0) to its own `t`; a partial last second is as short as it was.
fn spans(points: &[(f64, f64)]) -> Vec<(f64, f64, f64)> {
    let mut prev: Option<f64> = None;
    points
        .iter()
        .map(|&(t, y)| {
            let start = prev.map_or(t - 1.0, |p| p.max(t - 1.0)).max(0.0).min(t);
            prev = Some(t);
            (start, t, y)
        })
        .collect()
}

/// The per-second spans drawn as steps: one piece per run of adjacent seconds, so a second
/// without a value (no response in it) is a gap in the line, not a diagonal across it.
fn steps(spans: &[(f64, f64, f64)]) -> Vec<Vec<(f64, f64)>> {
    let mut pieces: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut end: Option<f64> = None;
    for &(a, b, y) in spans {
        // Adjacent seconds share their boundary (to within the millisecond `t_s` is kept in).
        if end.is_none_or(|e| a - e > 1e-6) {
            pieces.push(Vec::new());
        }
        pieces
            .last_mut()
            .expect("pushed above")
            .extend([(a, y), (b, y)]);
        end = Some(b);
    }
    pieces
}

/// The range covering `values`, padded, positive for a log axis.
fn range_of(values: impl Iterator<Item = f64>, scale: Scale) -> Range<f64> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        if scale == Scale::Log && v <= 0.0 {
            continue;
        }
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return if scale == Scale::Log {
            1.0..10.0
        } else {
            0.0..1.0
        };
    }
    match scale {
        // Whole decades: plotters labels a log axis inside the decades the range covers, so
        // a range from 160 µs to 6 ms labelled only 1–6 ms and left the median unreadable.
        Scale::Log => {
            let lo = 10f64.powf(lo.max(f64::MIN_POSITIVE).log10().floor());
            let hi = 10f64.powf(hi.log10().ceil()).max(lo * 10.0);
            lo..hi
        }
        Scale::Linear => {
            let lo = lo.min(0.0);
            let hi = if hi > lo { hi * 1.08 } else { lo + 1.0 };
            lo..hi
        }
    }
}

fn usable(v: f64, scale: Scale) -> bool {
    v.is_finite() && (scale == Scale::Linear || v > 0.0)
}

/// The legend, under the plot (in the page, not over the data): a swatch and a name each.
fn legend(entries: &[(&str, RGBColor, bool)]) -> String {
    let mut out = String::from("<div class=\"legend\">");
    for (name, RGBColor(r, g, b), dashed) in entries {
        let _ = write!(
            out,
            "<span><i style=\"border-top: 3px {} #{r:02x}{g:02x}{b:02x}\"></i>{}</span>",
            if *dashed { "dashed" } else { "solid" },
            escape(name)
        );
    }
    out.push_str("</div>");
    out
}

fn figure(id: &str, title: &str, body: &str, points: usize) -> String {
    format!(
        "<figure data-chart=\"{}\" data-points=\"{points}\"><figcaption>{}</figcaption>{body}</figure>\n",
        escape(id),
        escape(title)
    )
}

/// A chart with nothing to draw, saying why in words.
pub(crate) fn empty(id: &str, title: &str, why: &str) -> String {
    figure(
        id,
        title,
        &format!("<p class=\"empty\">{}</p>", escape(why)),
        0,
    )
}

/// Appends hover circles (an invisible dot with a `<title>`) before `</svg>`.
fn with_hover(mut svg: String, hover: &str) -> String {
    if let Some(at) = svg.rfind("</svg>") {
        svg.insert_str(at, hover);
    }
    svg
}

/// Draws a line chart.
pub fn line_chart(c: &LineChart<'_>) -> String {
    let all = || {
        c.series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|(x, y)| usable(*x, c.x_scale) && usable(*y, c.y_scale))
    };
    let points = all().count();
    if points == 0 {
        return empty(c.id, c.title, "nothing was measured for this chart");
    }
    let x_range = if c.per_second {
        let starts: Vec<f64> = c
            .series
            .iter()
            .flat_map(|s| spans(&s.points))
            .map(|(start, _, _)| start)
            .collect();
        range_of(all().map(|p| p.0).chain(starts), c.x_scale)
    } else {
        range_of(all().map(|p| p.0), c.x_scale)
    };
    let y_range = range_of(all().map(|p| p.1), c.y_scale);
    let mut svg = String::new();
    let mut hover = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        draw_lines(&root, c, x_range, y_range, &mut hover)
    };
    let entries: Vec<(&str, RGBColor, bool)> = c
        .series
        .iter()
        .filter(|s| {
            s.points
                .iter()
                .any(|(x, y)| usable(*x, c.x_scale) && usable(*y, c.y_scale))
        })
        .map(|s| (s.name.as_str(), s.color, s.dashed))
        .collect();
    match drawn {
        Ok(()) => figure(
            c.id,
            c.title,
            &(with_hover(svg, &hover) + &legend(&entries)),
            points,
        ),
        Err(e) => empty(c.id, c.title, &format!("the chart could not be drawn: {e}")),
    }
}

type DrawResult = Result<(), String>;

fn draw_lines(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    c: &LineChart<'_>,
    x: Range<f64>,
    y: Range<f64>,
    hover: &mut String,
) -> DrawResult {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut builder = ChartBuilder::on(root);
    // The right margin leaves room for the last x label ("99.9999%") centred on the edge.
    builder
        .margin(12)
        .margin_right(40)
        .x_label_area_size(38)
        .y_label_area_size(70);
    // Four combinations of axis scales have four chart types; a macro keeps one body.
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart.map_err(|e| e.to_string())?;
            chart
                .configure_mesh()
                .x_desc(c.x_desc)
                .y_desc(c.y_desc)
                .x_label_formatter(&|v| (c.x_fmt)(*v))
                .y_label_formatter(&|v| (c.y_fmt)(*v))
                .light_line_style(RGBColor(238, 238, 238))
                .draw()
                .map_err(|e| e.to_string())?;
            for s in &c.series {
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|(x, y)| usable(*x, c.x_scale) && usable(*y, c.y_scale))
                    .collect();
                if pts.is_empty() {
                    continue;
                }
                let color = s.color;
                // (where the marker and hover go, the line's pieces, the hover's "at …")
                let (marks, lines, at): (Vec<(f64, f64)>, Vec<Vec<(f64, f64)>>, Vec<String>) =
                    if c.per_second {
                        let spans = spans(&pts);
                        (
                            spans.iter().map(|&(a, b, y)| ((a + b) / 2.0, y)).collect(),
                            steps(&spans),
                            spans
                                .iter()
                                .map(|&(a, b, _)| {
                                    format!("in {}–{}", (c.x_fmt)(a), (c.x_fmt)(b))
                                })
                                .collect(),
                        )
                    } else {
                        (
                            pts.clone(),
                            vec![pts.clone()],
                            pts.iter().map(|p| format!("at {}", (c.x_fmt)(p.0))).collect(),
                        )
                    };
                for line in lines {
                    if s.dashed {
                        chart
                            .draw_series(DashedLineSeries::new(line, 8, 5, color.stroke_width(3)))
                            .map_err(|e| e.to_string())?;
                    } else {
                        chart
                            .draw_series(LineSeries::new(line, color.stroke_width(2)))
                            .map_err(|e| e.to_string())?;
                    }
                }
                if marks.len() <= MARKERS_UP_TO {
                    chart
                        .draw_series(marks.iter().map(|&p| Circle::new(p, 4, color.filled())))
                        .map_err(|e| e.to_string())?;
                }
                for (&(px, py), at) in marks.iter().zip(&at) {
                    let (cx, cy) = chart.backend_coord(&(px, py));
                    let _ = write!(
                        hover,
                        "<circle class=\"pt\" cx=\"{cx}\" cy=\"{cy}\" r=\"4\"><title>{}: {} {}</title></circle>",
                        escape(&s.name),
                        escape(&(c.y_fmt)(py)),
                        escape(at)
                    );
                }
            }
        }};
    }
    match (c.x_scale, c.y_scale) {
        (Scale::Linear, Scale::Linear) => body!(builder.build_cartesian_2d(x, y)),
        (Scale::Linear, Scale::Log) => body!(builder.build_cartesian_2d(x, y.log_scale())),
        (Scale::Log, Scale::Linear) => body!(builder.build_cartesian_2d(x.log_scale(), y)),
        (Scale::Log, Scale::Log) => {
            body!(builder.build_cartesian_2d(x.log_scale(), y.log_scale()))
        }
    }
    root.present().map_err(|e| e.to_string())
}

/// One bar of a bar chart.
pub struct Bar {
    /// Its label under the axis.
    pub label: String,
    /// Its height.
    pub value: f64,
    /// Hover text.
    pub tooltip: String,
    /// A low–high range drawn as a whisker over the bar (the spread of repeated runs).
    pub whisker: Option<(f64, f64)>,
    /// Its colour, when bars of two kinds alternate (base and new); steel blue otherwise.
    pub color: Option<RGBColor>,
}

/// A bar chart of labelled bars (a histogram in log buckets, a suite's req/s with the range
/// of its runs as whiskers).
pub fn bar_chart(
    id: &str,
    title: &str,
    y_desc: &str,
    bars: &[Bar],
    y_fmt: &dyn Fn(f64) -> String,
) -> String {
    bar_chart_with_legend(id, title, y_desc, bars, y_fmt, &[])
}

/// [`bar_chart`] with a legend under it naming the bars' colours.
pub fn bar_chart_with_legend(
    id: &str,
    title: &str,
    y_desc: &str,
    bars: &[Bar],
    y_fmt: &dyn Fn(f64) -> String,
    colors: &[(&str, RGBColor)],
) -> String {
    let points = bars.iter().filter(|b| b.value > 0.0).count();
    if points == 0 {
        return empty(id, title, "nothing was measured for this chart");
    }
    let mut svg = String::new();
    let mut hover = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        draw_bars(&root, y_desc, bars, y_fmt, &mut hover)
    };
    let entries: Vec<(&str, RGBColor, bool)> = colors.iter().map(|&(n, c)| (n, c, false)).collect();
    let legend = if entries.is_empty() {
        String::new()
    } else {
        legend(&entries)
    };
    match drawn {
        Ok(()) => figure(id, title, &(with_hover(svg, &hover) + &legend), points),
        Err(e) => empty(id, title, &format!("the chart could not be drawn: {e}")),
    }
}

fn draw_bars(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    y_desc: &str,
    bars: &[Bar],
    y_fmt: &dyn Fn(f64) -> String,
    hover: &mut String,
) -> DrawResult {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let top = bars
        .iter()
        .map(|b| b.whisker.map_or(b.value, |(_, high)| high.max(b.value)))
        .fold(0.0, f64::max)
        * 1.1;
    let n = bars.len() as f64;
    let mut chart: ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, RangedCoordf64>> =
        ChartBuilder::on(root)
            .margin(12)
            .x_label_area_size(60)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..n, 0.0..top.max(1.0))
            .map_err(|e| e.to_string())?;
    let label_of = |v: &f64| {
        let i = v.floor() as usize;
        if (v - v.floor() - 0.5).abs() < 1e-9 {
            bars.get(i).map_or(String::new(), |b| b.label.clone())
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len() * 2 + 1)
        .x_label_formatter(&label_of)
        .y_label_formatter(&|v| y_fmt(*v))
        .y_desc(y_desc)
        .light_line_style(RGBColor(238, 238, 238))
        .draw()
        .map_err(|e| e.to_string())?;
    let fill = RGBColor(70, 130, 180);
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let x = i as f64;
            Rectangle::new(
                [(x + 0.1, 0.0), (x + 0.9, b.value)],
                b.color.unwrap_or(fill).filled(),
            )
        }))
        .map_err(|e| e.to_string())?;
    let ink = RGBColor(34, 34, 34).stroke_width(2);
    chart
        .draw_series(bars.iter().enumerate().filter_map(|(i, b)| {
            let (low, high) = b.whisker?;
            let x = i as f64 + 0.5;
            Some(PathElement::new(
                vec![
                    (x - 0.15, low),
                    (x + 0.15, low),
                    (x, low),
                    (x, high),
                    (x - 0.15, high),
                    (x + 0.15, high),
                ],
                ink,
            ))
        }))
        .map_err(|e| e.to_string())?;
    for (i, b) in bars.iter().enumerate() {
        let (x0, y0) = chart.backend_coord(&(i as f64 + 0.1, b.value));
        let (x1, y1) = chart.backend_coord(&(i as f64 + 0.9, 0.0));
        let _ = write!(
            hover,
            "<rect class=\"pt\" x=\"{x0}\" y=\"{y0}\" width=\"{}\" height=\"{}\"><title>{}</title></rect>",
            (x1 - x0).max(1),
            (y1 - y0).max(1),
            escape(&b.tooltip)
        );
    }
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
