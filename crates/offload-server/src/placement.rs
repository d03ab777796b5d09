//! Model-driven placement (seed 000 §6, made real) in `handoff` mode: the engine, which
//! sees every request first, classifies a connection by the size of the object its
//! first request asks for and keeps it (offload) or passes it to the host, so that a
//! fraction f_c of class c's connections is offloaded. A controller outside the server
//! (Python's `offloadlab.online`) turns the knobs, the fractions and the engine's
//! slowdown, while the server runs; it reads back what each class costs where it is
//! served, from the accounts below.
//!
//! Accounting: with placement on, each socket loop times the work it does for each
//! connection and charges it to the answer that completes it (`Proto::account`). The
//! host also times its answers to requests the engine holds. Work no connection owns
//! (epoll waits, rings, accept, the slowdown's burns) is left out here; the controller
//! spreads it using the threads' CPU clocks.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::files::Files;

/// Most size classes placement distinguishes.
pub const MAX_CLASSES: usize = 8;
/// The class of a request that names no servable file (it is answered with an error).
pub const UNCLASSED: u8 = u8::MAX;

/// What placement is told at start: the size classes (`edges[c]` is the largest object
/// of class c; the last class has no bound) and the first fractions.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    pub edges: Vec<u64>,
    pub fractions: Vec<f64>,
}

impl Placement {
    pub fn classes(&self) -> usize {
        self.edges.len() + 1
    }

    /// The class of an object of `size` bytes.
    pub fn class_of(&self, size: u64) -> u8 {
        self.edges
            .iter()
            .position(|&e| size <= e)
            .unwrap_or(self.edges.len()) as u8
    }
}

/// Settings a watcher may change while the server runs (f64 values as bits).
#[derive(Debug, Default)]
pub struct Knobs {
    fractions: [AtomicU64; MAX_CLASSES],
    slowdown: AtomicU64,
}

impl Knobs {
    pub fn fraction(&self, class: usize) -> f64 {
        f64::from_bits(self.fractions[class].load(Ordering::Relaxed))
    }

    /// Class c's offload fraction from now on (clamped to [0, 1]; extra classes ignored).
    pub fn set_fractions(&self, fractions: &[f64]) {
        for (slot, f) in self.fractions.iter().zip(fractions) {
            slot.store(f.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
        }
    }

    pub fn slowdown(&self) -> f64 {
        f64::from_bits(self.slowdown.load(Ordering::Relaxed))
    }

    /// The engine's extra CPU per unit of its own work from its next turn on.
    pub fn set_slowdown(&self, factor: f64) {
        self.slowdown
            .store(factor.max(0.0).to_bits(), Ordering::Relaxed);
    }
}

/// The engine's decision for a new connection, at its first request.
pub struct Placer {
    config: Placement,
    /// The engine's own view of the document root, to learn each object's size.
    files: Files,
    /// Per class, the offload owed so far (in [0, 1)): a deterministic split that hits
    /// f_c exactly over any run of connections, without a random draw's scatter.
    credit: [f64; MAX_CLASSES],
}

impl Placer {
    pub fn new(config: Placement, files: Files) -> Placer {
        Placer {
            config,
            files,
            credit: [0.0; MAX_CLASSES],
        }
    }

    /// The class of the object `path` names, and whether the engine keeps the connection.
    /// Requests for no servable file go to the host, which answers the error.
    pub fn place(&mut self, path: &[u8], knobs: &Knobs) -> (u8, bool) {
        let Ok(file) = self.files.get(path) else {
            return (UNCLASSED, false);
        };
        let class = self.config.class_of(file.size);
        let credit = &mut self.credit[class as usize];
        *credit += knobs.fraction(class as usize);
        let keep = *credit >= 1.0;
        if keep {
            *credit -= 1.0;
        }
        (class, keep)
    }
}

/// Count, sum and sum of squares of durations, kept by one writer thread.
#[derive(Debug, Default)]
pub struct Moments {
    n: AtomicU64,
    sum: AtomicU64,
    sumsq: AtomicU64,
}

impl Moments {
    /// One more duration. Only its owner thread writes, so load-then-store is safe; a
    /// reader may see the count a moment before the sums, which a windowed estimate
    /// over thousands of requests does not notice.
    pub fn add(&self, seconds: f64) {
        let bump = |a: &AtomicU64, x: f64| {
            a.store(
                (f64::from_bits(a.load(Ordering::Relaxed)) + x).to_bits(),
                Ordering::Relaxed,
            )
        };
        self.n.fetch_add(1, Ordering::Relaxed);
        bump(&self.sum, seconds);
        bump(&self.sumsq, seconds * seconds);
    }

    fn document(&self) -> Sums {
        let f = |a: &AtomicU64| f64::from_bits(a.load(Ordering::Relaxed));
        Sums {
            n: self.n.load(Ordering::Relaxed),
            sum_s: f(&self.sum),
            sumsq_s2: f(&self.sumsq),
        }
    }
}

/// A reading of `Moments`, as the stats document shows it.
#[derive(Debug, Serialize)]
pub struct Sums {
    n: u64,
    sum_s: f64,
    sumsq_s2: f64,
}

/// The `placement` section of the stats document: the class edges, and per path one
/// `Sums` per class.
#[derive(Debug, Serialize)]
pub struct Document {
    edges: Vec<u64>,
    host: Vec<Sums>,
    offloaded_host: Vec<Sums>,
    engine: Vec<Sums>,
    passed: Sums,
}

/// Per class: work per request where it was served (host alone: X_a + X_p; the host's
/// part of an offloaded one: X_a + X_o; the engine's part: X_c + X_q), and the engine's
/// work on the connections it passed to the host.
#[derive(Debug, Default)]
pub struct Accounts {
    /// 0 while placement is off.
    classes: AtomicUsize,
    edges: Mutex<Vec<u64>>,
    pub host: [Moments; MAX_CLASSES],
    pub offloaded_host: [Moments; MAX_CLASSES],
    pub engine: [Moments; MAX_CLASSES],
    pub passed: Moments,
}

impl Accounts {
    pub fn enable(&self, placement: &Placement) {
        *self.edges.lock().unwrap() = placement.edges.clone();
        self.classes.store(placement.classes(), Ordering::Relaxed);
    }

    /// The `placement` section of the stats document (None while placement is off).
    pub fn document(&self) -> Option<Document> {
        let n = self.classes.load(Ordering::Relaxed);
        let column = |m: &[Moments; MAX_CLASSES]| m[..n].iter().map(Moments::document).collect();
        (n > 0).then(|| Document {
            edges: self.edges.lock().unwrap().clone(),
            host: column(&self.host),
            offloaded_host: column(&self.offloaded_host),
            engine: column(&self.engine),
            passed: self.passed.document(),
        })
    }
}

/// Charges `seconds` of work to `class` in `moments`, if the request had a class.
pub fn charge(moments: &[Moments; MAX_CLASSES], class: u8, seconds: f64) {
    if let Some(m) = moments.get(class as usize) {
        m.add(seconds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_fall_into_classes_by_their_upper_edges() {
        let p = Placement {
            edges: vec![1000, 10_000],
            fractions: vec![0.0; 3],
        };
        let classes: Vec<u8> = [0, 1000, 1001, 10_000, 10_001, u64::MAX]
            .iter()
            .map(|&s| p.class_of(s))
            .collect();
        assert_eq!(classes, [0, 0, 1, 1, 2, 2]);
    }

    #[test]
    fn the_credit_split_offloads_exactly_the_fraction() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("small"), [0u8; 10]).unwrap();
        std::fs::write(dir.path().join("large"), [0u8; 5000]).unwrap();
        let root = crate::files::DocRoot::new(dir.path()).unwrap();
        let config = Placement {
            edges: vec![100],
            fractions: vec![0.0; 2],
        };
        let mut placer = Placer::new(config, Files::new(root, 16));
        let knobs = Knobs::default();
        knobs.set_fractions(&[0.25, 1.5]); // clamped to 1
        let kept = |placer: &mut Placer, path: &[u8], class: u8| {
            (0..1000)
                .filter(|_| {
                    let (c, keep) = placer.place(path, &knobs);
                    assert_eq!(c, class);
                    keep
                })
                .count()
        };
        assert_eq!(kept(&mut placer, b"/small", 0), 250);
        assert_eq!(kept(&mut placer, b"/large", 1), 1000);
        assert_eq!(placer.place(b"/missing", &knobs), (UNCLASSED, false));
    }

    #[test]
    fn moments_sum_what_they_are_given() {
        let m = Moments::default();
        for x in [1.0, 2.0, 3.0] {
            m.add(x);
        }
        assert_eq!(
            serde_json::to_value(m.document()).unwrap(),
            serde_json::json!({"n": 3, "sum_s": 6.0, "sumsq_s2": 14.0})
        );
    }
}
