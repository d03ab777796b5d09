//! What a run measured: HDR histograms (nanoseconds), counters, the achieved send
//! schedule, and optionally one record per request.
//!
//! Each load thread fills its own `Tally`, without locks; the run adds them into one
//! `Report` at the end (histograms add exactly).
//!
//! Latencies (time to first byte, total time) run from the request's *intended* start:
//! its send time in open loop, the end of its think time in closed loop. The *lag* is
//! how late the request actually started (connect begun, or first byte written on a
//! connection already open) after that: the generator's own delay plus any wait behind a
//! busy keep-alive connection. Histograms hold requests that completed without error;
//! connect times hold every connection established.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Serialize, Serializer};

use crate::error::{ErrorKind, UNFINISHED};

/// Connect, time-to-first-byte and total-time histograms, in nanoseconds. In JSON each
/// histogram is its `Quantiles`.
#[derive(Clone, Debug, Serialize)]
pub struct Latency {
    /// Connection establishment (connect() to the connection being up), per connection.
    #[serde(serialize_with = "quantiles")]
    pub connect: Histogram<u64>,
    /// Intended start to the first byte of the response.
    #[serde(serialize_with = "quantiles")]
    pub ttfb: Histogram<u64>,
    /// Intended start to the last byte of the response.
    #[serde(serialize_with = "quantiles")]
    pub total: Histogram<u64>,
}

impl Latency {
    pub(crate) fn new(high_ns: u64) -> Latency {
        let h = || Histogram::new_with_bounds(1, high_ns.max(2), 3).expect("valid bounds");
        Latency {
            connect: h(),
            ttfb: h(),
            total: h(),
        }
    }

    fn add(&mut self, other: &Latency) {
        // Same bounds everywhere, so adding cannot fail.
        self.connect.add(&other.connect).expect("same bounds");
        self.ttfb.add(&other.ttfb).expect("same bounds");
        self.total.add(&other.total).expect("same bounds");
    }
}

/// The `q` quantile of a nanosecond histogram, in seconds; NaN when it is empty.
pub fn quantile_s(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        f64::NAN
    } else {
        h.value_at_quantile(q) as f64 * 1e-9
    }
}

/// The mean of a nanosecond histogram, in seconds; NaN when it is empty.
pub fn mean_s(h: &Histogram<u64>) -> f64 {
    if h.is_empty() {
        f64::NAN
    } else {
        h.mean() * 1e-9
    }
}

/// The results of one size class (`Object::class`).
#[derive(Clone, Debug, Serialize)]
pub struct ClassReport {
    pub class: u8,
    pub completed: u64,
    pub errors: u64,
    pub body_bytes: u64,
    #[serde(flatten)]
    pub latency: Latency,
}

/// How late requests started against the plan (actual start − intended start).
#[derive(Clone, Debug, Serialize)]
pub struct Lag {
    pub mean_s: f64,
    pub p99_s: f64,
    pub max_s: f64,
    /// Nanoseconds, every request started.
    #[serde(skip)]
    pub histogram: Histogram<u64>,
}

/// One row per request started, sorted by intended start (then plan index). Times in
/// seconds; NaN where there is none (`connect_s` on a reused connection, `ttfb_s`
/// without a byte of response, `total_s` without a complete response).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Records {
    /// Index of the request in `Plan::requests`.
    pub request: Vec<u32>,
    /// Intended start, from the start of the run.
    pub intended_s: Vec<f64>,
    /// Actual start (connect begun, or first byte written), from the start of the run.
    pub sent_s: Vec<f64>,
    /// Connection establishment, when this request opened a connection.
    pub connect_s: Vec<f64>,
    /// Intended start to first response byte.
    pub ttfb_s: Vec<f64>,
    /// Intended start to last response byte.
    pub total_s: Vec<f64>,
    /// Response body bytes received.
    pub bytes: Vec<u64>,
    /// HTTP status, 0 when no head was read.
    pub status: Vec<u16>,
    /// 0: correct; an `ErrorKind` code; `error::UNFINISHED` (254): cut off by the end.
    pub error: Vec<u8>,
    pub object: Vec<u32>,
    pub conn: Vec<u64>,
}

impl Records {
    pub fn len(&self) -> usize {
        self.request.len()
    }

    pub fn is_empty(&self) -> bool {
        self.request.is_empty()
    }

    fn push(&mut self, r: &Row) {
        let s = |ns: Option<u64>| ns.map_or(f64::NAN, |ns| ns as f64 * 1e-9);
        self.request.push(r.request);
        self.intended_s.push(r.intended_ns as f64 * 1e-9);
        self.sent_s.push(r.sent_ns as f64 * 1e-9);
        self.connect_s.push(s(r.connect_ns));
        self.ttfb_s.push(s(r.ttfb_ns));
        self.total_s.push(s(r.total_ns));
        self.bytes.push(r.bytes);
        self.status.push(r.status);
        self.error.push(r.code);
        self.object.push(r.object);
        self.conn.push(r.conn);
    }

    fn append(&mut self, o: &mut Records) {
        self.request.append(&mut o.request);
        self.intended_s.append(&mut o.intended_s);
        self.sent_s.append(&mut o.sent_s);
        self.connect_s.append(&mut o.connect_s);
        self.ttfb_s.append(&mut o.ttfb_s);
        self.total_s.append(&mut o.total_s);
        self.bytes.append(&mut o.bytes);
        self.status.append(&mut o.status);
        self.error.append(&mut o.error);
        self.object.append(&mut o.object);
        self.conn.append(&mut o.conn);
    }

    fn sort(&mut self) {
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.sort_by(|&a, &b| {
            let t = self.intended_s[a].total_cmp(&self.intended_s[b]);
            t.then(self.request[a].cmp(&self.request[b]))
        });
        fn permute<T: Copy>(v: &mut Vec<T>, order: &[usize]) {
            *v = order.iter().map(|&i| v[i]).collect();
        }
        permute(&mut self.request, &order);
        permute(&mut self.intended_s, &order);
        permute(&mut self.sent_s, &order);
        permute(&mut self.connect_s, &order);
        permute(&mut self.ttfb_s, &order);
        permute(&mut self.total_s, &order);
        permute(&mut self.bytes, &order);
        permute(&mut self.status, &order);
        permute(&mut self.error, &order);
        permute(&mut self.object, &order);
        permute(&mut self.conn, &order);
    }
}

/// Everything a run measured.
#[derive(Clone, Debug)]
#[allow(non_snake_case)] // goodput_Bps: bytes, not bits (docs/design.md, "Names and units")
pub struct Report {
    /// Requests in the plan (with `Options::repeat`, one cycle's worth).
    pub planned: u64,
    /// Requests started.
    pub sent: u64,
    /// Requests that completed correctly.
    pub completed: u64,
    /// Requests that ended with an error (the sum of `errors`).
    pub failed: u64,
    /// Requests started but cut off by `max_duration_s` or cancellation.
    pub unfinished: u64,
    /// Failures by kind, indexed by `ErrorKind::index()`.
    pub errors: [u64; ErrorKind::COUNT],
    /// Response body bytes received, all responses.
    pub body_bytes: u64,
    /// Responses by HTTP status, ascending.
    pub status: Vec<(u16, u64)>,
    /// Wall-clock start and end, seconds since the Unix epoch.
    pub started_unix_s: f64,
    pub ended_unix_s: f64,
    /// Run time (monotonic clock).
    pub duration_s: f64,
    /// Connections established, and their mean establishment time.
    pub connections: u64,
    pub connect_mean_s: f64,
    /// Open loop: the plan's rate, (n − 1) / (last − first intended start); NaN closed.
    pub offered_rate: f64,
    /// (n − 1) / (last − first actual start), over the requests started.
    pub achieved_rate: f64,
    /// The first and the last actual start, from the start of the run; NaN when no
    /// request started.
    pub first_send_s: f64,
    pub last_send_s: f64,
    /// Correct completions per second of `duration_s`.
    pub throughput: f64,
    /// Body bytes of correct completions per second of `duration_s`.
    pub goodput_Bps: f64,
    pub lag: Lag,
    /// All classes together.
    pub overall: Latency,
    /// One entry per class in the plan's objects, ascending.
    pub classes: Vec<ClassReport>,
    /// Engine threads used.
    pub threads: usize,
    pub records: Option<Records>,
}

impl Report {
    pub fn error_count(&self, kind: ErrorKind) -> u64 {
        self.errors[kind.index()]
    }
}

/// A finished request, as an event loop hands it over.
pub(crate) struct Row {
    pub request: u32,
    pub object: u32,
    pub conn: u64,
    pub class_slot: usize,
    pub intended_ns: u64,
    pub sent_ns: u64,
    pub connect_ns: Option<u64>,
    pub ttfb_ns: Option<u64>,
    pub total_ns: Option<u64>,
    pub bytes: u64,
    pub status: u16,
    /// 0, an error code, or `UNFINISHED`.
    pub code: u8,
}

struct ClassTally {
    completed: u64,
    errors: u64,
    body_bytes: u64,
    latency: Latency,
}

/// One load thread's measurements.
pub(crate) struct Tally {
    sent: u64,
    completed: u64,
    failed: u64,
    unfinished: u64,
    errors: [u64; ErrorKind::COUNT],
    body_bytes: u64,
    good_bytes: u64,
    /// Indexed by status code (httparse gives three digits).
    status: Vec<u64>,
    connections: u64,
    connect_sum_ns: u64,
    first_send_ns: u64,
    last_send_ns: u64,
    lag: Histogram<u64>,
    lag_sum_ns: u128,
    lag_max_ns: u64,
    classes: Vec<ClassTally>,
    /// Total times of the current live window.
    pub window: Histogram<u64>,
    records: Option<Records>,
}

impl Tally {
    pub(crate) fn new(class_slots: usize, high_ns: u64, records: bool) -> Tally {
        let h = || Histogram::new_with_bounds(1, high_ns.max(2), 3).expect("valid bounds");
        Tally {
            sent: 0,
            completed: 0,
            failed: 0,
            unfinished: 0,
            errors: [0; ErrorKind::COUNT],
            body_bytes: 0,
            good_bytes: 0,
            status: vec![0; 1000],
            connections: 0,
            connect_sum_ns: 0,
            first_send_ns: u64::MAX,
            last_send_ns: 0,
            lag: h(),
            lag_sum_ns: 0,
            lag_max_ns: 0,
            classes: (0..class_slots)
                .map(|_| ClassTally {
                    completed: 0,
                    errors: 0,
                    body_bytes: 0,
                    latency: Latency::new(high_ns),
                })
                .collect(),
            window: h(),
            records: records.then(Records::default),
        }
    }

    /// A request started at `now`, `lag_ns` after its intended start.
    #[inline]
    pub(crate) fn started(&mut self, now: u64, lag_ns: u64) {
        self.sent += 1;
        self.first_send_ns = self.first_send_ns.min(now);
        self.last_send_ns = self.last_send_ns.max(now);
        self.lag.saturating_record(lag_ns);
        self.lag_sum_ns += u128::from(lag_ns);
        self.lag_max_ns = self.lag_max_ns.max(lag_ns);
    }

    /// A connection was established in `ns`, for a request of class slot `class_slot`.
    #[inline]
    pub(crate) fn connected(&mut self, class_slot: usize, ns: u64) {
        self.connections += 1;
        self.connect_sum_ns += ns;
        let c = &mut self.classes[class_slot];
        c.latency.connect.saturating_record(ns.max(1));
    }

    /// A request ended (completed, failed, or cut off).
    #[inline]
    pub(crate) fn finished(&mut self, r: &Row) {
        let c = &mut self.classes[r.class_slot];
        self.body_bytes += r.bytes;
        if r.status != 0 {
            self.status[usize::from(r.status).min(999)] += 1;
        }
        match r.code {
            0 => {
                self.completed += 1;
                self.good_bytes += r.bytes;
                c.completed += 1;
                c.body_bytes += r.bytes;
                if let Some(t) = r.ttfb_ns {
                    c.latency.ttfb.saturating_record(t.max(1));
                }
                if let Some(t) = r.total_ns {
                    c.latency.total.saturating_record(t.max(1));
                    self.window.saturating_record(t.max(1));
                }
            }
            UNFINISHED => self.unfinished += 1,
            code => {
                self.failed += 1;
                self.errors[usize::from(code) - 1] += 1;
                c.errors += 1;
            }
        }
        if let Some(rec) = &mut self.records {
            rec.push(r);
        }
    }
}

/// What the run knew apart from the tallies.
pub(crate) struct RunFacts {
    pub planned: u64,
    pub offered_rate: f64,
    pub class_ids: Vec<u8>,
    pub high_ns: u64,
    pub started_unix_s: f64,
    pub ended_unix_s: f64,
    pub duration_s: f64,
    pub threads: usize,
}

/// Adds the threads' tallies into the report.
pub(crate) fn merge(tallies: Vec<Tally>, f: RunFacts) -> Report {
    let h = || Histogram::new_with_bounds(1, f.high_ns.max(2), 3).expect("valid bounds");
    let mut classes: Vec<ClassReport> = f
        .class_ids
        .iter()
        .map(|&class| ClassReport {
            class,
            completed: 0,
            errors: 0,
            body_bytes: 0,
            latency: Latency::new(f.high_ns),
        })
        .collect();
    let mut overall = Latency::new(f.high_ns);
    let mut lag = h();
    let (mut lag_sum, mut lag_max) = (0u128, 0u64);
    let (mut first, mut last) = (u64::MAX, 0u64);
    let mut status = vec![0u64; 1000];
    let mut errors = [0u64; ErrorKind::COUNT];
    let (mut sent, mut completed, mut failed, mut unfinished) = (0, 0, 0, 0);
    let (mut body_bytes, mut good_bytes, mut connections, mut connect_sum) = (0, 0, 0, 0);
    let mut records = Vec::new();
    for mut t in tallies {
        sent += t.sent;
        completed += t.completed;
        failed += t.failed;
        unfinished += t.unfinished;
        body_bytes += t.body_bytes;
        good_bytes += t.good_bytes;
        connections += t.connections;
        connect_sum += t.connect_sum_ns;
        for (e, n) in errors.iter_mut().zip(t.errors) {
            *e += n;
        }
        for (s, n) in status.iter_mut().zip(&t.status) {
            *s += n;
        }
        lag.add(&t.lag).expect("same bounds");
        lag_sum += t.lag_sum_ns;
        lag_max = lag_max.max(t.lag_max_ns);
        first = first.min(t.first_send_ns);
        last = last.max(t.last_send_ns);
        for (c, tc) in classes.iter_mut().zip(&t.classes) {
            c.completed += tc.completed;
            c.errors += tc.errors;
            c.body_bytes += tc.body_bytes;
            c.latency.add(&tc.latency);
            overall.add(&tc.latency);
        }
        if let Some(r) = t.records.take() {
            records.push(r);
        }
    }
    let records = (!records.is_empty()).then(|| {
        let mut all = Records::default();
        for mut r in records {
            all.append(&mut r);
        }
        all.sort();
        all
    });
    let per_s = |n: u64| {
        if f.duration_s > 0.0 {
            n as f64 / f.duration_s
        } else {
            f64::NAN
        }
    };
    let achieved_rate = if sent > 1 && last > first {
        (sent - 1) as f64 / ((last - first) as f64 * 1e-9)
    } else {
        f64::NAN
    };
    let (first_send_s, last_send_s) = if sent > 0 {
        (first as f64 * 1e-9, last as f64 * 1e-9)
    } else {
        (f64::NAN, f64::NAN)
    };
    Report {
        planned: f.planned,
        sent,
        completed,
        failed,
        unfinished,
        errors,
        body_bytes,
        status: (0..1000u16).zip(status).filter(|&(_, n)| n > 0).collect(),
        started_unix_s: f.started_unix_s,
        ended_unix_s: f.ended_unix_s,
        duration_s: f.duration_s,
        connections,
        connect_mean_s: if connections > 0 {
            connect_sum as f64 * 1e-9 / connections as f64
        } else {
            f64::NAN
        },
        offered_rate: f.offered_rate,
        achieved_rate,
        first_send_s,
        last_send_s,
        throughput: per_s(completed),
        goodput_Bps: per_s(good_bytes),
        lag: Lag {
            mean_s: if sent > 0 {
                lag_sum as f64 * 1e-9 / sent as f64
            } else {
                f64::NAN
            },
            p99_s: quantile_s(&lag, 0.99),
            max_s: if sent > 0 {
                lag_max as f64 * 1e-9
            } else {
                f64::NAN
            },
            histogram: lag,
        },
        overall,
        classes,
        threads: f.threads,
        records,
    }
}

/// Quantiles reported for each latency histogram, with their JSON names.
pub const QUANTILES: [(&str, f64); 5] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("max", 1.0),
];

/// A histogram in JSON: its mean and `QUANTILES` in seconds (NaN, which serde_json
/// writes as null, when it is empty) and its count.
#[derive(Debug, Serialize)]
pub struct Quantiles {
    mean_s: f64,
    p50_s: f64,
    p90_s: f64,
    p99_s: f64,
    #[serde(rename = "p99.9_s")]
    p99_9_s: f64,
    max_s: f64,
    count: u64,
}

impl Quantiles {
    /// A nanosecond histogram's summary, taken in `QUANTILES`' order (a test checks
    /// that the names agree).
    pub fn of(h: &Histogram<u64>) -> Quantiles {
        let [p50_s, p90_s, p99_s, p99_9_s, max_s] = QUANTILES.map(|(_, q)| quantile_s(h, q));
        Quantiles {
            mean_s: mean_s(h),
            p50_s,
            p90_s,
            p99_s,
            p99_9_s,
            max_s,
            count: h.len(),
        }
    }
}

/// Writes a histogram of `Latency` as its `Quantiles`.
fn quantiles<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
    Quantiles::of(h).serialize(s)
}

/// A histogram in HdrHistogram's V2 encoding (no compression), as base64 text: how a
/// run on one host hands its histograms to the host that adds them up (`merge_encoded`), so
/// that the sum is exact, bucket by bucket, as no average of quantiles is.
pub fn encode(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut bytes)
        .expect("a histogram of u64 counts encodes into memory");
    BASE64.encode(bytes)
}

/// The histogram `encode` wrote.
pub fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = BASE64
        .decode(text)
        .map_err(|e| format!("histogram: not base64 ({e})"))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("histogram: not an HdrHistogram V2 encoding ({e:?})"))
}

/// The sum of encoded histograms, bucket by bucket. The sum grows to hold the largest
/// value of any of them (runs with longer bounds have more buckets).
pub fn merge_encoded(texts: &[impl AsRef<str>]) -> Result<Histogram<u64>, String> {
    let mut sum = Histogram::new(3).expect("3 significant digits");
    for text in texts {
        sum.add(decode(text.as_ref())?)
            .map_err(|e| format!("histogram: cannot be added ({e:?})"))?;
    }
    Ok(sum)
}

/// The buckets that hold values: each bucket's highest value (ns) and its count.
pub fn buckets(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_since_last_iteration()))
        .collect()
}

/// What a run on one host hands the host that merges runs: its histograms, encoded,
/// and the span of its actual starts (docs/load.md, "Across hosts").
#[derive(Debug, Serialize)]
pub struct Parts {
    pub first_send_s: f64,
    pub last_send_s: f64,
    /// Send lag, nanoseconds.
    pub lag: String,
    pub classes: Vec<ClassParts>,
}

/// One size class's histograms, encoded.
#[derive(Debug, Serialize)]
pub struct ClassParts {
    pub class: u8,
    pub connect: String,
    pub ttfb: String,
    pub total: String,
}

/// The report's JSON document (`Report::document`). Python reads it into
/// `offloadlab.documents.LoadReport`, which must follow any change here.
/// serde_json writes a NaN (a rate or a time with nothing to measure) as null.
#[derive(Debug, Serialize)]
#[allow(non_snake_case)] // goodput_Bps, as in `Report`
pub struct Document<'a> {
    threads: usize,
    planned: u64,
    sent: u64,
    completed: u64,
    failed: u64,
    unfinished: u64,
    /// Failures by `ErrorKind::name`, every kind.
    errors: BTreeMap<&'static str, u64>,
    /// Responses by HTTP status, statuses seen only.
    status: BTreeMap<String, u64>,
    body_bytes: u64,
    duration_s: f64,
    started_unix_s: f64,
    ended_unix_s: f64,
    throughput: f64,
    goodput_Bps: f64,
    offered_rate: f64,
    achieved_rate: f64,
    lag: &'a Lag,
    connections: u64,
    connect_mean_s: f64,
    connections_per_min: f64,
    classes: &'a [ClassReport],
    /// All classes together: `total`, `ttfb` and `connect` at the top level.
    #[serde(flatten)]
    overall: &'a Latency,
}

impl Report {
    /// The parts another host adds this run to others by (`merge_encoded`).
    pub fn parts(&self) -> Parts {
        Parts {
            first_send_s: self.first_send_s,
            last_send_s: self.last_send_s,
            lag: encode(&self.lag.histogram),
            classes: self
                .classes
                .iter()
                .map(|c| ClassParts {
                    class: c.class,
                    connect: encode(&c.latency.connect),
                    ttfb: encode(&c.latency.ttfb),
                    total: encode(&c.latency.total),
                })
                .collect(),
        }
    }

    /// Connections established per minute of the run (seed 000's saturation measure);
    /// NaN for a run of no duration.
    pub fn connections_per_min(&self) -> f64 {
        self.connections as f64 * 60.0 / self.duration_s
    }

    /// The report as a JSON document: counts, errors by kind, status counts, rates, the
    /// send lag, and for the latencies (total, ttfb, connect; overall and per class) the
    /// mean and quantiles in seconds. Records are not included.
    pub fn document(&self) -> Document<'_> {
        Document {
            threads: self.threads,
            planned: self.planned,
            sent: self.sent,
            completed: self.completed,
            failed: self.failed,
            unfinished: self.unfinished,
            errors: ErrorKind::ALL
                .iter()
                .map(|k| (k.name(), self.error_count(*k)))
                .collect(),
            status: self
                .status
                .iter()
                .map(|(s, n)| (s.to_string(), *n))
                .collect(),
            body_bytes: self.body_bytes,
            duration_s: self.duration_s,
            started_unix_s: self.started_unix_s,
            ended_unix_s: self.ended_unix_s,
            throughput: self.throughput,
            goodput_Bps: self.goodput_Bps,
            offered_rate: self.offered_rate,
            achieved_rate: self.achieved_rate,
            lag: &self.lag,
            connections: self.connections,
            connect_mean_s: self.connect_mean_s,
            connections_per_min: self.connections_per_min(),
            classes: &self.classes,
            overall: &self.overall,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_in_json_has_its_mean_count_and_every_quantile_with_nan_as_null() {
        let mut latency = Latency::new(1_000_000);
        latency.total.record(2000).unwrap();
        let doc = serde_json::to_value(&latency).unwrap();
        let names: Vec<String> = QUANTILES.iter().map(|(n, _)| format!("{n}_s")).collect();
        let mut expected: Vec<&str> = names.iter().map(String::as_str).collect();
        expected.extend(["count", "mean_s"]);
        expected.sort_unstable();
        for part in ["total", "ttfb", "connect"] {
            let keys: Vec<&str> = doc[part]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(keys, expected, "{part}");
        }
        assert_eq!(doc["total"]["count"], 1);
        assert!((doc["total"]["max_s"].as_f64().unwrap() - 2e-6).abs() < 1e-12);
        assert!(doc["ttfb"]["p99.9_s"].is_null() && doc["ttfb"]["mean_s"].is_null());
    }

    #[test]
    fn encoded_histograms_add_up_to_the_pooled_histogram_bucket_for_bucket() {
        // Three hosts' latencies, log-uniform from 1 µs to each host's bound; the bounds
        // differ, as those of runs of different lengths do.
        let highs = [1_000_000_000u64, 20_000_000_000, 60_000_000_000];
        let mut pooled = Histogram::<u64>::new_with_bounds(1, highs[2], 3).unwrap();
        let mut x = 12_345u64;
        let encoded: Vec<String> = highs
            .iter()
            .map(|&high| {
                let mut h = Histogram::<u64>::new_with_bounds(1, high, 3).unwrap();
                for _ in 0..20_000 {
                    x = x
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                    let v = (1e3 * (high as f64 / 1e3).powf(u)) as u64;
                    h.record(v).unwrap();
                    pooled.record(v).unwrap();
                }
                encode(&h)
            })
            .collect();
        let merged = merge_encoded(&encoded).unwrap();
        assert_eq!(merged.len(), 60_000);
        assert_eq!(buckets(&merged), buckets(&pooled));
        assert_eq!(
            buckets(&decode(&encode(&merged)).unwrap()),
            buckets(&pooled)
        );
    }

    #[test]
    fn a_text_that_is_no_encoded_histogram_is_refused_with_what_it_is_not() {
        assert!(decode("not base64!").unwrap_err().contains("not base64"));
        let not_hdr = BASE64.encode(b"just some bytes");
        assert!(decode(&not_hdr)
            .unwrap_err()
            .contains("not an HdrHistogram"));
        assert!(merge_encoded(&["AAAA"]).is_err());
        let none: [&str; 0] = [];
        assert_eq!(merge_encoded(&none).unwrap().len(), 0);
    }
}
