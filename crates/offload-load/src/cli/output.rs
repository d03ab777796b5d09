//! The report as a terminal summary or as JSON (seconds, requests/s, bytes/s).

use std::fmt::Write;

use crate::report::{self, quantile_s, QUANTILES};
use crate::{ErrorKind, Report};
use hdrhistogram::Histogram;
use serde::Serialize;

use super::args::Setup;

fn ms(s: f64) -> String {
    if s.is_nan() {
        "-".into()
    } else {
        format!("{:.3} ms", s * 1e3)
    }
}

fn line(h: &Histogram<u64>) -> String {
    let mut out = String::new();
    for (name, q) in QUANTILES {
        let _ = write!(out, "{name} {:<12}", ms(quantile_s(h, q)));
    }
    out.trim_end().to_string()
}

pub fn summary(setup: &Setup, r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}  {}", setup.url, setup.mode);
    let _ = writeln!(
        o,
        "  {} thread(s), {:.2} s: {} sent, {} ok, {} failed, {} unfinished",
        r.threads, r.duration_s, r.sent, r.completed, r.failed, r.unfinished
    );
    let _ = writeln!(
        o,
        "  throughput {:.1} req/s, goodput {:.2} MB/s",
        r.throughput,
        r.goodput_Bps / 1e6
    );
    if !r.offered_rate.is_nan() {
        let _ = writeln!(
            o,
            "  offered {:.1} req/s, achieved {:.1} req/s; lag mean {}, p99 {}, max {}",
            r.offered_rate,
            r.achieved_rate,
            ms(r.lag.mean_s),
            ms(r.lag.p99_s),
            ms(r.lag.max_s)
        );
    }
    let _ = writeln!(o, "  total    {}", line(&r.overall.total));
    let _ = writeln!(o, "  ttfb     {}", line(&r.overall.ttfb));
    let _ = writeln!(
        o,
        "  connect  {} connections ({:.0}/min), mean {}",
        r.connections,
        r.connections_per_min(),
        ms(r.connect_mean_s)
    );
    let errors: Vec<String> = ErrorKind::ALL
        .iter()
        .filter(|k| r.error_count(**k) > 0)
        .map(|k| format!("{} {}", k.name(), r.error_count(*k)))
        .collect();
    if !errors.is_empty() {
        let _ = writeln!(o, "  errors   {}", errors.join(", "));
    }
    let status: Vec<String> = r.status.iter().map(|(s, n)| format!("{s}: {n}")).collect();
    let _ = writeln!(o, "  status   {}", status.join(", "));
    o
}

/// The report's document (the library's) with what this run was: URL and mode.
#[derive(Serialize)]
struct Described<'a> {
    #[serde(flatten)]
    report: report::Document<'a>,
    url: &'a str,
    mode: &'a str,
}

pub fn json(setup: &Setup, r: &Report) -> String {
    let doc = Described {
        report: r.document(),
        url: &setup.url,
        mode: &setup.mode,
    };
    serde_json::to_string_pretty(&doc).expect("JSON of plain values")
}
