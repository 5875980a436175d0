//! ns per recorded request for prometheus-client and metrics + metrics-exporter-prometheus, with
//! pre-resolved handles (what koord does) and with a label lookup per call (each crate's
//! idiomatic macro/family call), on 1 thread and on 2 threads at once. The median of 5 runs.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};

const N: u64 = 2_000_000;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    api: &'static str,
    version: &'static str,
}

fn time(threads: usize, f: Arc<dyn Fn() + Send + Sync>) -> f64 {
    let mut runs = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let f = f.clone();
                std::thread::spawn(move || {
                    for _ in 0..N {
                        f();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        runs.push(start.elapsed().as_nanos() as f64 / N as f64);
    }
    runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    runs[2]
}

fn main() {
    // Baseline: the two clock reads alone.
    let base: Arc<dyn Fn() + Send + Sync> = Arc::new(|| {
        let t = Instant::now();
        black_box(t.elapsed());
    });

    let fam = Family::<Labels, Counter>::default();
    let hfam = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(|| {
        Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
    });
    let labels = Labels {
        api: "Heartbeat",
        version: "4",
    };
    let c = fam.get_or_create_owned(&labels);
    let h = hfam.get_or_create_owned(&labels);
    let pc_handles: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
        let t = Instant::now();
        c.inc();
        h.observe(t.elapsed().as_secs_f64());
    });
    let (fam2, hfam2, l2) = (fam.clone(), hfam.clone(), labels.clone());
    let pc_lookup: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
        let t = Instant::now();
        fam2.get_or_create(&l2).inc();
        hfam2.get_or_create(&l2).observe(t.elapsed().as_secs_f64());
    });

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets(&exponential_buckets(0.000_05, 2.0, 20).collect::<Vec<_>>())
        .unwrap()
        .install_recorder()
        .unwrap();
    let mc = metrics::counter!("requests", "api" => "Heartbeat", "version" => "4");
    let mh = metrics::histogram!("latency", "api" => "Heartbeat");
    let m_handles: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
        let t = Instant::now();
        mc.increment(1);
        mh.record(t.elapsed().as_secs_f64());
    });
    let m_lookup: Arc<dyn Fn() + Send + Sync> = Arc::new(|| {
        let t = Instant::now();
        metrics::counter!("requests", "api" => "Heartbeat", "version" => "4").increment(1);
        metrics::histogram!("latency", "api" => "Heartbeat").record(t.elapsed().as_secs_f64());
    });

    println!("| recording | 1 thread, ns/request | 2 threads, ns/request |");
    println!("|---|---|---|");
    for (name, f) in [
        ("clock reads only (baseline)", base),
        ("prometheus-client, handles", pc_handles),
        ("prometheus-client, family lookup", pc_lookup),
        ("metrics + exporter, handles", m_handles),
        ("metrics + exporter, macro lookup", m_lookup),
    ] {
        let one = time(1, f.clone());
        let two = time(2, f);
        println!("| {name} | {one:.1} | {two:.1} |");
    }
    // The exporter keeps histogram samples until a scrape drains them: render once, as a
    // scrape would, so the comparison includes that work being possible.
    black_box(recorder.render().len());
}
