//! The `offload-load` command (`offload-load URL ...`): load one URL in open loop
//! (Poisson or constant rate) or closed loop (N clients, wrk-like with keep-alive), and
//! print a summary or JSON. The Rust binary and the `offload-load` script that pip
//! installs both run [`main`].
//!
//! Exit codes: 0 ran (whatever the error count), 1 runtime failure, 2 bad input, 130
//! interrupted (the report of what ran is printed first).

mod args;
mod output;

use std::ffi::OsString;
use std::io::IsTerminal;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Parser;

use crate::{raise_fd_limit, run, Control};
use args::{Args, Setup};

/// Runs the command on `argv` (the program's name first). `interrupted` is asked every
/// 50 ms; once it says yes the run stops early.
pub fn main(argv: Vec<OsString>, interrupted: impl Fn() -> bool) -> u8 {
    let args = match Args::try_parse_from(argv) {
        Ok(args) => args,
        Err(e) => {
            // Help and version are printed by clap and are no error.
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let setup = match Setup::from_args(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("offload-load: {e}");
            return 2;
        }
    };
    raise_fd_limit();
    let control = Control::new();
    let live = !args.json && !args.quiet && std::io::stderr().is_terminal();
    let mut stopped = false;
    let result = std::thread::scope(|s| {
        let runner = s.spawn(|| run(&setup.target, &setup.plan, &setup.options, &control));
        let start = Instant::now();
        let mut last = (0u64, 0.0f64);
        while !runner.is_finished() {
            std::thread::sleep(Duration::from_millis(50));
            if !stopped && interrupted() {
                stopped = true;
                control.cancel.store(true, Ordering::Relaxed);
            }
            let t = start.elapsed().as_secs_f64();
            if live && t - last.1 >= 1.0 {
                let done = control.done.load(Ordering::Relaxed);
                let rate = (done - last.0) as f64 / (t - last.1);
                eprintln!(
                    "{t:6.1} s  {rate:9.0} req/s  errors {:>6}  p99 {:.2} ms",
                    control.errors.load(Ordering::Relaxed),
                    control.p99_us.load(Ordering::Relaxed) as f64 / 1e3
                );
                last = (done, t);
            }
        }
        runner.join().expect("load generator panicked")
    });
    match result {
        Ok(report) => {
            if args.json {
                println!("{}", output::json(&setup, &report));
            } else {
                print!("{}", output::summary(&setup, &report));
            }
            if stopped {
                130
            } else {
                0
            }
        }
        Err(e) => {
            eprintln!("offload-load: {e}");
            1
        }
    }
}
