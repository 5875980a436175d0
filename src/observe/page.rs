//! The status page: plain server-rendered HTML that reloads itself, one section per group
//! (kind, state, generation or epoch, assignor, members and their partitions, learners, and the
//! last rebalances as a timeline in the SVG style of `koord simulate`, with the moves listed).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::coordinator::status::{GroupSnapshot, PartitionRef, RebalanceSnapshot};
use crate::svg::{colour, escape, open, swatch, DOWN};

/// Seconds between the page's reloads.
pub const REFRESH_SECS: u32 = 2;

/// The whole page for `groups` (sorted by id). `ready` is what `/readyz` says.
pub fn render(groups: &[GroupSnapshot], ready: bool) -> String {
    let mut s = String::with_capacity(8192);
    let _ = write!(
        s,
        r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{REFRESH_SECS}">
<title>koord: groups</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
h1 {{ font-size: 1.4em; }} h2 {{ font-size: 1.15em; margin-top: 1.8em; border-bottom: 1px solid #ccc; }}
table {{ border-collapse: collapse; margin: 0.4em 0; }}
td, th {{ border: 1px solid #ddd; padding: 2px 8px; text-align: left; font-size: 0.9em; vertical-align: top; }}
th {{ background: #f4f4f4; }} .dim {{ color: #777; }} code {{ font-size: 0.95em; }}
.swatch {{ display: inline-block; width: 0.8em; height: 0.8em; margin-right: 4px; }}
</style></head><body>
<h1>koord</h1>
<p id="summary">{} group{}; <span id="ready">{}</span>; reloads every {REFRESH_SECS} s. JSON: <a href="/api/groups">/api/groups</a>, metrics: <a href="/metrics">/metrics</a></p>
"#,
        groups.len(),
        if groups.len() == 1 { "" } else { "s" },
        if ready { "ready" } else { "loading the store" },
    );
    for g in groups {
        group(&mut s, g);
    }
    s.push_str("</body></html>\n");
    s
}

fn group(s: &mut String, g: &GroupSnapshot) {
    let id = escape(&g.group_id);
    let colours = member_colours(g);
    let _ = write!(
        s,
        r#"<section class="group" data-group="{id}"><h2>{id}</h2>
<table><tr><th>kind</th><th>state</th><th>{}</th><th>protocol</th><th>assignor</th><th>leader</th><th>offsets</th></tr>
<tr><td class="kind">{}</td><td class="state">{}</td><td class="epoch">{}</td><td>{} {}</td><td class="assignor">{}</td><td>{}</td><td>{}</td></tr></table>
"#,
        if g.kind == "classic" {
            "generation"
        } else {
            "epoch"
        },
        g.kind,
        escape(&g.state),
        g.epoch,
        escape(&g.protocol_type),
        escape(&g.protocol),
        g.assignor
            .as_deref()
            .map_or_else(|| "client (leader)".to_owned(), escape),
        g.leader.as_deref().map(escape).unwrap_or_default(),
        g.offsets,
    );
    let _ = writeln!(
        s,
        "<h3>members ({})</h3><table class=\"members\"><tr><th>member</th><th>instance</th><th>client</th><th>host</th><th>partitions</th><th>client metrics</th></tr>",
        g.members.len()
    );
    for m in &g.members {
        let parts: Vec<String> = m
            .partitions
            .iter()
            .map(|p| escape(&p.to_string()))
            .collect();
        let _ = writeln!(
            s,
            r#"<tr class="member" data-member="{}"><td><span class="swatch" style="background:{}"></span><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td class="partitions">{}</td><td class="client-metrics">{}</td></tr>"#,
            escape(&m.member_id),
            colours.get(m.member_id.as_str()).copied().unwrap_or("#999"),
            escape(&m.member_id),
            m.instance_id.as_deref().map(escape).unwrap_or_default(),
            escape(&m.client_id),
            escape(&m.client_host),
            parts
                .iter()
                .map(|p| format!(r#"<span class="partition">{p}</span>"#))
                .collect::<Vec<_>>()
                .join(" "),
            m.client_metrics
                .iter()
                .map(|(name, v)| format!("<span class=\"metric\">{} = {v}</span>", escape(name)))
                .collect::<Vec<_>>()
                .join("<br>"),
        );
    }
    s.push_str("</table>\n");
    if !g.learners.is_empty() {
        let _ = writeln!(
            s,
            "<h3>learners ({})</h3><table class=\"learners\"><tr><th>partition</th><th>learner</th><th>owner</th><th>warming up for</th></tr>",
            g.learners.len()
        );
        for l in &g.learners {
            let _ = writeln!(
                s,
                r#"<tr class="learner"><td>{}-{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{:.1} s</td></tr>"#,
                escape(&l.topic),
                l.partition,
                escape(&l.member),
                l.owner
                    .as_deref()
                    .map(escape)
                    .unwrap_or_else(|| "none".to_owned()),
                l.warming_ms as f64 / 1000.0,
            );
        }
        s.push_str("</table>\n");
    }
    if !g.share_partitions.is_empty() {
        let _ = writeln!(
            s,
            "<h3>share partitions ({})</h3><table class=\"share-partitions\"><tr><th>partition</th><th>start offset</th><th>in flight</th><th>acquired</th><th>available</th><th>acknowledged or archived</th></tr>",
            g.share_partitions.len()
        );
        for p in &g.share_partitions {
            let _ = writeln!(
                s,
                r#"<tr class="share-partition"><td>{}-{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
                escape(&p.topic),
                p.partition,
                p.start_offset,
                p.in_flight,
                p.acquired,
                p.available,
                p.delivered,
            );
        }
        s.push_str("</table>\n");
    }
    if !g.rebalances.is_empty() {
        s.push_str("<h3>last rebalances</h3>\n");
        s.push_str(&timeline_svg(g, &colours));
        s.push_str("<ol class=\"rebalances\">\n");
        for r in g.rebalances.iter().rev() {
            rebalance(s, r);
        }
        s.push_str("</ol>\n");
    }
    s.push_str("</section>\n");
}

fn rebalance(s: &mut String, r: &RebalanceSnapshot) {
    let _ = write!(
        s,
        r#"<li class="rebalance" data-epoch="{}"><b>generation {}</b>: {} <span class="dim">({:.3} s{})</span>"#,
        r.epoch,
        r.epoch,
        escape(&r.reason),
        r.completed_ms.saturating_sub(r.started_ms) as f64 / 1000.0,
        r.assignor
            .as_deref()
            .map(|a| format!(", assigned by {}", escape(a)))
            .unwrap_or_default(),
    );
    if let Some(summary) = &r.summary {
        let _ = write!(s, r#"<br><span class="dim">{}</span>"#, escape(summary));
    }
    if r.moves.is_empty() {
        s.push_str("<br>no partition moved");
    } else {
        s.push_str("<ul>");
        for m in &r.moves {
            let _ = write!(
                s,
                r#"<li class="move" data-partition="{}-{}">{}-{}: {} &rarr; {}</li>"#,
                escape(&m.topic),
                m.partition,
                escape(&m.topic),
                m.partition,
                m.from
                    .as_deref()
                    .map_or_else(|| "nobody".to_owned(), escape),
                m.to.as_deref().map_or_else(|| "nobody".to_owned(), escape),
            );
        }
        s.push_str("</ul>");
    }
    s.push_str("</li>\n");
}

/// Every member seen in the group (now or in its kept rebalances), numbered in name order.
fn member_colours(g: &GroupSnapshot) -> BTreeMap<&str, &'static str> {
    let mut names: Vec<&str> = g.members.iter().map(|m| m.member_id.as_str()).collect();
    for r in &g.rebalances {
        names.extend(r.members.iter().map(String::as_str));
        for m in &r.moves {
            names.extend(m.from.as_deref());
            names.extend(m.to.as_deref());
        }
    }
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .enumerate()
        .map(|(i, n)| (n, colour(i as u16)))
        .collect()
}

const TOP: f64 = 28.0;
const COL_W: f64 = 70.0;
const ROW_H: f64 = 13.0;

/// The kept rebalances as columns (the owners after each), partitions as rows: a bar in its
/// owner's colour, red without owner, outlined where the owner changed.
fn timeline_svg(g: &GroupSnapshot, colours: &BTreeMap<&str, &'static str>) -> String {
    // Owners after the last rebalance are the members' current partitions; walking the moves
    // backwards gives the owners after each earlier one.
    let mut after: BTreeMap<PartitionRef, Option<String>> = BTreeMap::new();
    for m in &g.members {
        for p in &m.partitions {
            after.insert(p.clone(), Some(m.member_id.clone()));
        }
    }
    let mut columns: Vec<BTreeMap<PartitionRef, Option<String>>> = Vec::new();
    for r in g.rebalances.iter().rev() {
        columns.push(after.clone());
        for m in &r.moves {
            after.insert(
                PartitionRef {
                    topic: m.topic.clone(),
                    partition: m.partition,
                },
                m.from.clone(),
            );
        }
    }
    columns.reverse();
    let mut rows: Vec<PartitionRef> = columns.iter().flat_map(|c| c.keys().cloned()).collect();
    rows.sort();
    rows.dedup();
    // Room for the longest row label (about 5.5 px a character at font-size 9).
    let longest = rows.iter().map(|p| p.to_string().len()).max().unwrap_or(0);
    let left = 10.0 + longest as f64 * 5.5;
    let width = left + COL_W * columns.len() as f64 + 20.0;
    let legend_y = TOP + rows.len() as f64 * ROW_H + 22.0;
    let height = legend_y + (colours.len() + 1) as f64 * 16.0;
    let mut s = String::new();
    open(&mut s, width.max(480.0), height);
    for (c, r) in g.rebalances.iter().enumerate() {
        let x = left + c as f64 * COL_W;
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#444">gen {}</text>"##,
            x + COL_W / 2.0,
            TOP - 8.0,
            r.epoch
        );
    }
    for (i, p) in rows.iter().enumerate() {
        let y = TOP + i as f64 * ROW_H;
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" font-size="9" fill="#444">{}</text>"##,
            left - 4.0,
            y + 9.0,
            escape(&p.to_string())
        );
        for (c, col) in columns.iter().enumerate() {
            let x = left + c as f64 * COL_W;
            let owner = col.get(p).cloned().flatten();
            let fill = owner
                .as_deref()
                .and_then(|o| colours.get(o).copied())
                .unwrap_or(DOWN);
            let moved = g.rebalances[c]
                .moves
                .iter()
                .any(|m| m.topic == p.topic && m.partition == p.partition);
            let _ = writeln!(
                s,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="10" fill="{fill}"{}><title>{} gen {}: {}</title></rect>"##,
                x + 2.0,
                y + 1.0,
                COL_W - 4.0,
                if moved {
                    r##" stroke="#222" stroke-width="1.5""##
                } else {
                    ""
                },
                escape(&p.to_string()),
                g.rebalances[c].epoch,
                owner
                    .as_deref()
                    .map_or_else(|| "no owner".to_owned(), escape),
            );
        }
    }
    let mut y = legend_y;
    for (name, fill) in colours {
        swatch(&mut s, 10.0, y, fill, name);
        y += 16.0;
    }
    swatch(
        &mut s,
        10.0,
        y,
        DOWN,
        "no owner (outlined: the owner changed)",
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::status::{MemberSnapshot, Move};

    #[test]
    fn page_shows_members_partitions_and_moves_escaped() {
        let g = GroupSnapshot {
            group_id: "g<1>".into(),
            kind: "classic",
            state: "Stable".into(),
            epoch: 2,
            protocol_type: "consumer".into(),
            protocol: "range".into(),
            assignor: Some("range".into()),
            leader: Some("a".into()),
            members: vec![MemberSnapshot {
                member_id: "a".into(),
                instance_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                partitions: vec![PartitionRef {
                    topic: "t".into(),
                    partition: 0,
                }],
                client_metrics: vec![("consumer.fetch.manager.records.lag.max<".into(), 42.0)],
            }],
            learners: vec![],
            share_partitions: vec![],
            offsets: 0,
            rebalances: vec![RebalanceSnapshot {
                epoch: 2,
                reason: "member b left".into(),
                started_ms: 0,
                completed_ms: 5,
                assignor: Some("range".into()),
                summary: None,
                members: vec!["a".into()],
                moves: vec![Move {
                    topic: "t".into(),
                    partition: 0,
                    from: Some("b".into()),
                    to: Some("a".into()),
                }],
            }],
        };
        let html = render(&[g], true);
        assert!(html.contains("g&lt;1&gt;"));
        assert!(!html.contains("g<1>"));
        assert!(html.contains(r#"data-partition="t-0">t-0: b &rarr; a"#));
        assert!(html.contains("<svg"));
        // The member's own metrics (KIP-714), escaped.
        assert!(html.contains("consumer.fetch.manager.records.lag.max&lt; = 42"));
    }
}
