//! `inline` mode: the host thread makes its own socket calls and answers each request
//! in its socket loop, the baseline every offload mode is measured against. The engine's
//! takeover falls back to this loop too.

use std::io;
use std::sync::Arc;

use mio::net::TcpListener;

use crate::app::Handler;
use crate::cache::{Lookup, Proxy};
use crate::config::Config;
use crate::http::Head;
use crate::pool::Pool;
use crate::proto::{ConnId, Dispatch, Proto, Reply, TICK};
use crate::stats::Stats;
use crate::Control;

/// Serves `listener` on the calling (host) thread until stop.
pub fn run(
    config: &Config,
    listener: std::net::TcpListener,
    handler: Handler,
    control: &Control,
    stats: Arc<Stats>,
) -> io::Result<()> {
    let listener = Some(TcpListener::from_std(listener));
    let mut proto = Proto::new(listener, config.limits.clone(), stats.clone(), None)?;
    proto.counts_wakeups = true;
    let proxy = config.cache.map(|c| Proxy::new(&c, stats));
    let mut app = Inline {
        origin: handler,
        proxy,
    };
    serve(proto, &mut app, control)
}

/// `inline`: the host answers each request itself, in the socket loop; with a cache
/// in front of the application, seed 001's set-up B (both on the host thread).
pub(crate) struct Inline {
    pub origin: Handler,
    pub proxy: Option<Proxy>,
}

impl Dispatch for Inline {
    fn request(
        &mut self,
        _: ConnId,
        _: u8,
        head: Head,
        path: &mut Vec<u8>,
        pool: &mut Pool,
    ) -> Option<Reply> {
        let Some(proxy) = &mut self.proxy else {
            return Some(self.origin.respond(head, path, pool.take()));
        };
        Some(match proxy.lookup(head, path, pool) {
            Lookup::Hit(reply) => reply,
            Lookup::Forward(head, ticket) => {
                let origin = self.origin.respond(head, path, pool.take());
                proxy.complete(ticket, origin, pool)
            }
        })
    }
}

/// The host's own socket loop until stop (also what it falls back to when an engine fails).
pub(crate) fn serve<D: Dispatch>(
    mut proto: Proto,
    app: &mut D,
    control: &Control,
) -> io::Result<()> {
    while !control.is_stopped() {
        proto.turn(app, TICK)?;
    }
    Ok(())
}
