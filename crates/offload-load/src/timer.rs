//! The run's clock and a precise wake-up.
//!
//! `epoll_wait` (and so mio's `Poll::poll`) takes its timeout in whole milliseconds,
//! rounded up: waiting on it alone, an open-loop request would go out up to 1 ms late.
//! A timerfd in the same poll set wakes the loop at a nanosecond deadline instead
//! (within the kernel's timer slack, ~50 µs).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

/// Nanoseconds since the start of the run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    start: Instant,
}

impl Clock {
    pub(crate) fn new(start: Instant) -> Clock {
        Clock { start }
    }

    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// A one-shot monotonic timerfd, armed for the loop's next deadline.
pub(crate) struct Timer {
    fd: OwnedFd,
    /// The deadline it is armed for (run ns), `u64::MAX` when disarmed or fired.
    armed: u64,
}

impl Timer {
    pub(crate) fn new(registry: &Registry, token: Token) -> io::Result<Timer> {
        // SAFETY: plain syscall; the result is checked before the fd is owned.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        registry.register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)?;
        Ok(Timer {
            fd,
            armed: u64::MAX,
        })
    }

    /// Wakes the poll at `deadline` (run ns; `now` is the current run time). Re-arms
    /// only when the deadline changed, so a loop that keeps the same deadline makes no
    /// syscall.
    pub(crate) fn arm(&mut self, deadline: u64, now: u64) -> io::Result<()> {
        if deadline == self.armed {
            return Ok(());
        }
        // Relative: never zero, which would disarm instead.
        let wait = Duration::from_nanos(deadline.saturating_sub(now).max(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: wait.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: valid fd and a valid itimerspec; the old value is not asked for.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed = deadline;
        Ok(())
    }

    /// The timer's event came: clear its count, so that the next expiry is a new edge.
    pub(crate) fn fired(&mut self) {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into an 8-byte buffer; EAGAIN is harmless.
        unsafe {
            libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), count.len());
        }
        self.armed = u64::MAX;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll};

    #[test]
    fn wakes_at_the_deadline_not_the_next_millisecond() {
        let mut poll = Poll::new().unwrap();
        let mut timer = Timer::new(poll.registry(), Token(0)).unwrap();
        let clock = Clock::new(Instant::now());
        let mut events = Events::with_capacity(4);
        let mut late = Vec::new();
        for _ in 0..20 {
            let deadline = clock.now() + 300_000; // 0.3 ms
            timer.arm(deadline, clock.now()).unwrap();
            poll.poll(&mut events, Some(Duration::from_secs(1)))
                .unwrap();
            assert!(events.iter().any(|e| e.token() == Token(0)));
            timer.fired();
            late.push(clock.now() as i64 - deadline as i64);
        }
        late.sort();
        assert!(late[0] >= 0, "woke early: {late:?}");
        assert!(late[10] < 500_000, "median lateness {} ns", late[10]);
    }
}
