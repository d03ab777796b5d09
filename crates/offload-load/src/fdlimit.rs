//! Open-file limit. Every connection is a file descriptor, and the usual soft limit
//! (1024) is below what an open loop at a high rate or a large closed loop needs; past
//! it, connects fail with `ErrorKind::Io` ("too many open files").

/// Raises this process's soft limit on open files to its hard limit; returns the
/// limit now in force (0 if it could not be read). Call it once, before a run.
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                lim = want;
            }
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 on every target
    let limit = lim.rlim_cur as u64;
    limit
}
