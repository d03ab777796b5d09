//! The host's application: a parsed request in, an answer out. It burns the configured
//! application work X_a on the host thread, looks the file up, and builds the head; a
//! body up to `sendfile_above` bytes is copied into the answer (write path), a longer
//! one is left to sendfile (zero-copy path), as Apache does.
//!
//! As an origin behind a cache it says what may be cached: a static file carries its
//! `ETag` and `Cache-Control: max-age`, and a request whose `If-None-Match` names the
//! file's tag gets 304. A dynamic page (`?work=MICROSECONDS`) burns that much more CPU,
//! then sends the file at its path as the page, marked `no-store` unless the query says
//! `cacheable=1`. With `query=COUNT` it first fetches that many items from the database
//! tier ([`crate::db`]) and says what it got in `X-Db-Rows` and `X-Db-Digest`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use offload_sim::dist::Dist;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use rand::Rng;

use crate::conn::FileRange;
use crate::cpu;
use crate::db::Db;
use crate::files::Files;
use crate::http::{self, response, Dynamic, Head, Method, Status};
use crate::proto::{Body, Reply};
use crate::stats::Stats;
use crate::Control;

/// Path of the stats document when `stats_endpoint` is on.
pub const STATS_PATH: &[u8] = b"/.offload/stats";
/// Application work is burned in slices this long, so a stop need not wait for it.
const WORK_SLICE: Duration = Duration::from_millis(10);

pub struct Handler {
    files: Files,
    sendfile_above: u64,
    work: Option<Dist>,
    /// `Cache-Control: max-age` of static files and cacheable pages, seconds.
    max_age: u32,
    rng: Xoshiro256PlusPlus,
    date: http::Date,
    /// The cache headers of the answer being built.
    extra: Vec<u8>,
    stats: Arc<Stats>,
    stats_endpoint: bool,
    /// The database tier of dynamic pages that ask for items.
    db: Option<Db>,
    /// Its stop ends work in progress.
    control: Arc<Control>,
}

impl Handler {
    #[allow(clippy::too_many_arguments)] // one per setting of the application
    pub fn new(
        files: Files,
        sendfile_above: u64,
        work: Option<Dist>,
        max_age: u32,
        seed: u64,
        stats: Arc<Stats>,
        stats_endpoint: bool,
        db: Option<Db>,
        control: Arc<Control>,
    ) -> Handler {
        Handler {
            files,
            sendfile_above,
            work,
            max_age,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            date: http::Date::new(),
            extra: Vec::new(),
            stats,
            stats_endpoint,
            db,
            control,
        }
    }

    /// The answer to one request, built in `buf` (an empty recycled buffer).
    pub fn respond(&mut self, head: Head, path: &[u8], mut buf: Vec<u8>) -> Reply {
        let page = head.dynamic.map_or(0.0, |d| f64::from(d.work_us) * 1e-6);
        let work = self.work.as_ref().map_or(0.0, |w| w.sample(&mut self.rng)) + page;
        if work > 0.0 {
            let control = &self.control;
            let used =
                cpu::burn_in_slices(work, WORK_SLICE.as_secs_f64(), || !control.is_stopped());
            let app = &self.stats.app;
            app.work_ns
                .fetch_add((used * 1e9) as u64, Ordering::Relaxed);
        }
        self.stats.app.requests.fetch_add(1, Ordering::Relaxed);
        buf.clear();
        let head_only = head.method == Method::Head;
        if self.stats_endpoint && path == STATS_PATH {
            let body = serde_json::to_vec(&self.stats.document(false)).unwrap_or_default();
            return self.whole(buf, head, "application/json", &body);
        }
        let file = match self.files.get(path) {
            Ok(file) => file,
            Err(status) => return self.error(buf, head, status),
        };
        self.extra.clear();
        if let Some(d) = head.dynamic.filter(|d| d.queries > 0) {
            if let Err(status) = self.query(d.queries, d.key) {
                return self.error(buf, head, status);
            }
        }
        let status = match head.dynamic {
            None => {
                response::etag(&mut self.extra, file.etag);
                response::max_age(&mut self.extra, self.max_age.into());
                if head.if_none_match == Some(file.etag) {
                    Status::NOT_MODIFIED
                } else {
                    Status::OK
                }
            }
            Some(Dynamic {
                cacheable: true, ..
            }) => {
                response::max_age(&mut self.extra, self.max_age.into());
                Status::OK
            }
            Some(Dynamic {
                cacheable: false, ..
            }) => {
                self.extra.extend_from_slice(b"Cache-Control: no-store\r\n");
                Status::OK
            }
        };
        let date = self.date.now();
        let content_type = response::content_type(path);
        response::head_with(
            &mut buf,
            status,
            content_type,
            file.size,
            head.keep_alive,
            date,
            &self.extra,
        );
        if status == Status::NOT_MODIFIED {
            self.stats.count_status(status);
            return Reply {
                bytes: buf,
                body: Body::None,
                keep_alive: head.keep_alive,
            };
        }
        let mut reply = Reply {
            bytes: buf,
            body: Body::None,
            keep_alive: head.keep_alive,
        };
        if let Some(body) = self.files.in_memory(path) {
            self.stats.app.memory_hits.fetch_add(1, Ordering::Relaxed);
            if !head_only {
                reply.body = Body::Shared(body);
            }
            self.stats.count_status(Status::OK);
            return reply;
        }
        if !head_only {
            self.files.before_disk_read(&file);
        }
        if !head_only && file.size > self.sendfile_above {
            reply.body = Body::File(FileRange {
                file: file.file.clone(),
                offset: 0,
                len: file.size,
            });
        } else if !head_only && file.read_into(&mut reply.bytes).is_err() {
            // The head is not sent yet, so the client can still get a clean 500.
            return self.error(reply.bytes, head, Status::INTERNAL_ERROR);
        }
        self.stats.count_status(Status::OK);
        reply
    }

    /// The page's items from the database, told in the answer's extra headers. Without
    /// a database the server cannot make the page (503); a failed query is a 500.
    fn query(&mut self, count: u32, key: Option<u64>) -> Result<(), Status> {
        let Some(db) = self.db.as_mut() else {
            return Err(Status::UNAVAILABLE);
        };
        let key = key.unwrap_or_else(|| self.rng.random_range(0..db.rows()));
        let page = db.page(key, count).map_err(|e| {
            self.stats.note_error(&format!("database: {e}"));
            Status::INTERNAL_ERROR
        })?;
        let app = &self.stats.app;
        app.db_queries
            .fetch_add(u64::from(count), Ordering::Relaxed);
        app.db_ns.fetch_add(page.elapsed_ns, Ordering::Relaxed);
        self.extra.extend_from_slice(
            format!(
                "X-Db-Rows: {}\r\nX-Db-Digest: {:016x}\r\n",
                page.rows, page.digest
            )
            .as_bytes(),
        );
        Ok(())
    }

    fn whole(&mut self, mut buf: Vec<u8>, head: Head, content_type: &str, body: &[u8]) -> Reply {
        self.stats.count_status(Status::OK);
        let date = self.date.now();
        response::head(
            &mut buf,
            Status::OK,
            content_type,
            body.len() as u64,
            head.keep_alive,
            date,
        );
        if head.method == Method::Get {
            buf.extend_from_slice(body);
        }
        Reply {
            bytes: buf,
            body: Body::None,
            keep_alive: head.keep_alive,
        }
    }

    fn error(&mut self, mut buf: Vec<u8>, head: Head, status: Status) -> Reply {
        self.stats.count_status(status);
        // A failed request that was well framed keeps its connection, except after a
        // server-side failure, when the connection's state is in doubt.
        let keep_alive = head.keep_alive && status != Status::INTERNAL_ERROR;
        buf.clear();
        let head_only = head.method == Method::Head;
        response::error(&mut buf, status, keep_alive, head_only, self.date.now());
        Reply {
            bytes: buf,
            body: Body::None,
            keep_alive,
        }
    }
}
