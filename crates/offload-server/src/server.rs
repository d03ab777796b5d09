//! Starting and stopping a server: bind, start the threads of the chosen mode, write
//! the stats document on an interval and at exit.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::app::Handler;
use crate::config::{Config, Mode};
use crate::db::Db;
use crate::files::{DocRoot, Files, FILE_CAP};
use crate::stats::{self, Stats};
use crate::{cpu, engine, inline, uring, Control, StatsDocument};

/// Connections waiting in the kernel to be accepted (nginx's default). Beyond it the
/// kernel drops SYNs and clients retry later: under sustained overload that bounds the
/// queueing delay of the connections that do get in (511 / rate), where a deep backlog
/// would make every client wait past its timeout while the server still serves it.
const BACKLOG: i32 = 511;

/// Runs a server until `control.stop()`; returns the final stats document. Errors are
/// messages for the user (a bad root, a busy port, a core that does not exist).
pub fn serve(config: Config, control: Arc<Control>) -> Result<StatsDocument, String> {
    if config.cache.is_some() && !config.mode.traits().app_cache {
        return Err(
            "the cache runs on the host thread (inline mode, seed 001's set-up B) \
                    or on the engine (engine mode, set-up C); choose one of those modes"
                .into(),
        );
    }
    let root = DocRoot::new(&config.root).map_err(|e| {
        format!(
            "document root {}: {e}; give an existing directory",
            config.root.display()
        )
    })?;
    let listener =
        bind(config.addr).map_err(|e| format!("cannot listen on {}: {e}", config.addr))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let stats = Arc::new(Stats::new(config.mode, port));
    control.knobs.set_slowdown(config.engine_slowdown);
    if let Some(placement) = &config.placement {
        control.knobs.set_fractions(&placement.fractions);
        stats.placement.enable(placement);
    }
    control.watch(stats.clone());
    let db = config.db.as_ref().map(Db::open).transpose()?;
    let mut files = Files::new(root, FILE_CAP);
    let held = files.place(&config.memory, config.uncached)?;
    stats
        .app
        .memory_files
        .store(config.memory.len() as u64, Ordering::Relaxed);
    stats.app.memory_bytes.store(held, Ordering::Relaxed);
    let handler = Handler::new(
        files,
        config.sendfile_above,
        config.work.clone(),
        config.max_age,
        config.seed,
        stats.clone(),
        config.stats_endpoint,
        db,
        control.clone(),
    );
    let mut config = config;
    if config.mode == Mode::Uring {
        // The cores of this thread, which the host inherits.
        let allowed =
            cpu::allowed().map_err(|e| format!("cannot read this thread's cores: {e}"))?;
        config.engine_core = uring::sqpoll_core(&config, &allowed);
    }
    let host = {
        let (config, control, stats) = (config.clone(), control.clone(), stats.clone());
        std::thread::Builder::new()
            .name("offload-host".into())
            .spawn(move || -> io::Result<()> {
                if let Some(core) = config.host_core {
                    cpu::pin(core)
                        .map_err(|e| io::Error::other(format!("host core {core}: {e}")))?;
                }
                stats.register_thread("host", config.host_core);
                let served = match config.mode {
                    Mode::Inline => {
                        inline::run(&config, listener, handler, &control, stats.clone())
                    }
                    Mode::Engine | Mode::Handoff => {
                        engine::run(&config, listener, handler, control, stats.clone())
                    }
                    Mode::Uring => uring::run(&config, listener, handler, control, stats.clone()),
                };
                stats.sample_threads();
                served
            })
            .map_err(|e| e.to_string())?
    };
    control.set_port(port);
    let mut next = Instant::now();
    let mut next_sample = next + stats::SAMPLE_EVERY;
    while !host.is_finished() {
        if config.mode == Mode::Handoff && Instant::now() >= next_sample {
            next_sample += stats::SAMPLE_EVERY;
            stats.sample_handoff();
        }
        if let Some(path) = &config.stats_path {
            if Instant::now() >= next {
                next += config.stats_interval;
                if let Err(e) = stats::write_atomic(path, &stats.document(false)) {
                    stats.note_error(&e);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let served = host.join();
    let doc = stats.document(true);
    if let Some(path) = &config.stats_path {
        stats::write_atomic(path, &doc)
            .map_err(|e| format!("cannot write stats file {}: {e}", path.display()))?;
    }
    match served {
        Ok(Ok(())) => Ok(doc),
        Ok(Err(e)) => Err(format!("server failed: {e}")),
        Err(_) => Err("the host thread panicked".into()),
    }
}

/// Seconds the kernel holds a connection whose client has sent nothing yet before it
/// queues it for accept anyway (TCP_DEFER_ACCEPT).
const DEFER_ACCEPT_S: libc::c_int = 1;

/// Bytes a socket may hold written but not yet sent before it stops taking more
/// (TCP_NOTSENT_LOWAT). 4–32 KiB measured alike; 256 KiB lost most of the gain.
const NOTSENT_LOWAT: libc::c_int = 16 << 10;

/// A non-blocking listener with a backlog deep enough for bursts of connections.
///
/// Three options on the listener, which accepted sockets inherit:
/// - TCP_NODELAY, which spares a system call per connection. Small answers must not
///   wait for Nagle; a head followed by a file is sent with MSG_MORE, so they still
///   share segments.
/// - TCP_DEFER_ACCEPT: a connection is queued for accept when its first bytes arrive
///   (or after `DEFER_ACCEPT_S`), so accepting it and reading its request take one
///   wake-up, not two. On loopback the wake-up is paid by the client's core, which
///   limits one-request connections (Apache's default on Linux; nginx's `deferred`).
/// - TCP_NOTSENT_LOWAT: a large file is handed to the kernel as the peer's window opens,
///   not all at once. Otherwise a sendfile call queues megabytes, and the kernel sends
///   them when the peer's acknowledgements arrive, on the peer's core (on loopback, the
///   client's) in small pieces. For 5 MiB answers that cost 3.4 ms of CPU in all, and
///   with the low mark 1.6–2.0 ms (docs/testbed.md); the server's own part fell too.
fn bind(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    let fd = listener.as_raw_fd();
    // SAFETY: listen on our own bound socket; calling it again only resizes the backlog.
    if unsafe { libc::listen(fd, BACKLOG) } != 0 {
        return Err(io::Error::last_os_error());
    }
    listener.set_nonblocking(true)?;
    set_tcp_option(fd, libc::TCP_NODELAY, 1)?;
    set_tcp_option(fd, libc::TCP_DEFER_ACCEPT, DEFER_ACCEPT_S)?;
    set_tcp_option(fd, libc::TCP_NOTSENT_LOWAT, NOTSENT_LOWAT)?;
    Ok(listener)
}

fn set_tcp_option(
    fd: std::os::fd::RawFd,
    option: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: setsockopt reads `size` bytes from the live local `value`.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            option,
            (&value as *const libc::c_int).cast(),
            size,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn accepted_sockets_inherit_nodelay_and_the_low_mark_from_the_listener() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        client.write_all(b"G").unwrap();
        listener.set_nonblocking(false).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert!(accepted.nodelay().unwrap());
        let mut lowat: libc::c_int = 0;
        let mut size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `size` bytes into the live local `lowat`.
        let rc = unsafe {
            libc::getsockopt(
                accepted.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_NOTSENT_LOWAT,
                (&mut lowat as *mut libc::c_int).cast(),
                &mut size,
            )
        };
        assert_eq!((rc, lowat), (0, NOTSENT_LOWAT));
    }

    #[test]
    fn a_connection_is_accepted_when_its_first_bytes_arrive() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let early = listener.accept().map(|_| ()).map_err(|e| e.kind());
        assert_eq!(
            early,
            Err(io::ErrorKind::WouldBlock),
            "accepted before any bytes"
        );
        client.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        listener.set_nonblocking(false).unwrap();
        let (mut accepted, _) = listener.accept().unwrap();
        let mut first = [0u8; 4];
        accepted.read_exact(&mut first).unwrap();
        assert_eq!(&first, b"GET ");
    }
}
