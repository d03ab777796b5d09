//! CPU time: reading a thread's CPU clock, pinning a thread to a core, and burning a
//! given amount of CPU (application work, a slower engine).

use std::io;

/// CPU seconds the calling thread has run (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_seconds() -> f64 {
    clock_seconds(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or_default()
}

fn clock_seconds(clock: libc::clockid_t) -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the local timespec.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then_some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

/// Spins until the calling thread has used `seconds` more CPU time. Measured on the
/// thread's own clock, so time spent preempted does not count as work done. Returns
/// the CPU time used: `seconds`, plus one clock read, plus any interrupt handled on
/// this thread meanwhile (the kernel charges it to the thread's clock).
pub fn burn(seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    let start = thread_seconds();
    let until = start + seconds;
    loop {
        let now = thread_seconds();
        if now >= until {
            return now - start;
        }
        std::hint::spin_loop();
    }
}

/// Burns `seconds` of CPU in slices of at most `slice`, asking `go_on` after each
/// whether to continue: long work stays responsive to a heartbeat or a stop. Returns
/// the CPU time used.
pub fn burn_in_slices(seconds: f64, slice: f64, mut go_on: impl FnMut() -> bool) -> f64 {
    let mut used = 0.0;
    while used < seconds {
        used += burn((seconds - used).min(slice));
        if !go_on() {
            break;
        }
    }
    used
}

/// Spins until the calling thread's CPU clock reads `until`, in slices of at most
/// `slice` with `go_on` asked after each (false: stop early), and returns the clock
/// then. It spins on the wall clock (no system call) for as long as the CPU time still
/// owed and reads the thread's clock only between spins: a thread's CPU clock is a
/// system call (about 1 us on this VM), and a spin made of them ran the engine's own
/// work after each burn about 1.5 times slower (debug build, per-operation slowdown).
/// Time the thread is preempted does not count, so it spins again for what is left.
pub fn burn_until(until: f64, slice: f64, mut go_on: impl FnMut() -> bool) -> f64 {
    let mut now = thread_seconds();
    while now < until {
        let spin = std::time::Duration::from_secs_f64((until - now).min(slice));
        let start = std::time::Instant::now();
        while start.elapsed() < spin {
            std::hint::spin_loop();
        }
        now = thread_seconds();
        if !go_on() {
            break;
        }
    }
    now
}

/// A thread's CPU clock that other threads can read while the thread lives.
#[derive(Clone, Copy, Debug)]
pub struct ThreadClock {
    clock: libc::clockid_t,
    /// Kernel thread id, to find the thread under /proc.
    pub tid: i32,
}

impl ThreadClock {
    /// The calling thread's clock.
    pub fn current() -> io::Result<ThreadClock> {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: pthread_self is always valid for the calling thread; the id goes
        // into a local.
        let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        // SAFETY: gettime has no preconditions.
        let tid = unsafe { libc::gettid() };
        Ok(ThreadClock { clock, tid })
    }

    /// CPU seconds so far, or None once the thread has exited.
    pub fn seconds(&self) -> Option<f64> {
        clock_seconds(self.clock)
    }
}

/// CPU seconds of another thread of this process by its kernel id, from
/// `/proc/self/task/TID/schedstat` (nanoseconds on the CPU). This reads kernel threads
/// such as io_uring's SQPOLL thread, whose clock we cannot get otherwise.
pub fn task_seconds(tid: i32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    let ns: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns * 1e-9)
}

/// Whether another thread of this process is running or waiting for a CPU (state `R`
/// in `/proc/self/task/TID/stat`), rather than asleep.
pub fn task_runnable(tid: i32) -> Option<bool> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    // The state follows the command name, which may itself hold ") ".
    let state = text[text.rfind(')')? + 1..].split_whitespace().next()?;
    Some(state == "R")
}

/// Pins the calling thread to one core.
pub fn pin(core: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET indexes inside it after the bound check;
    // sched_setaffinity(0, ..) applies to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if core >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "core out of range",
            ));
        }
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The cores the calling thread may run on, in order.
pub fn allowed() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity(0, ..) fills it for the calling
    // thread, and CPU_ISSET reads inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        let bits = 8 * std::mem::size_of::<libc::cpu_set_t>();
        Ok((0..bits).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burn_uses_at_least_the_cpu_time_asked() {
        let before = thread_seconds();
        burn(0.02);
        let used = thread_seconds() - before;
        // The clock check itself costs a little, so the overshoot is small but positive.
        assert!((0.02..0.03).contains(&used), "burned {used} s for 0.02 s");
    }

    #[test]
    fn a_thread_clock_reads_the_same_clock_as_the_thread() {
        let clock = ThreadClock::current().unwrap();
        burn(0.005);
        let seen = clock.seconds().unwrap();
        let own = thread_seconds();
        assert!(seen <= own && own - seen < 0.005, "{seen} vs {own}");
        let sched = task_seconds(clock.tid).unwrap();
        assert!(
            (sched - own).abs() < 0.01,
            "schedstat {sched} vs clock {own}"
        );
    }
}
