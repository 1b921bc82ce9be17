//! What every page draws alike: the colours, the axis labels (µs, counts, seconds, nines) and
//! the percentile spectrum of a histogram.

use crate::document::{decode_histogram, fmt_us, Report};
use hdrhistogram::Histogram;
use plotters::style::RGBColor;

use crate::chart::{line_chart, LineChart, Scale, Series};

pub(crate) const P50: RGBColor = RGBColor(46, 139, 87);
pub(crate) const P99: RGBColor = RGBColor(230, 126, 34);
pub(crate) const MAX: RGBColor = RGBColor(192, 57, 43);
pub(crate) const BLUE: RGBColor = RGBColor(52, 101, 164);
/// Distinct colours for per-CPU lines, reused round-robin.
pub(crate) const PALETTE: [RGBColor; 8] = [
    RGBColor(52, 101, 164),
    RGBColor(204, 0, 0),
    RGBColor(78, 154, 6),
    RGBColor(245, 121, 0),
    RGBColor(117, 80, 123),
    RGBColor(193, 125, 17),
    RGBColor(6, 152, 154),
    RGBColor(85, 87, 83),
];

pub(crate) fn us_axis(v: f64) -> String {
    // Zero has no unit to agree with the other ticks (a "0µs" under "2ms", "4ms").
    if v <= 0.0 {
        return "0".into();
    }
    fmt_us(v.round() as u64)
}

/// A number with at most `decimals` decimals and no trailing zeros: 2 → "2", 2.5 → "2.5".
pub(crate) fn short(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

pub(crate) fn seconds(v: f64) -> String {
    format!("{}s", short(v, 2))
}

pub(crate) fn count_axis(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{}M", short(v / 1e6, 2))
    } else if v.abs() >= 1e3 {
        format!("{}k", short(v / 1e3, 1))
    } else {
        short(v, 2)
    }
}

/// `x = 1 / (1 − q)` back to a percentile label: 10 → "90%", 1000 → "99.9%".
pub(crate) fn nines(x: f64) -> String {
    if x <= 1.0 {
        return "0%".into();
    }
    let p = 100.0 * (1.0 - 1.0 / x);
    let digits = (x.log10().round() as usize).saturating_sub(2);
    format!("{p:.digits$}%")
}

/// The percentile spectrum's points: (1 / (1 − q), latency), HdrHistogram-style.
pub(crate) fn spectrum(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = h
        .iter_quantiles(4)
        .map(|v| (v.quantile_iterated_to(), v.value_iterated_to() as f64))
        .filter(|(q, _)| *q < 1.0)
        .map(|(q, v)| (1.0 / (1.0 - q), v))
        .collect();
    // The maximum at the nines of one in `len` requests (or just past the last step).
    if !h.is_empty() {
        let x = points
            .last()
            .map_or(2.0, |p| p.0)
            .max(h.len() as f64)
            .max(2.0);
        points.push((x, h.max() as f64));
    }
    points
}

/// The spectra of `series` (latency by percentile) on log scales.
pub(crate) fn spectrum_chart(id: &str, title: &str, series: Vec<Series>) -> String {
    line_chart(&LineChart {
        id,
        title,
        x_desc: "percentile",
        y_desc: "latency",
        x_scale: Scale::Log,
        y_scale: Scale::Log,
        x_fmt: &nines,
        y_fmt: &us_axis,
        series,
        per_second: false,
    })
}

/// A run's percentile spectrum, empty when nothing was measured.
pub(crate) fn spectrum_of(report: &Report) -> Vec<(f64, f64)> {
    decode_histogram(&report.histogram)
        .filter(|h| !h.is_empty())
        .map(|h| spectrum(&h))
        .unwrap_or_default()
}

pub(crate) fn series(name: &str, color: RGBColor, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.into(),
        color,
        points,
        dashed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_labels_are_not_rounded_into_each_other() {
        assert_eq!(seconds(0.5), "0.5s");
        assert_eq!(seconds(2.0), "2s");
        assert_eq!(count_axis(0.2), "0.2");
        assert_eq!(count_axis(45_000.0), "45k");
        assert_eq!(count_axis(1_250_000.0), "1.25M");
    }

    #[test]
    fn nines_read_as_percentiles() {
        assert_eq!(nines(1.0), "0%");
        assert_eq!(nines(10.0), "90%");
        assert_eq!(nines(100.0), "99%");
        assert_eq!(nines(1000.0), "99.9%");
        assert_eq!(nines(1e5), "99.999%");
    }

    #[test]
    fn the_spectrum_climbs_to_the_max() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 10).unwrap();
        }
        let s = spectrum(&h);
        assert!(s.len() > 10);
        assert!(
            s.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1),
            "{s:?}"
        );
        let last = s.last().unwrap();
        assert!((9_990.0..=10_010.0).contains(&last.1), "{last:?}");
    }
}
