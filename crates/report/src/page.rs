//! The page around the charts: escaping, the style sheet, tables.

use std::fmt::Write as _;

/// Escapes text for HTML and SVG (element content and attribute values).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Everything the page needs to look right, inline: no font, script or style sheet is ever
/// fetched, so the file opens offline and prints.
const STYLE: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 960px; color: #222; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
.sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .9rem; }
th, td { text-align: left; padding: .2rem .8rem .2rem 0; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.kpis { display: grid; grid-template-columns: repeat(auto-fill, minmax(160px, 1fr)); gap: .6rem; margin: 1rem 0; }
.kpi { border: 1px solid #ddd; border-radius: 6px; padding: .5rem .7rem; }
.kpi .v { font-size: 1.3rem; font-variant-numeric: tabular-nums; }
.kpi .k { color: #666; font-size: .8rem; }
figure { margin: 1rem 0; page-break-inside: avoid; }
figure svg { width: 100%; height: auto; }
figcaption { font-weight: 600; margin-bottom: .3rem; }
.pt { fill: transparent; stroke: none; }
.legend { display: flex; flex-wrap: wrap; gap: .3rem 1.2rem; justify-content: center; font-size: .85rem; color: #444; }
.legend i { display: inline-block; width: 22px; vertical-align: middle; margin-right: .35rem; }
.pt:hover { fill: #0005; }
.empty { color: #888; font-style: italic; }
.warn { background: #fff4e5; border-left: 4px solid #f0a030; padding: .4rem .8rem; }
.cause { border-left: 4px solid #c33; padding: .3rem .8rem; margin: .5rem 0; background: #fdf3f3; }
.cause .inside { margin-top: .3rem; color: #444; font-family: monospace; font-size: .9em; }
footer { color: #888; font-size: .8rem; margin-top: 3rem; }
@media print { body { margin: 0; max-width: none; } h2 { page-break-after: avoid; } }
"#;

/// A whole page: the title, then `body`.
pub fn document(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    )
}

/// The page's last line: what made it, from what (`source`), and that it fetches nothing.
pub fn footer(source: &str) -> String {
    format!(
        "<footer>Made by {}. Self-contained: nothing is fetched when this page is opened.</footer>\n",
        escape(source)
    )
}

/// A table; cells are escaped; a cell starting with a digit (or ≥, −), or `n/a` (a figure
/// that could not be had), is right-aligned.
pub fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let numeric = |s: &str| {
        s == "n/a"
            || s.chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit() || c == '≥' || c == '-' || c == '+')
    };
    let mut out = String::from("<table>\n<tr>");
    for (i, h) in head.iter().enumerate() {
        let class = rows
            .first()
            .and_then(|r| r.get(i))
            .is_some_and(|c| numeric(c));
        let _ = write!(
            out,
            "<th{}>{}</th>",
            if class { " class=\"num\"" } else { "" },
            escape(h)
        );
    }
    out.push_str("</tr>\n");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(
                out,
                "<td{}>{}</td>",
                if numeric(cell) { " class=\"num\"" } else { "" },
                escape(cell)
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out
}

/// A row of key figures.
pub fn kpis(items: &[(&str, String)]) -> String {
    let mut out = String::from("<div class=\"kpis\">\n");
    for (k, v) in items {
        let _ = writeln!(
            out,
            "<div class=\"kpi\" data-kpi=\"{}\"><div class=\"v\">{}</div><div class=\"k\">{}</div></div>",
            escape(k),
            escape(v),
            escape(k)
        );
    }
    out.push_str("</div>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_everywhere() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        let t = table(&["name", "n"], &[vec!["<b>".into(), "12".into()]]);
        assert!(t.contains("<td>&lt;b&gt;</td><td class=\"num\">12</td>"));
        let t = table(&["n"], &[vec!["12".into()], vec!["n/a".into()]]);
        assert!(
            t.contains("<td class=\"num\">n/a</td>"),
            "n/a lines up with the figures"
        );
        let page = document("a < b", "<p>x</p>");
        assert!(page.contains("<title>a &lt; b</title>"));
        assert!(!page.contains("http"), "nothing fetched: {page}");
    }
}
