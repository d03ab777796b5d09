//! What the integration tests share: a server on a thread of the test.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use offload_server::{serve, Config, Control, StatsDocument};

/// Serves `config` on a thread of its own until its control is stopped, once it listens
/// (within 10 s; a server that fails to start fails the test).
pub fn start(config: Config) -> (Arc<Control>, JoinHandle<Result<StatsDocument, String>>) {
    let control = Arc::new(Control::new());
    let server = {
        let control = control.clone();
        std::thread::spawn(move || serve(config, control))
    };
    let started = Instant::now();
    while control.port() == 0 {
        if server.is_finished() {
            panic!("the server failed to start: {:?}", server.join().unwrap());
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the server did not start"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    (control, server)
}
