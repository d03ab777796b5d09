//! `offload-load URL ...`: see [`offload_load::cli`]. Ctrl-C ends it at once, as any
//! program; the `offload-load` that pip installs stops early and reports instead.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(offload_load::cli::main(
        std::env::args_os().collect(),
        || false,
    ))
}
