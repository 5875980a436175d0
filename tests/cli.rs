//! The `koord` command line: `check-config` on the shipped file and on bad files.

use std::path::Path;
use std::process::Command;

fn koord() -> Command {
    Command::new(env!("CARGO_BIN_EXE_koord"))
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("koord-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("koord.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn check_config_accepts_the_shipped_file_and_prints_every_key() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/koord.toml");
    let out = koord().arg("check-config").arg(&shipped).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    for key in koord::config::KEYS {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("{} = ", key.name))),
            "`{}` missing from:\n{stdout}",
            key.name
        );
    }
    assert!(
        stdout.contains("socket.request.max.bytes = 104857600"),
        "{stdout}"
    );
}

#[test]
fn check_config_rejects_an_unknown_key_naming_it() {
    let path = temp_file("unknown", "num.partitions = 2\ngroup.frobnicate.ms = 5\n");
    let out = koord().arg("check-config").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("group.frobnicate.ms"), "{stderr}");
}

#[test]
fn check_config_rejects_an_invalid_value_naming_the_key() {
    let path = temp_file("invalid", "num.partitions = \"many\"\n");
    let out = koord().arg("check-config").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("num.partitions"), "{stderr}");
}

#[test]
fn check_config_applies_overrides_after_the_file() {
    let path = temp_file("override", "num.partitions = 2\n");
    let out = koord()
        .arg("check-config")
        .arg(&path)
        .args(["--set", "num.partitions=7", "--set", "topics=a:3,b"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("num.partitions = 7"), "{stdout}");
    assert!(stdout.contains(r#"topics = ["a:3", "b:1"]"#), "{stdout}");
}

#[test]
fn check_config_refuses_server_assignment_of_streams_groups() {
    let path = temp_file(
        "streams",
        "group.assignment.protocols = [\"custom\", \"stream\"]\n",
    );
    let out = koord().arg("check-config").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("group.assignment.protocols") && stderr.contains("Kafka Streams"),
        "{stderr}"
    );
}

#[test]
fn serve_refuses_a_bad_override_before_listening() {
    let out = koord()
        .args(["--listen", "127.0.0.1:1", "--set", "no.such.key=1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no.such.key"));
}

#[test]
fn simulate_prints_one_row_per_run_and_draws_one_run() {
    let args = [
        "simulate",
        "--tasks",
        "12",
        "--before",
        "2",
        "--after",
        "3",
        "--restore-ms",
        "1000,5000",
        "--barrier-ms",
        "500",
        "--assignor",
        "range,uniform",
    ];
    let out = koord().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("scale-out 2 -> 3, 12 tasks"),
        "{stdout}"
    );
    assert!(lines[1].starts_with("assignor"), "{stdout}");
    for (row, (assignor, mode)) in lines[2..].iter().zip([
        ("range", "eager"),
        ("uniform", "cooperative"),
        ("range", "eager"),
        ("uniform", "cooperative"),
    ]) {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cells[..2], [assignor, mode], "{stdout}");
    }
    assert_eq!(lines.len(), 6, "{stdout}");
    // Deterministic.
    let again = koord().args(args).output().unwrap();
    assert_eq!(String::from_utf8(again.stdout).unwrap(), stdout);

    let json = koord().args(args).arg("--json").output().unwrap();
    let json = String::from_utf8(json.stdout).unwrap();
    assert!(
        json.starts_with('[') && json.trim_end().ends_with(']'),
        "{json}"
    );
    assert_eq!(json.matches("\"downtime_max_ms\"").count(), 4, "{json}");

    // --svg draws exactly one run.
    let dir = std::env::temp_dir().join(format!("koord-cli-{}-svg", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("timeline.svg");
    let out = koord().args(args).arg("--svg").arg(&svg).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--svg"));
    let out = koord()
        .args(["simulate", "--tasks", "12", "--before", "2", "--after", "3"])
        .args(["--assignor", "uniform", "--restore-ms", "1000", "--svg"])
        .arg(&svg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(
        drawn.starts_with("<svg") && drawn.contains(">t11<"),
        "{drawn}"
    );
}
