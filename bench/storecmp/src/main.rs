//! fjall vs redb on koord's offset-commit workload: batches of offset records (key
//! `group\0topic\0partition`, ~40-byte value) written and synced to disk once per batch, as
//! the storage task's group commit does.
//!
//! Usage: `cargo run --release -- [DIR]` (DIR defaults to a temp dir; use a real disk).
//! Prints, per engine: writes/s and p50/p99 batch latency for batch sizes 1, 100 and 1000;
//! the store's size after 1M writes over 10k keys; open + full scan time with 1M keys.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const KEYS: usize = 10_000;

fn key(i: usize) -> Vec<u8> {
    format!("group-{}\0topic-{}\0{}", i % 10, (i / 10) % 100, i).into_bytes()
}

fn value(n: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(40);
    v.extend_from_slice(&n.to_be_bytes()); // offset
    v.extend_from_slice(&0i32.to_be_bytes()); // leader epoch
    v.extend_from_slice(&1_700_000_000_000u64.to_be_bytes()); // commit time
    v.extend_from_slice(&u64::MAX.to_be_bytes()); // expiry
    v.extend_from_slice(b"metadata"); // metadata
    v
}

trait Engine {
    fn name(&self) -> &'static str;
    /// Writes `batch` and makes it durable.
    fn write_synced(&mut self, batch: &[(Vec<u8>, Vec<u8>)]);
    /// Writes without waiting for the disk (bulk loading for the size/start-up figures).
    fn write_fast(&mut self, batch: &[(Vec<u8>, Vec<u8>)]);
    fn scan(&self) -> usize;
}

struct Fjall {
    db: fjall::Database,
    ks: fjall::Keyspace,
}

impl Fjall {
    fn open(dir: &Path) -> Fjall {
        let db = fjall::Database::builder(dir).open().unwrap();
        let ks = db
            .keyspace("offsets", fjall::KeyspaceCreateOptions::default)
            .unwrap();
        Fjall { db, ks }
    }
}

impl Engine for Fjall {
    fn name(&self) -> &'static str {
        "fjall 3.1"
    }
    fn write_synced(&mut self, batch: &[(Vec<u8>, Vec<u8>)]) {
        self.write_fast(batch);
        self.db.persist(fjall::PersistMode::SyncData).unwrap();
    }
    fn write_fast(&mut self, batch: &[(Vec<u8>, Vec<u8>)]) {
        let mut b = self.db.batch();
        for (k, v) in batch {
            b.insert(&self.ks, k.clone(), v.clone());
        }
        b.commit().unwrap();
    }
    fn scan(&self) -> usize {
        self.ks.iter().map(|kv| kv.into_inner().unwrap()).count()
    }
}

const TABLE: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("offsets");

struct Redb {
    db: redb::Database,
}

impl Redb {
    fn open(dir: &Path) -> Redb {
        std::fs::create_dir_all(dir).unwrap();
        let db = redb::Database::create(dir.join("store.redb")).unwrap();
        Redb { db }
    }
    fn write(&mut self, batch: &[(Vec<u8>, Vec<u8>)], durability: redb::Durability) {
        let mut tx = self.db.begin_write().unwrap();
        tx.set_durability(durability).unwrap();
        {
            let mut t = tx.open_table(TABLE).unwrap();
            for (k, v) in batch {
                t.insert(k.as_slice(), v.as_slice()).unwrap();
            }
        }
        tx.commit().unwrap();
    }
}

impl Engine for Redb {
    fn name(&self) -> &'static str {
        "redb 4.6"
    }
    fn write_synced(&mut self, batch: &[(Vec<u8>, Vec<u8>)]) {
        self.write(batch, redb::Durability::Immediate);
    }
    fn write_fast(&mut self, batch: &[(Vec<u8>, Vec<u8>)]) {
        self.write(batch, redb::Durability::None);
    }
    fn scan(&self) -> usize {
        use redb::{ReadableDatabase, ReadableTable};
        let tx = self.db.begin_read().unwrap();
        let t = tx.open_table(TABLE).unwrap();
        t.iter().unwrap().map(|r| r.unwrap()).count()
    }
}

fn dir_size(p: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        n += if m.is_dir() {
            dir_size(&e.path())
        } else {
            m.len()
        };
    }
    n
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 * p) as usize).min(v.len() - 1)]
}

fn run(root: &Path, open: &dyn Fn(&Path) -> Box<dyn Engine>) {
    // 1. synced batches
    for &batch_size in &[1usize, 100, 1000] {
        let dir = root.join(format!("sync-{batch_size}"));
        let mut e = open(&dir);
        let rounds = match batch_size {
            1 => 500,
            100 => 300,
            _ => 100,
        };
        let mut lat = Vec::new();
        let mut n = 0u64;
        let start = Instant::now();
        for _ in 0..rounds {
            let batch: Vec<_> = (0..batch_size)
                .map(|_| {
                    n += 1;
                    (key((n as usize * 7919) % KEYS), value(n))
                })
                .collect();
            let t = Instant::now();
            e.write_synced(&batch);
            lat.push(t.elapsed());
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{:9} batch {:5}: {:>9.0} writes/s, {:>7.0} syncs/s, p50 {:?}, p99 {:?}",
            e.name(),
            batch_size,
            n as f64 / secs,
            rounds as f64 / secs,
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99)
        );
    }
    // 2. size after 1M writes over 10k keys (batches of 1000, a sync every 10 batches)
    let dir = root.join("size");
    {
        let mut e = open(&dir);
        let t = Instant::now();
        for b in 0..1000u64 {
            let batch: Vec<_> = (0..1000u64)
                .map(|i| {
                    let n = b * 1000 + i;
                    (key((n as usize * 7919) % KEYS), value(n))
                })
                .collect();
            if b % 10 == 9 {
                e.write_synced(&batch);
            } else {
                e.write_fast(&batch);
            }
        }
        println!(
            "{:9} 1M writes over 10k keys in {:?}: store {} KiB right after",
            e.name(),
            t.elapsed(),
            dir_size(&dir) / 1024
        );
    }
    println!("{:9}   ... and after reopening: {} KiB", "", {
        let e = open(&dir);
        let _ = e.scan();
        drop(e);
        dir_size(&dir) / 1024
    });
    // 3. start-up with 1M distinct keys
    let dir = root.join("startup");
    {
        let mut e = open(&dir);
        for b in 0..1000usize {
            let batch: Vec<_> = (0..1000usize)
                .map(|i| {
                    let n = b * 1000 + i;
                    (
                        format!("group-{}\0topic-{}\0{}", n % 1000, (n / 1000) % 100, n)
                            .into_bytes(),
                        value(n as u64),
                    )
                })
                .collect();
            e.write_fast(&batch);
        }
        e.write_synced(&[]);
    }
    let t = Instant::now();
    let e = open(&dir);
    let n = e.scan();
    println!(
        "{:9} open + scan of {} keys: {:?} (store {} KiB)",
        e.name(),
        n,
        t.elapsed(),
        dir_size(&dir) / 1024
    );
}

fn main() {
    let root: PathBuf = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("koord-storecmp"));
    let _ = std::fs::remove_dir_all(&root);
    run(&root.join("fjall"), &|d| Box::new(Fjall::open(d)));
    run(&root.join("redb"), &|d| Box::new(Redb::open(d)));
    let _ = std::fs::remove_dir_all(&root);
}
