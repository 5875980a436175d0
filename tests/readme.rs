//! README.md promises: its compatibility table is the dispatch table, and its configuration table
//! lists every key. A change to either side without the other fails here.

use std::collections::BTreeSet;

use koord::api::SUPPORTED;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap()
}

/// The table rows between `<!-- NAME` and `<!-- /NAME -->`, header and rule skipped.
fn table_rows(text: &str, name: &str) -> Vec<Vec<String>> {
    let start = text
        .find(&format!("<!-- {name}"))
        .unwrap_or_else(|| panic!("README has no {name}"));
    let end = text
        .find(&format!("<!-- /{name} -->"))
        .unwrap_or_else(|| panic!("README has no end of {name}"));
    text[start..end]
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn compatibility_table_is_the_dispatch_table() {
    let documented: BTreeSet<(String, i16, i16, i16)> = table_rows(&readme(), "api-table")
        .into_iter()
        .map(|row| {
            let (min, max) = row[2]
                .split_once('–')
                .unwrap_or_else(|| panic!("versions `{}` are not MIN–MAX", row[2]));
            (
                row[0].clone(),
                row[1].parse().unwrap(),
                min.parse().unwrap(),
                max.parse().unwrap(),
            )
        })
        .collect();
    let served: BTreeSet<(String, i16, i16, i16)> = SUPPORTED
        .iter()
        .map(|s| (format!("{:?}", s.key), s.key as i16, s.min, s.max))
        .collect();
    assert_eq!(
        documented, served,
        "README.md api-table vs src/api/supported.rs SUPPORTED"
    );
}

#[test]
fn configuration_table_lists_every_key() {
    let documented: BTreeSet<String> = table_rows(&readme(), "config-table")
        .into_iter()
        .map(|row| row[0].trim_matches('`').to_string())
        .collect();
    let keys: BTreeSet<String> = koord::config::KEYS
        .iter()
        .map(|k| k.name.to_string())
        .collect();
    assert_eq!(
        documented, keys,
        "README.md config-table vs src/config/keys.rs KEYS"
    );
}
