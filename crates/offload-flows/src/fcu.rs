//! A flow collection unit (FCU): exact packet counts of the flows that are not on the
//! LLF list, for one epoch.
//!
//! The thesis's ICAM maps a flow to the next free slot of a counter SRAM; here a hash map
//! gives the slot in a dense array, so an update is O(1) and the array is uploaded in the
//! order flows first appeared. Counters are 32 bits: the detector ends an epoch before
//! 2^32 packets, so no counter saturates and every count is exact (the thesis's narrow
//! saturating counters save SRAM that a software FCU does not need to save).

use std::collections::HashMap;
use std::hash::Hash;

#[derive(Clone, Debug)]
pub struct Fcu<K> {
    slots: HashMap<K, usize>,
    counts: Vec<(K, u32)>,
}

impl<K: Copy + Eq + Hash> Fcu<K> {
    pub fn with_capacity(flows: usize) -> Self {
        Fcu {
            slots: HashMap::with_capacity(flows),
            counts: Vec::with_capacity(flows),
        }
    }

    /// Count one packet of `key`.
    pub fn count(&mut self, key: K) {
        match self.slots.get(&key) {
            Some(&i) => self.counts[i].1 += 1,
            None => {
                self.slots.insert(key, self.counts.len());
                self.counts.push((key, 1));
            }
        }
    }

    /// The flows held, in the order they first appeared.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.counts.iter().map(|(k, _)| k)
    }

    /// Distinct flows held.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Hand the counts over (the upload to the FMU) and start empty, keeping the memory.
    pub fn drain(&mut self) -> std::vec::Drain<'_, (K, u32)> {
        self.slots.clear();
        self.counts.drain(..)
    }

    /// Memory reserved: the slot map and the counter array.
    pub fn bytes(&self) -> usize {
        self.slots.capacity() * crate::entry_bytes::<K, usize>()
            + self.counts.capacity() * std::mem::size_of::<(K, u32)>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_exactly_and_drains_in_first_seen_order() {
        let mut f = Fcu::with_capacity(4);
        for k in [3, 1, 3, 3, 2, 1] {
            f.count(k);
        }
        assert_eq!(f.len(), 3);
        assert_eq!(f.drain().collect::<Vec<_>>(), [(3, 3), (1, 2), (2, 1)]);
        assert!(f.is_empty());
        f.count(1);
        assert_eq!(f.drain().collect::<Vec<_>>(), [(1, 1)]);
    }
}
