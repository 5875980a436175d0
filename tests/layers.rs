//! The import graph of src/, read from the code's `crate::`, `super::` and `self::` paths
//! (every form: `use crate::a::B`, `use crate::{a, b::{c, d}}`, a path inside an expression).
//! Comments and string literals are not imports, and neither is test code (`tests.rs`,
//! `*_tests.rs`, a `#[cfg(test)]` item), which may reach across layers for its fixtures.
//!
//! - `vocab` imports nothing of koord's; `group`, `assignor`, `offsets`, `storage` and `txn`
//!   import `vocab` and not each other, except that the group core calls the assignors.
//! - src/'s top-level modules form no circle, and neither do the files of any folder (a
//!   folder's `mod.rs` is its face: its own imports count for the folder, and a sibling it
//!   names is not an edge of the folder's files).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// `text` without comments, string and char literals (their contents become blanks).
fn code_of(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'r' && matches!(b.get(i + 1), Some(b'"') | Some(b'#')) && !ident(b, i) {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            i = j + close.len();
            out.push_str("\"\"");
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' && is_char_literal(b, i) {
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c as char);
            i += 1;
        }
    }
    out
}

/// Whether the byte before `i` continues an identifier (so `b[i]` is not a literal's start).
fn ident(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// A char literal ('a', '\n', '\u{..}'), not a lifetime ('a).
fn is_char_literal(b: &[u8], i: usize) -> bool {
    match (b.get(i + 1), b.get(i + 2)) {
        (Some(b'\\'), _) => true,
        (Some(_), Some(b'\'')) => true,
        // A multi-byte UTF-8 char.
        (Some(c), _) if *c >= 0x80 => true,
        _ => false,
    }
}

/// `code` without `#[cfg(test)]` items (a module, a function, an impl: up to the end of
/// their braces or their `;`).
fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let b = item.as_bytes();
        let mut i = 0;
        let mut depth = 0;
        let mut end = item.len();
        while i < b.len() {
            match b[i] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Every path `code` names after `prefix` (`crate::`, `super::`, `self::`), as segment lists:
/// `crate::a::{b, c::D}` gives `[a, b]` and `[a, c, D]`.
fn paths(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix) {
        let start = from + at;
        from = start + prefix.len();
        if ident(b, start) || (start > 0 && b[start - 1] == b':') {
            continue;
        }
        tree(code, &mut from, Vec::new(), &mut out);
    }
    out
}

/// Reads one use-tree at `*at` below `base` into `out`.
fn tree(code: &str, at: &mut usize, base: Vec<String>, out: &mut Vec<Vec<String>>) {
    let b = code.as_bytes();
    let skip_ws = |at: &mut usize| {
        while *at < b.len() && b[*at].is_ascii_whitespace() {
            *at += 1;
        }
    };
    let mut path = base;
    loop {
        skip_ws(at);
        if *at < b.len() && b[*at] == b'{' {
            *at += 1;
            loop {
                skip_ws(at);
                if *at >= b.len() {
                    return;
                }
                if b[*at] == b'}' {
                    *at += 1;
                    return;
                }
                if b[*at] == b',' {
                    *at += 1;
                    continue;
                }
                let before = *at;
                tree(code, at, path.clone(), out);
                if *at == before {
                    *at += 1;
                }
            }
        }
        let start = *at;
        while *at < b.len() && (b[*at].is_ascii_alphanumeric() || b[*at] == b'_') {
            *at += 1;
        }
        if *at == start {
            if !path.is_empty() {
                out.push(path);
            }
            return;
        }
        path.push(code[start..*at].to_string());
        if code[*at..].starts_with("::") {
            *at += 2;
        } else {
            out.push(path);
            return;
        }
    }
}

/// A product source file: its module path (`["api", "table"]`; `mod.rs` is its folder's
/// path) and its code without test items.
struct Source {
    module: Vec<String>,
    is_mod: bool,
    code: String,
}

fn sources() -> Vec<Source> {
    let mut files = Vec::new();
    collect(&src(), &mut files);
    let mut out = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src()).unwrap();
        let name = f.file_stem().unwrap().to_string_lossy().to_string();
        if name == "tests"
            || name.ends_with("_tests")
            || rel.components().any(|c| c.as_os_str() == "tests")
        {
            continue;
        }
        let mut module: Vec<String> = rel
            .parent()
            .unwrap()
            .components()
            .map(|c| c.as_os_str().to_string_lossy().to_string())
            .collect();
        let is_mod = name == "mod" || (module.is_empty() && (name == "lib" || name == "main"));
        if !is_mod {
            module.push(name);
        }
        let text = std::fs::read_to_string(&f).unwrap();
        out.push(Source {
            module,
            is_mod,
            code: without_tests(&code_of(&text)),
        });
    }
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The absolute module paths `s` names (crate-relative segment lists).
fn named(s: &Source) -> Vec<Vec<String>> {
    let mut out = paths(&s.code, "crate::");
    // `super::` of a file is its folder; of a folder's mod.rs, the folder's parent.
    let parent: Vec<String> = if s.is_mod {
        s.module[..s.module.len().saturating_sub(1)].to_vec()
    } else {
        s.module[..s.module.len() - 1].to_vec()
    };
    for p in paths(&s.code, "super::") {
        let mut base = parent.clone();
        let mut p = p;
        // `super::super::x`.
        while p.first().is_some_and(|x| x == "super") {
            base.pop();
            p.remove(0);
        }
        base.extend(p);
        out.push(base);
    }
    let own: Vec<String> = s.module.clone();
    for p in paths(&s.code, "self::") {
        let mut base = if s.is_mod {
            own.clone()
        } else {
            parent.clone()
        };
        base.extend(p);
        out.push(base);
    }
    out
}

/// The import graph of src/'s top-level modules (a file or a folder each).
fn top_level() -> BTreeMap<String, BTreeSet<String>> {
    let sources = sources();
    let tops: BTreeSet<String> = sources
        .iter()
        .filter_map(|s| s.module.first().cloned())
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in &sources {
        let Some(top) = s.module.first() else {
            continue;
        };
        let edges = graph.entry(top.clone()).or_default();
        for p in named(s) {
            if let Some(first) = p.first() {
                if first != top && tops.contains(first) {
                    edges.insert(first.clone());
                }
            }
        }
    }
    graph
}

/// Per folder (`api`, `group/consumer`, ...), the import graph of its files and subfolders.
fn folders() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let sources = sources();
    let mut out: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for s in &sources {
        // Every folder this file lies in (below src/), with the file's member of it.
        for depth in 1..s.module.len() {
            let folder = &s.module[..depth];
            let member = &s.module[depth];
            let graph = out.entry(folder.join("/")).or_default();
            let edges = graph.entry(member.clone()).or_default();
            for p in named(s) {
                if p.len() > depth && p[..depth] == *folder && p[depth] != *member {
                    edges.insert(p[depth].clone());
                }
            }
        }
    }
    // Only members that are files or folders of the folder (not items of its mod.rs).
    for graph in out.values_mut() {
        let members: BTreeSet<String> = graph.keys().cloned().collect();
        for edges in graph.values_mut() {
            edges.retain(|e| members.contains(e));
        }
    }
    out
}

/// The circles of `graph` (strongly connected parts of more than one node).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Two nodes are in one circle when each reaches the other.
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|k| (k, reach(k))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for k in graph.keys() {
        if done.contains(k) || !reaches[k].contains(k) {
            continue;
        }
        let circle: Vec<String> = graph
            .keys()
            .filter(|m| reaches[k].contains(*m) && reaches[*m].contains(k))
            .cloned()
            .collect();
        done.extend(circle.iter().cloned());
        out.push(circle);
    }
    out
}

/// What ties a circle: its edges, `a -> b`.
fn ties(graph: &BTreeMap<String, BTreeSet<String>>, circle: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for a in circle {
        for b in graph.get(a).into_iter().flatten() {
            if circle.contains(b) {
                out.push(format!("{a} -> {b}"));
            }
        }
    }
    out
}

fn imports_of(module: &str) -> BTreeSet<String> {
    top_level().remove(module).unwrap_or_default()
}

#[test]
fn vocab_imports_nothing_of_koord() {
    assert_eq!(imports_of("vocab"), BTreeSet::new());
}

#[test]
fn pure_layers_import_vocab_and_not_each_other() {
    let layers = ["group", "assignor", "offsets", "storage", "txn"];
    for module in layers {
        let allowed: &[&str] = match module {
            "group" => &["assignor"],
            _ => &[],
        };
        let wrong: Vec<String> = imports_of(module)
            .into_iter()
            .filter(|m| layers.contains(&m.as_str()) && !allowed.contains(&m.as_str()))
            .collect();
        assert!(
            wrong.is_empty(),
            "src/{module} imports {wrong:?}; it may import vocab{}",
            if allowed.is_empty() {
                String::new()
            } else {
                format!(" and {allowed:?}")
            }
        );
    }
}

#[test]
fn top_level_modules_form_no_circle() {
    let graph = top_level();
    assert!(graph.len() > 10, "src/ read wrong: {graph:?}");
    let found: Vec<String> = circles(&graph)
        .iter()
        .map(|c| format!("{c:?}: {:?}", ties(&graph, c)))
        .collect();
    assert!(found.is_empty(), "circles among src/'s modules: {found:#?}");
}

#[test]
fn the_files_of_no_folder_form_a_circle() {
    let folders = folders();
    assert!(folders.contains_key("api") && folders.contains_key("group/consumer"));
    let mut found = Vec::new();
    for (folder, graph) in &folders {
        for c in circles(graph) {
            found.push(format!("src/{folder}: {c:?}: {:?}", ties(graph, &c)));
        }
    }
    assert!(
        found.is_empty(),
        "circles among a folder's files: {found:#?}"
    );
}

#[test]
fn the_reader_sees_every_form_of_path() {
    let code = code_of(
        "use crate::{a, b::{c, d::E}};\n// crate::commented\nlet s = \"crate::quoted\";\nfoo(crate::f::g());\n",
    );
    let mut got = paths(&code, "crate::");
    got.sort();
    let want: Vec<Vec<String>> = [
        vec!["a"],
        vec!["b", "c"],
        vec!["b", "d", "E"],
        vec!["f", "g"],
    ]
    .iter()
    .map(|p| p.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(got, want);
    let stripped = without_tests(
        "fn a() { crate::x::y(); }\n#[cfg(test)]\nmod tests { use crate::z; }\nfn b() {}",
    );
    assert!(
        stripped.contains("crate::x")
            && !stripped.contains("crate::z")
            && stripped.contains("fn b")
    );
    // A circle is found, and what ties it is named.
    let graph: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a")]
        .iter()
        .map(|(x, y)| (x.to_string(), BTreeSet::from([y.to_string()])))
        .collect();
    assert_eq!(
        circles(&graph),
        vec![vec!["a".to_string(), "b".into(), "c".into()]]
    );
}
