//! The host–engine interface: single-producer single-consumer rings (rtrb: fixed-size
//! slots in memory both threads share, head and tail on separate cache lines) with
//! batching and sleep/wake.
//!
//! A producer queues items locally and publishes them in one batch (one release store
//! for the whole batch). A full ring never blocks it: items wait in its backlog. A
//! consumer that finds nothing to do may sleep on an eventfd (mio's `Waker`); the
//! producer wakes it only if it said it was going to sleep, so a busy peer costs no
//! system call.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;

use mio::Waker;
use rtrb::{Consumer, Producer, RingBuffer};

/// A consumer's wake-up line.
pub struct Wake {
    sleeping: AtomicBool,
    waker: Waker,
}

impl Wake {
    pub fn new(waker: Waker) -> Arc<Wake> {
        Arc::new(Wake {
            sleeping: AtomicBool::new(false),
            waker,
        })
    }

    /// The consumer is about to sleep. It must check its ring once more after this and
    /// before sleeping: either it sees the new items or the producer sees this flag.
    pub fn sleep_begin(&self) {
        self.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    pub fn sleep_end(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
    }

    fn wake(&self) -> io::Result<()> {
        fence(Ordering::SeqCst);
        if self.sleeping.swap(false, Ordering::Relaxed) {
            self.waker.wake()?;
        }
        Ok(())
    }
}

pub struct Sender<T> {
    ring: Producer<T>,
    backlog: VecDeque<T>,
    peer: Arc<Wake>,
}

pub struct Receiver<T> {
    ring: Consumer<T>,
}

/// A ring of `capacity` slots whose consumer sleeps on `consumer_wake`.
pub fn channel<T>(capacity: usize, consumer_wake: Arc<Wake>) -> (Sender<T>, Receiver<T>) {
    let (ring, rx) = RingBuffer::new(capacity);
    let tx = Sender {
        ring,
        backlog: VecDeque::with_capacity(capacity),
        peer: consumer_wake,
    };
    (tx, Receiver { ring: rx })
}

impl<T> Sender<T> {
    /// Queues an item for the next `flush`.
    pub fn push(&mut self, item: T) {
        self.backlog.push_back(item);
    }

    /// Publishes as much of the backlog as fits, as one batch, and wakes the consumer
    /// if it sleeps. Returns how many items went.
    pub fn flush(&mut self) -> io::Result<usize> {
        let n = self.backlog.len().min(self.ring.slots());
        if n == 0 {
            return Ok(0);
        }
        let chunk = self
            .ring
            .write_chunk_uninit(n)
            .expect("n free slots were counted");
        chunk.fill_from_iter(self.backlog.drain(..n));
        self.peer.wake()?;
        Ok(n)
    }

    /// Items still waiting for room in the ring.
    pub fn backlog(&self) -> usize {
        self.backlog.len()
    }
}

impl<T> Receiver<T> {
    /// Hands every published item to `f`, in order, releasing their slots as one batch.
    pub fn drain(&mut self, mut f: impl FnMut(T)) -> usize {
        let n = self.ring.slots();
        if n == 0 {
            return 0;
        }
        let chunk = self.ring.read_chunk(n).expect("n items were counted");
        chunk.into_iter().for_each(&mut f);
        n
    }

    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll, Token};
    use std::time::Duration;

    fn wake_line() -> (Poll, Arc<Wake>) {
        let poll = Poll::new().unwrap();
        let waker = Waker::new(poll.registry(), Token(0)).unwrap();
        (poll, Wake::new(waker))
    }

    #[test]
    fn items_arrive_in_order_and_a_full_ring_keeps_the_rest() {
        let (_poll, wake) = wake_line();
        let (mut tx, mut rx) = channel(4, wake);
        (0..10).for_each(|i| tx.push(i));
        assert_eq!(tx.flush().unwrap(), 4);
        assert_eq!(tx.backlog(), 6);
        let mut got = Vec::new();
        while got.len() < 10 {
            rx.drain(|i| got.push(i));
            tx.flush().unwrap();
        }
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn a_sleeping_consumer_is_woken_and_a_busy_one_is_not() {
        let (mut poll, wake) = wake_line();
        let (mut tx, rx) = channel(8, wake.clone());
        let mut events = Events::with_capacity(4);
        tx.push(1);
        tx.flush().unwrap(); // not sleeping: no wake-up
        poll.poll(&mut events, Some(Duration::ZERO)).unwrap();
        assert!(events.is_empty());
        wake.sleep_begin();
        let producer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.push(2);
            tx.flush().unwrap();
        });
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        wake.sleep_end();
        assert!(!events.is_empty(), "the producer woke the sleeper");
        producer.join().unwrap();
        assert!(!rx.is_empty());
    }
}
