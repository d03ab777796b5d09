//! The reverse-proxy object cache of seed 001: in front of the application, it answers
//! hits itself and sends misses on to the application (the origin), storing what the
//! origin lets it store on the way back. On the engine thread it is seed 001's set-up
//! C (the proxy on the network processor); on the host thread, set-up B.
//!
//! - `store`: entries under a byte budget, with LRU, LFU or GDSF replacement;
//! - `proxy`: the HTTP rules around the store.

mod proxy;
mod store;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;

pub(crate) use proxy::{Lookup, Proxy, Ticket};
pub use store::Policy;

/// How the cache is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// The byte budget: each entry is charged its key's and its body's length.
    pub capacity: u64,
    pub policy: Policy,
    /// Larger bodies are never stored.
    pub max_object: u64,
}

/// What the cache counts (the `cache` section of the stats document). Written by the
/// one thread that runs the cache.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Counts {
    /// The configuration, once a cache runs (None: the section is left out).
    config: Mutex<Option<CacheConfig>>,
    /// Answered from a fresh entry, and from a stale one the origin confirmed (304).
    pub hits: AtomicU64,
    pub revalidated: AtomicU64,
    /// Answered by the origin (including every request that cannot be cached).
    pub misses: AtomicU64,
    /// Body bytes answered from the cache.
    pub bytes: AtomicU64,
    pub admitted: AtomicU64,
    pub evicted: AtomicU64,
    pub refused: Refused,
    /// Gauges: entries stored and the budget they use.
    pub entries: AtomicU64,
    pub used: AtomicU64,
}

/// Origin answers to GET the cache did not store, by reason.
#[derive(Debug, Default)]
pub struct Refused {
    /// Larger than `max_object` or the whole budget.
    pub too_large: AtomicU64,
    /// `Cache-Control: no-store` or `private`.
    pub uncacheable: AtomicU64,
    /// A status other than 200.
    pub status: AtomicU64,
    /// Neither a max-age nor an ETag: it could never be used or checked.
    pub unvalidated: AtomicU64,
    /// No Content-Length, or a body that does not match it.
    pub unframed: AtomicU64,
}

impl Counts {
    pub fn enable(&self, config: &CacheConfig) {
        *self.config.lock().unwrap() = Some(*config);
    }

    /// The `cache` section of the stats document (None when no cache runs).
    pub fn document(&self) -> Option<Document> {
        let config = (*self.config.lock().unwrap())?;
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let served = n(&self.hits) + n(&self.revalidated);
        let lookups = served + n(&self.misses);
        let r = &self.refused;
        Some(Document {
            policy: config.policy.name(),
            capacity_bytes: config.capacity,
            max_object_bytes: config.max_object,
            entries: n(&self.entries),
            used_bytes: n(&self.used),
            hits: n(&self.hits),
            revalidated: n(&self.revalidated),
            misses: n(&self.misses),
            hit_rate: (lookups > 0).then(|| served as f64 / lookups as f64),
            bytes_from_cache: n(&self.bytes),
            admitted: n(&self.admitted),
            evictions: n(&self.evicted),
            refused: RefusedDocument {
                too_large: n(&r.too_large),
                uncacheable: n(&r.uncacheable),
                status: n(&r.status),
                unvalidated: n(&r.unvalidated),
                unframed: n(&r.unframed),
            },
        })
    }
}

/// The `cache` section of the stats document; `hit_rate` is None before any lookup.
#[derive(Debug, Serialize)]
pub struct Document {
    policy: &'static str,
    capacity_bytes: u64,
    max_object_bytes: u64,
    entries: u64,
    used_bytes: u64,
    hits: u64,
    revalidated: u64,
    misses: u64,
    hit_rate: Option<f64>,
    bytes_from_cache: u64,
    admitted: u64,
    evictions: u64,
    refused: RefusedDocument,
}

/// `Refused` as the cache section shows it.
#[derive(Debug, Serialize)]
pub struct RefusedDocument {
    too_large: u64,
    uncacheable: u64,
    status: u64,
    unvalidated: u64,
    unframed: u64,
}
