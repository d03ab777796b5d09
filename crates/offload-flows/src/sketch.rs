//! Space-Saving (Metwally, Agrawal & El Abbadi, 2005), the heavy-hitter baseline: `k`
//! counters; a new flow, when all are taken, replaces the flow with the smallest count
//! and inherits that count plus one. Every flow with more than N/k packets is held, and
//! a held flow's count overestimates by at most the inherited `error`.
//!
//! The counters are a binary min-heap with each flow's heap position in a hash map, so
//! an update is O(log k).

use std::collections::HashMap;
use std::hash::Hash;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter<K> {
    pub key: K,
    pub count: u64,
    pub error: u64,
}

#[derive(Clone, Debug)]
pub struct SpaceSaving<K> {
    k: usize,
    heap: Vec<Counter<K>>,
    pos: HashMap<K, usize>,
}

impl<K: Copy + Eq + Hash> SpaceSaving<K> {
    pub fn new(k: usize) -> Result<Self, String> {
        if k == 0 {
            return Err("space-saving needs k >= 1 counters".into());
        }
        Ok(SpaceSaving {
            k,
            heap: Vec::with_capacity(k),
            pos: HashMap::with_capacity(k),
        })
    }

    pub fn observe(&mut self, key: K) {
        let i = match self.pos.get(&key) {
            Some(&i) => {
                self.heap[i].count += 1;
                i
            }
            None if self.heap.len() < self.k => {
                self.heap.push(Counter {
                    key,
                    count: 1,
                    error: 0,
                });
                let i = self.heap.len() - 1;
                self.pos.insert(key, i);
                self.sift_up(i);
                return;
            }
            None => {
                let min = self.heap[0];
                self.pos.remove(&min.key);
                self.pos.insert(key, 0);
                self.heap[0] = Counter {
                    key,
                    count: min.count + 1,
                    error: min.count,
                };
                0
            }
        };
        self.sift_down(i);
    }

    /// Flows whose guaranteed count (count − error) exceeds `threshold`, largest first.
    pub fn above(&self, threshold: u64) -> Vec<Counter<K>> {
        let mut out: Vec<_> = self
            .heap
            .iter()
            .filter(|c| c.count - c.error > threshold)
            .copied()
            .collect();
        out.sort_by_key(|c| std::cmp::Reverse(c.count));
        out
    }

    pub fn counters(&self) -> &[Counter<K>] {
        &self.heap
    }

    pub fn bytes(&self) -> usize {
        self.heap.capacity() * std::mem::size_of::<Counter<K>>()
            + self.pos.capacity() * crate::entry_bytes::<K, usize>()
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[parent].count <= self.heap[i].count {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            for c in [l, r] {
                if c < self.heap.len() && self.heap[c].count < self.heap[least].count {
                    least = c;
                }
            }
            if least == i {
                return;
            }
            self.swap(i, least);
            i = least;
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos.insert(self.heap[a].key, a);
        self.pos.insert(self.heap[b].key, b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_every_flow_above_n_over_k_with_bounded_error() {
        let mut s = SpaceSaving::new(10).unwrap();
        let mut n = 0u64;
        for round in 0..1000u64 {
            for k in [1u64, 1, 1, 2, 2] {
                s.observe(k);
                n += 1;
            }
            s.observe(1000 + round); // a new one-packet flow each round
            n += 1;
        }
        let heavy: Vec<u64> = s.above(n / 10).iter().map(|c| c.key).collect();
        assert_eq!(heavy, [1, 2]);
        let one = s.counters().iter().find(|c| c.key == 1).unwrap();
        assert!(one.count >= 3000 && one.count - one.error <= 3000);
        assert_eq!(s.counters().len(), 10);
    }
}
