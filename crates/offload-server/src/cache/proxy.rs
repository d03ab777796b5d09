//! The HTTP rules of the reverse proxy, the same on the engine (set-up C) and on the
//! host thread (set-up B):
//!
//! - Requests are keyed by path, plus the dynamic-page query when there is one.
//! - A fresh entry answers the request: 200 with the stored body, or 304 when the
//!   client's `If-None-Match` names the entry's tag.
//! - A stale entry with a tag is revalidated: the request goes to the origin with
//!   `If-None-Match`. A 304 refreshes the entry, which then answers; a 200 replaces it.
//! - Everything else goes to the origin without the client's `If-None-Match`, so the
//!   answer is whole and can be stored.
//! - A GET answer is stored when it is a 200 with a Content-Length no longer than
//!   `max_object`, its `Cache-Control` has neither `no-store` nor `private`, and it can
//!   be checked later (a `max-age` above zero or an `ETag`). Freshness is `max-age`
//!   (0 when absent: every use is revalidated).
//!
//! The origin is trusted to send one well-formed head; an answer this module cannot
//! parse is passed on and not stored.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::store::{Inserted, Store};
use super::CacheConfig;
use crate::files::read_range;
use crate::http::{self, response, Head, Method, Status};
use crate::pool::Pool;
use crate::proto::{Body, Reply};
use crate::stats::Stats;

/// Header fields read from an origin's answer at most.
const ORIGIN_HEADERS: usize = 32;

#[derive(Clone)]
struct Object {
    body: Arc<[u8]>,
    content_type: Box<str>,
    etag: Option<u64>,
    /// The origin's max-age, replayed to clients.
    max_age: u64,
    stored: Instant,
}

impl Object {
    fn fresh(&self, now: Instant) -> bool {
        now.duration_since(self.stored) < Duration::from_secs(self.max_age)
    }
}

pub struct Proxy {
    store: Store<Object>,
    max_object: u64,
    key: Vec<u8>,
    /// Header lines of the answer being built.
    extra: Vec<u8>,
    date: http::Date,
    stats: Arc<Stats>,
}

/// What to do with a request.
pub enum Lookup {
    /// Send this answer; the origin is not asked.
    Hit(Reply),
    /// Ask the origin with this head, then give its answer to [`Proxy::complete`] with
    /// the ticket.
    Forward(Head, Ticket),
}

/// A request gone to the origin.
pub struct Ticket {
    /// The client's own request.
    client: Head,
    /// Where the answer may be stored (None: it may not, e.g. for HEAD).
    key: Option<Box<[u8]>>,
    /// The stale entry being revalidated: it answers if the origin says 304, even if
    /// it has been evicted meanwhile.
    stale: Option<Object>,
}

/// What the proxy reads from an origin's head.
struct OriginHead {
    status: u16,
    head_len: usize,
    content_length: Option<u64>,
    content_type: Box<str>,
    etag: Option<u64>,
    no_store: bool,
    max_age: u64,
}

impl Proxy {
    pub fn new(config: &CacheConfig, stats: Arc<Stats>) -> Proxy {
        stats.cache.enable(config);
        Proxy {
            store: Store::new(config.policy, config.capacity),
            max_object: config.max_object,
            key: Vec::new(),
            extra: Vec::new(),
            date: http::Date::new(),
            stats,
        }
    }

    /// A request for `path`: answered here, or to be forwarded.
    pub fn lookup(&mut self, head: Head, path: &[u8], pool: &mut Pool) -> Lookup {
        self.key.clear();
        self.key.extend_from_slice(path);
        if let Some(d) = head.dynamic {
            // The origin's page depends on these, so they are part of the name.
            self.key.extend_from_slice(b"?work=");
            response::push_u64(&mut self.key, d.work_us.into());
            self.key.extend_from_slice(b"&cacheable=");
            response::push_u64(&mut self.key, d.cacheable.into());
        }
        let counts = &self.stats.cache;
        let stale = match self.store.get(&self.key) {
            Some(object) if object.fresh(Instant::now()) => {
                counts.hits.fetch_add(1, Ordering::Relaxed);
                let (extra, date) = (&mut self.extra, &mut self.date);
                return Lookup::Hit(answer(object, head, pool, extra, date, &self.stats));
            }
            Some(object) if object.etag.is_some() => Some(object.clone()),
            _ => None,
        };
        if stale.is_none() {
            counts.misses.fetch_add(1, Ordering::Relaxed);
        }
        let forwarded = Head {
            if_none_match: stale.as_ref().and_then(|s| s.etag),
            ..head
        };
        let ticket = Ticket {
            client: head,
            key: (head.method == Method::Get).then(|| self.key.as_slice().into()),
            stale,
        };
        Lookup::Forward(forwarded, ticket)
    }

    /// The answer for the client, from the origin's answer to a forwarded request.
    pub fn complete(&mut self, ticket: Ticket, origin: Reply, pool: &mut Pool) -> Reply {
        let parsed = parse_origin(&origin.bytes);
        let counts = &self.stats.cache;
        if let Some(mut object) = ticket.stale {
            if parsed
                .as_ref()
                .is_some_and(|p| p.status == Status::NOT_MODIFIED.0)
            {
                counts.revalidated.fetch_add(1, Ordering::Relaxed);
                object.stored = Instant::now();
                let (extra, date) = (&mut self.extra, &mut self.date);
                let reply = answer(&object, ticket.client, pool, extra, date, &self.stats);
                if let Some(key) = &ticket.key {
                    self.store_object(key, object);
                }
                pool.give(origin.bytes);
                return reply;
            }
            counts.misses.fetch_add(1, Ordering::Relaxed);
        }
        if let (Some(key), Some(parsed)) = (&ticket.key, &parsed) {
            self.admit(key, parsed, &origin);
        }
        origin
    }

    /// Stores the origin's answer under `key` if the rules allow.
    fn admit(&mut self, key: &[u8], parsed: &OriginHead, origin: &Reply) {
        let stats = Arc::clone(&self.stats); // counted after the store changes
        let refused = &stats.cache.refused;
        let refuse = |counter: &std::sync::atomic::AtomicU64| {
            counter.fetch_add(1, Ordering::Relaxed);
        };
        let Some(length) = parsed.content_length else {
            return refuse(&refused.unframed);
        };
        if parsed.status != Status::OK.0 {
            return refuse(&refused.status);
        }
        if parsed.no_store {
            return refuse(&refused.uncacheable);
        }
        if parsed.max_age == 0 && parsed.etag.is_none() {
            return refuse(&refused.unvalidated);
        }
        if length > self.max_object || key.len() as u64 + length > self.store.capacity() {
            return refuse(&refused.too_large);
        }
        let Some(body) = body_of(parsed, origin) else {
            return refuse(&refused.unframed);
        };
        if body.len() as u64 != length {
            return refuse(&refused.unframed);
        }
        let object = Object {
            body: body.into(),
            content_type: parsed.content_type.clone(),
            etag: parsed.etag,
            max_age: parsed.max_age,
            stored: Instant::now(),
        };
        if self.store_object(key, object) {
            self.stats.cache.admitted.fetch_add(1, Ordering::Relaxed);
        } else {
            refuse(&refused.too_large);
        }
    }

    /// Stores (or refreshes) `object` under `key`; false if it cannot fit at all.
    fn store_object(&mut self, key: &[u8], object: Object) -> bool {
        let counts = &self.stats.cache;
        let size = key.len() as u64 + object.body.len() as u64;
        let stored = match self.store.insert(key, size, object) {
            Inserted::Stored { evicted } => {
                counts.evicted.fetch_add(evicted, Ordering::Relaxed);
                true
            }
            Inserted::TooLarge => false,
        };
        counts
            .entries
            .store(self.store.len() as u64, Ordering::Relaxed);
        counts.used.store(self.store.used(), Ordering::Relaxed);
        stored
    }
}

/// The stored answer to `client`: 304 if its `If-None-Match` names the entry, else 200
/// with the body (none for HEAD). The body is shared with the store, not copied. Not
/// counted in the statuses, which are the application's: the cache counts its own.
fn answer(
    object: &Object,
    client: Head,
    pool: &mut Pool,
    extra: &mut Vec<u8>,
    date: &mut http::Date,
    stats: &Stats,
) -> Reply {
    let not_modified = object.etag.is_some() && client.if_none_match == object.etag;
    extra.clear();
    if let Some(tag) = object.etag {
        response::etag(extra, tag);
    }
    response::max_age(extra, object.max_age);
    extra.extend_from_slice(b"Age: ");
    response::push_u64(extra, object.stored.elapsed().as_secs());
    extra.extend_from_slice(b"\r\n");
    let status = if not_modified {
        Status::NOT_MODIFIED
    } else {
        Status::OK
    };
    let mut bytes = pool.take();
    response::head_with(
        &mut bytes,
        status,
        &object.content_type,
        object.body.len() as u64,
        client.keep_alive,
        date.now(),
        extra,
    );
    let body = if status == Status::OK && client.method == Method::Get {
        let sent = object.body.len() as u64;
        stats.cache.bytes.fetch_add(sent, Ordering::Relaxed);
        Body::Shared(object.body.clone())
    } else {
        Body::None
    };
    Reply {
        bytes,
        body,
        keep_alive: client.keep_alive,
    }
}

/// The body of an origin's answer: after the head in its bytes, or in its file range.
fn body_of(parsed: &OriginHead, origin: &Reply) -> Option<Vec<u8>> {
    let inline = origin.bytes.get(parsed.head_len..)?;
    match &origin.body {
        Body::None => Some(inline.to_vec()),
        Body::File(range) => {
            let mut body = inline.to_vec();
            read_range(range.fd(), range.offset, range.len, &mut body).ok()?;
            Some(body)
        }
        Body::Shared(shared) => Some([inline, shared].concat()),
    }
}

/// The origin's head, or None if it is not one.
fn parse_origin(bytes: &[u8]) -> Option<OriginHead> {
    let mut headers = [httparse::EMPTY_HEADER; ORIGIN_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let httparse::Status::Complete(head_len) = response.parse(bytes).ok()? else {
        return None;
    };
    let mut head = OriginHead {
        status: response.code?,
        head_len,
        content_length: None,
        content_type: "application/octet-stream".into(),
        etag: None,
        no_store: false,
        max_age: 0,
    };
    for h in response.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            head.content_length = std::str::from_utf8(h.value).ok()?.parse().ok();
        } else if name.eq_ignore_ascii_case(b"content-type") {
            head.content_type = std::str::from_utf8(h.value).ok()?.into();
        } else if name.eq_ignore_ascii_case(b"etag") {
            head.etag = http::request::our_tag(h.value);
        } else if name.eq_ignore_ascii_case(b"cache-control") {
            for directive in h.value.split(|&b| b == b',') {
                let directive = directive.trim_ascii();
                if directive.eq_ignore_ascii_case(b"no-store")
                    || directive.eq_ignore_ascii_case(b"private")
                {
                    head.no_store = true;
                } else if let Some(secs) = directive.strip_prefix(b"max-age=") {
                    head.max_age = std::str::from_utf8(secs).ok()?.parse().unwrap_or(0);
                }
            }
        }
    }
    Some(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Policy;

    fn origin(head: &str, body: &[u8]) -> Reply {
        let mut bytes = head.replace('\n', "\r\n").into_bytes();
        bytes.extend_from_slice(b"\r\n");
        bytes.extend_from_slice(body);
        Reply {
            bytes,
            body: Body::None,
            keep_alive: true,
        }
    }

    fn get(path: &str) -> (Head, Vec<u8>) {
        let mut p = Vec::new();
        let text = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
        match http::parse(text.as_bytes(), &Default::default(), &mut p) {
            http::Parsed::Done(head) => (head, p),
            other => panic!("{other:?}"),
        }
    }

    /// Two GETs of /x through a fresh proxy whose origin answers `head` and 5 bytes.
    fn twice(head: &str) -> (Proxy, Arc<Stats>) {
        let stats = Arc::new(Stats::new(crate::Mode::Engine, 0));
        let config = CacheConfig {
            capacity: 1 << 20,
            policy: Policy::Lru,
            max_object: 1 << 10,
        };
        let mut proxy = Proxy::new(&config, stats.clone());
        let mut pool = Pool::default();
        for _ in 0..2 {
            let (head_in, path) = get("/x");
            match proxy.lookup(head_in, &path, &mut pool) {
                Lookup::Hit(_) => {}
                Lookup::Forward(_, ticket) => {
                    let body = vec![7u8; 5];
                    proxy.complete(ticket, origin(head, &body), &mut pool);
                }
            }
        }
        (proxy, stats)
    }

    /// The cache section as the JSON its readers see.
    fn section(stats: &Stats) -> serde_json::Value {
        serde_json::to_value(stats.cache.document().unwrap()).unwrap()
    }

    fn count(stats: &Stats, name: &str) -> u64 {
        section(stats)[name].as_u64().unwrap()
    }

    fn refused(stats: &Stats, why: &str) -> u64 {
        section(stats)["refused"][why].as_u64().unwrap()
    }

    #[test]
    fn private_and_no_store_answers_are_never_stored() {
        for cc in ["private", "no-store", "max-age=60, private", "No-Store"] {
            let head = format!("HTTP/1.1 200 OK\nContent-Length: 5\nCache-Control: {cc}\n");
            let (_, stats) = twice(&head);
            assert_eq!(count(&stats, "hits"), 0, "{cc}");
            assert_eq!(refused(&stats, "uncacheable"), 2, "{cc}");
        }
    }

    #[test]
    fn the_rules_refuse_what_cannot_be_reused_and_store_the_rest() {
        let cases = [
            ("HTTP/1.1 200 OK\nCache-Control: max-age=60\n", "unframed"),
            (
                "HTTP/1.1 404 Not Found\nContent-Length: 5\nCache-Control: max-age=60\n",
                "status",
            ),
            ("HTTP/1.1 200 OK\nContent-Length: 5\n", "unvalidated"),
            (
                "HTTP/1.1 200 OK\nContent-Length: 4\nCache-Control: max-age=60\n",
                "unframed",
            ),
            (
                "HTTP/1.1 200 OK\nContent-Length: 5\nCache-Control: max-age=60\n",
                "",
            ),
        ];
        for (head, why) in cases {
            let (_, stats) = twice(head);
            if why.is_empty() {
                assert_eq!((count(&stats, "hits"), count(&stats, "admitted")), (1, 1));
            } else {
                assert_eq!(
                    (count(&stats, "hits"), refused(&stats, why)),
                    (0, 2),
                    "{head}"
                );
            }
        }
        let big = "HTTP/1.1 200 OK\nContent-Length: 5000\nCache-Control: max-age=60\n";
        assert_eq!(refused(&twice(big).1, "too_large"), 2);
    }
}
