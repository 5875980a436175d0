//! The import graph of the pure layers: `vocab` imports nothing of koord's; `group`,
//! `assignor`, `offsets`, `storage` and `txn` import `vocab` and not each other, except that the group
//! core calls the assignors (`group` -> `assignor`). Comments are not imports, so doc links
//! across layers are allowed.

use std::collections::BTreeSet;
use std::path::Path;

/// The koord modules that files under `src/<module>` name as `crate::<name>`.
fn imports_of(module: &str) -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let dir = root.join(module);
    if dir.is_dir() {
        collect(&dir, &mut files);
    } else {
        files.push(root.join(format!("{module}.rs")));
    }
    let mut out = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for line in text.lines() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            let mut rest = code;
            while let Some(at) = rest.find("crate::") {
                rest = &rest[at + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name != module {
                    out.insert(name);
                }
            }
        }
    }
    out
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
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
