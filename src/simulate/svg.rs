//! The timeline of one run as an SVG: one row per task, time to the right. The owner is a bar
//! in its member's colour (pale and hatched red while it restores), a task without owner is
//! red, the learner is a thin bar under the owner's (pale while restoring, solid once ready),
//! and thin vertical lines mark the instants rebalances started.

use std::fmt::Write as _;

use super::{secs, Report, Scenario};
use crate::svg::{colour, escape, open, swatch, tick_step, DOWN};

const LEFT: f64 = 46.0;
const TOP: f64 = 58.0;
const PLOT_W: f64 = 1000.0;
const ROW_H: f64 = 13.0;
const RIGHT: f64 = 20.0;

/// Renders the run's timeline.
pub fn render(scenario: &Scenario, report: &Report) -> String {
    let rec = &report.recorder;
    let origin = rec.origin;
    // A little room after the end so the settled state shows.
    let span = rec.end.saturating_sub(origin).max(1000);
    let end = origin + span + span / 12;
    let x = |t: u64| LEFT + (t.saturating_sub(origin)) as f64 / (end - origin) as f64 * PLOT_W;
    let rows = rec.tasks.len();
    let plot_h = rows as f64 * ROW_H;
    let legend_y = TOP + plot_h + 34.0;
    let width = LEFT + PLOT_W + RIGHT;
    let height = legend_y + 44.0;

    let mut s = String::new();
    open(&mut s, width, height);
    let d = &report.downtime;
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{} ({}), restore {} per task: {}</text>"#,
        report.strategy.assignor(),
        report.strategy.mode(),
        secs(report.restore_ms),
        escape(&scenario.describe()),
    );
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="36">rebalances {}; downtime per task: sum {}, max {}, p99 {}; balanced after {}</text>"#,
        report.rebalances,
        secs(d.sum_ms),
        secs(d.max_ms),
        secs(d.p99_ms),
        report.balanced_after_ms.map_or("never".to_owned(), secs),
    );

    // Axis: ticks relative to the first change.
    let step = tick_step(end - origin);
    let first = -((rec.change - origin) as i64 / step as i64) * step as i64;
    let mut tick = first;
    while (rec.change as i64 + tick) as u64 <= end {
        let at = (rec.change as i64 + tick) as u64;
        let tx = x(at);
        let _ = writeln!(
            s,
            "<line x1=\"{tx:.1}\" y1=\"{TOP}\" x2=\"{tx:.1}\" y2=\"{:.1}\" stroke=\"#ddd\" stroke-width=\"0.5\"/>\
             <text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#444\">{}</text>",
            TOP + plot_h + 4.0,
            TOP + plot_h + 16.0,
            if tick == 0 { "0".to_owned() } else { secs_signed(tick) },
        );
        tick += step as i64;
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#444">time since the first membership change</text>"##,
        LEFT + PLOT_W,
        legend_y + 20.0
    );

    // Rows.
    let label_every = if rows <= 80 { 1 } else { 10 };
    for (i, timeline) in rec.tasks.iter().enumerate() {
        let y = TOP + i as f64 * ROW_H;
        if i % label_every == 0 {
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="end" font-size="8" fill="#444">t{i}</text>"##,
                LEFT - 4.0,
                y + 8.0
            );
        }
        for (k, (at, view)) in timeline.iter().enumerate() {
            let until = timeline.get(k + 1).map_or(rec.end, |(next, _)| *next);
            let until = if k + 1 == timeline.len() { end } else { until };
            let (x0, x1) = (x(*at), x(until));
            let w = (x1 - x0).max(0.0);
            if w <= 0.0 {
                continue;
            }
            match view.owner {
                Some(m) if view.processing => {
                    let _ = writeln!(
                        s,
                        r#"<rect x="{x0:.2}" y="{:.1}" width="{w:.2}" height="8" fill="{}"/>"#,
                        y + 1.0,
                        colour(m)
                    );
                }
                Some(m) => {
                    let _ = writeln!(
                        s,
                        r#"<rect x="{x0:.2}" y="{:.1}" width="{w:.2}" height="8" fill="{}" fill-opacity="0.35"/><rect x="{x0:.2}" y="{:.1}" width="{w:.2}" height="8" fill="url(#hatch)"/>"#,
                        y + 1.0,
                        colour(m),
                        y + 1.0
                    );
                }
                None => {
                    let _ = writeln!(
                        s,
                        r#"<rect x="{x0:.2}" y="{:.1}" width="{w:.2}" height="8" fill="{DOWN}"/>"#,
                        y + 1.0
                    );
                }
            }
            if let Some(l) = view.learner {
                let _ = writeln!(
                    s,
                    r#"<rect x="{x0:.2}" y="{:.1}" width="{w:.2}" height="3.5" fill="{}" fill-opacity="{}"/>"#,
                    y + 9.2,
                    colour(l),
                    if view.learner_ready { "1" } else { "0.5" }
                );
            }
        }
    }
    for &r in &rec.rebalances {
        let rx = x(r);
        let _ = writeln!(
            s,
            r##"<line x1="{rx:.2}" y1="{:.1}" x2="{rx:.2}" y2="{:.1}" stroke="#222" stroke-width="0.6" stroke-opacity="0.55"/>"##,
            TOP - 4.0,
            TOP + plot_h
        );
    }

    // Legend.
    let mut lx = LEFT;
    let used: Vec<u16> = {
        let mut u: Vec<u16> = rec
            .tasks
            .iter()
            .flatten()
            .flat_map(|(_, v)| v.owner.into_iter().chain(v.learner))
            .collect();
        u.sort_unstable();
        u.dedup();
        u
    };
    for m in used {
        let name = report
            .member_names
            .get(m as usize)
            .map_or("?", String::as_str);
        swatch(&mut s, lx, legend_y, colour(m), name);
        lx += 62.0;
    }
    let y2 = legend_y + 20.0;
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{:.1}" width="14" height="9" fill="{DOWN}"/><text x="{:.1}" y="{y2:.1}">down: no owner</text>
<rect x="{:.1}" y="{:.1}" width="14" height="9" fill="#999" fill-opacity="0.35"/><rect x="{:.1}" y="{:.1}" width="14" height="9" fill="url(#hatch)"/><text x="{:.1}" y="{y2:.1}">down: owner restoring</text>
<rect x="{:.1}" y="{:.1}" width="14" height="3.5" fill="#4e79a7" fill-opacity="0.5"/><text x="{:.1}" y="{y2:.1}">learner restoring</text>
<rect x="{:.1}" y="{:.1}" width="14" height="3.5" fill="#4e79a7"/><text x="{:.1}" y="{y2:.1}">learner ready</text>
<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#222" stroke-width="0.8"/><text x="{:.1}" y="{y2:.1}">rebalance started</text>"##,
        y2 - 8.0,
        LEFT + 18.0,
        LEFT + 120.0,
        y2 - 8.0,
        LEFT + 120.0,
        y2 - 8.0,
        LEFT + 138.0,
        LEFT + 290.0,
        y2 - 4.0,
        LEFT + 308.0,
        LEFT + 420.0,
        y2 - 4.0,
        LEFT + 438.0,
        LEFT + 540.0,
        y2 - 10.0,
        LEFT + 540.0,
        y2 + 2.0,
        LEFT + 548.0,
    );
    s.push_str("</svg>\n");
    s
}

fn secs_signed(ms: i64) -> String {
    if ms < 0 {
        format!("-{}", secs(ms.unsigned_abs()))
    } else {
        format!("+{}", secs(ms as u64))
    }
}
