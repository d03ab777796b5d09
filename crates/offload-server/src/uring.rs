//! `uring` mode: placeholder until the io_uring loop lands.

use std::io;
use std::sync::Arc;

use crate::app::Handler;
use crate::config::Config;
use crate::stats::Stats;
use crate::Control;

pub fn run(
    _config: &Config,
    _listener: std::net::TcpListener,
    _handler: Handler,
    _control: Arc<Control>,
    _stats: Arc<Stats>,
) -> io::Result<()> {
    Err(io::Error::other("uring mode is not available yet"))
}
