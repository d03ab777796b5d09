//! The event calendar: pending events in time order.
//!
//! A binary heap keyed by (time, sequence number). The sequence number breaks ties in
//! the order events were scheduled, so simultaneous events (e.g. two zero service
//! times) are handled deterministically, the same on every run.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Time-ordered pending events of type `E`.
#[derive(Debug)]
pub struct Calendar<E> {
    heap: BinaryHeap<Entry<E>>,
    scheduled: u64,
}

#[derive(Debug)]
struct Entry<E> {
    time: f64,
    seq: u64,
    event: E,
}

impl<E> Calendar<E> {
    pub fn new() -> Self {
        Calendar {
            heap: BinaryHeap::new(),
            scheduled: 0,
        }
    }

    /// Schedule `event` at `time` (seconds; never NaN).
    #[inline]
    pub fn schedule(&mut self, time: f64, event: E) {
        debug_assert!(!time.is_nan(), "event scheduled at NaN");
        self.heap.push(Entry {
            time,
            seq: self.scheduled,
            event,
        });
        self.scheduled += 1;
    }

    /// The earliest pending event and its time.
    #[inline]
    pub fn pop(&mut self) -> Option<(f64, E)> {
        self.heap.pop().map(|e| (e.time, e.event))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

impl<E> Default for Calendar<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> Ord for Entry<E> {
    /// Reversed, so that the max-heap yields the earliest (time, seq) first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .total_cmp(&self.time)
            .then(other.seq.cmp(&self.seq))
    }
}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<E> Eq for Entry<E> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_order_and_ties_in_scheduling_order() {
        let mut cal = Calendar::new();
        for (t, e) in [(3.0, 'c'), (1.0, 'a'), (2.0, 'b'), (1.0, 'A'), (0.0, 'z')] {
            cal.schedule(t, e);
        }
        let order: Vec<char> = std::iter::from_fn(|| cal.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ['z', 'a', 'A', 'b', 'c']);
        assert!(cal.is_empty());
    }

    #[test]
    fn interleaved_schedule_and_pop_keep_order() {
        let mut cal = Calendar::new();
        let mut last = f64::NEG_INFINITY;
        let mut x = 0.5f64;
        for i in 0..10_000 {
            x = (x * 3.7 + 0.1).fract(); // a cheap deterministic scramble of future times
            cal.schedule(last.max(0.0) + x, i);
            if i % 3 == 0 {
                let (t, _) = cal.pop().unwrap();
                assert!(t >= last);
                last = t;
            }
        }
        while let Some((t, _)) = cal.pop() {
            assert!(t >= last);
            last = t;
        }
    }
}
