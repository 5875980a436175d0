//! SVG pieces shared by the pictures koord draws: `koord simulate`'s timeline
//! ([`crate::simulate::svg`]) and the status page's rebalance timelines
//! ([`crate::observe::page`]). One palette, so a member has the same colour style in both; one
//! escaping rule; one tick rule; one document head.

use std::fmt::Write as _;

/// Member colours (Tableau 10 without its red, which means downtime here).
pub const PALETTE: &[&str] = &[
    "#4e79a7", "#f28e2b", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
    "#bab0ac", "#2f4b7c",
];

/// A task without owner.
pub const DOWN: &str = "#e15759";

/// The colour of member number `member`.
pub fn colour(member: u16) -> &'static str {
    PALETTE[member as usize % PALETTE.len()]
}

/// A tick step (ms) giving at most about 12 ticks over `span` ms.
pub fn tick_step(span: u64) -> u64 {
    const STEPS: &[u64] = &[
        100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
        600_000, 1_200_000, 1_800_000, 3_600_000,
    ];
    STEPS
        .iter()
        .copied()
        .find(|s| span / s <= 12)
        .unwrap_or(3_600_000 * (span / (12 * 3_600_000) + 1))
}

/// Text for SVG or HTML content and attribute values.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The opening `<svg>` element of a `width` x `height` picture, with the hatch pattern (an
/// owner restoring) defined and a white background.
pub fn open(s: &mut String, width: f64, height: f64) {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    s.push_str(
        r##"<defs><pattern id="hatch" patternUnits="userSpaceOnUse" width="4" height="4" patternTransform="rotate(45)"><rect width="4" height="4" fill="white" fill-opacity="0"/><line x1="0" y1="0" x2="0" y2="4" stroke="#e15759" stroke-width="2"/></pattern></defs>
<rect width="100%" height="100%" fill="white"/>
"##,
    );
}

/// A legend entry: a `fill` swatch at (`x`, `y` baseline) and its label.
pub fn swatch(s: &mut String, x: f64, y: f64, fill: &str, label: &str) {
    let _ = writeln!(
        s,
        r#"<rect x="{x:.1}" y="{:.1}" width="14" height="9" fill="{fill}"/><text x="{:.1}" y="{y:.1}">{}</text>"#,
        y - 8.0,
        x + 18.0,
        escape(label)
    );
}
