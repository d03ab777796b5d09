//! The cache's object store: entries under a byte budget, evicted by one of three
//! replacement policies (reference 001 §3.1):
//!
//! - **LRU**: the least recently used entry goes first;
//! - **LFU**: the least often used, the least recent among equals;
//! - **GDSF** (Greedy-Dual-Size-Frequency, with cost 1 so it maximises the hit rate):
//!   an entry's value is H = L + references / size, where L is the value of the last
//!   entry evicted. Small, popular objects stay; an entry not referenced falls behind as
//!   L rises with each eviction.
//!
//! All three keep one ordered index of (rank, tick), so each is O(log n) per access; the
//! tick (a counter of accesses) makes ranks unique and breaks ties towards the older.

use std::collections::{BTreeMap, HashMap};

/// A replacement policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Lru,
    Lfu,
    Gdsf,
}

impl Policy {
    pub fn parse(name: &str) -> Result<Policy, String> {
        match name {
            "lru" => Ok(Policy::Lru),
            "lfu" => Ok(Policy::Lfu),
            "gdsf" => Ok(Policy::Gdsf),
            _ => Err(format!(
                "cache policy '{name}' is not known; use lru, lfu or gdsf"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Policy::Lru => "lru",
            Policy::Lfu => "lfu",
            Policy::Gdsf => "gdsf",
        }
    }
}

/// (rank, tick): the entry with the least is evicted first.
type Rank = (u64, u64);

struct Entry<V> {
    value: V,
    size: u64,
    references: u64,
    rank: Rank,
}

pub struct Store<V> {
    policy: Policy,
    capacity: u64,
    used: u64,
    entries: HashMap<Box<[u8]>, Entry<V>>,
    order: BTreeMap<Rank, Box<[u8]>>,
    tick: u64,
    /// GDSF's L: the value of the last entry evicted.
    inflation: f64,
}

/// The outcome of [`Store::insert`].
#[derive(Debug, PartialEq, Eq)]
pub enum Inserted {
    /// Stored, after evicting this many entries.
    Stored { evicted: u64 },
    /// Larger than the whole budget: not stored, nothing evicted.
    TooLarge,
}

impl<V> Store<V> {
    pub fn new(policy: Policy, capacity: u64) -> Store<V> {
        Store {
            policy,
            capacity,
            used: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
            tick: 0,
            inflation: 0.0,
        }
    }

    /// The entry under `key`, counted as a reference.
    pub fn get(&mut self, key: &[u8]) -> Option<&mut V> {
        let entry = self.entries.get_mut(key)?;
        let name = self
            .order
            .remove(&entry.rank)
            .expect("every entry is ranked");
        entry.references += 1;
        self.tick += 1;
        entry.rank = rank(
            self.policy,
            self.inflation,
            entry.references,
            entry.size,
            self.tick,
        );
        self.order.insert(entry.rank, name);
        Some(&mut entry.value)
    }

    /// Stores `value` under `key`, charged `size` bytes of the budget, evicting until
    /// it fits. A value already under `key` is replaced and keeps its references.
    pub fn insert(&mut self, key: &[u8], size: u64, value: V) -> Inserted {
        if size > self.capacity {
            return Inserted::TooLarge;
        }
        let references = self.remove(key).map_or(0, |old| old.references) + 1;
        let mut evicted = 0;
        while self.used + size > self.capacity {
            let (victim_rank, victim) = self.order.pop_first().expect("used > 0 means entries");
            let gone = self
                .entries
                .remove(&victim)
                .expect("every ranked key has an entry");
            self.used -= gone.size;
            if self.policy == Policy::Gdsf {
                self.inflation = f64::from_bits(victim_rank.0);
            }
            evicted += 1;
        }
        self.tick += 1;
        let rank = rank(self.policy, self.inflation, references, size, self.tick);
        let name: Box<[u8]> = key.into();
        self.order.insert(rank, name.clone());
        self.entries.insert(
            name,
            Entry {
                value,
                size,
                references,
                rank,
            },
        );
        self.used += size;
        Inserted::Stored { evicted }
    }

    /// Drops the entry under `key`, if any.
    fn remove(&mut self, key: &[u8]) -> Option<Entry<V>> {
        let entry = self.entries.remove(key)?;
        self.order.remove(&entry.rank);
        self.used -= entry.size;
        Some(entry)
    }

    /// Bytes charged by the entries stored.
    pub fn used(&self) -> u64 {
        self.used
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Keys from the next to be evicted to the last.
    #[cfg(test)]
    fn eviction_order(&self) -> Vec<&[u8]> {
        self.order.values().map(|k| &k[..]).collect()
    }
}

fn rank(policy: Policy, inflation: f64, references: u64, size: u64, tick: u64) -> Rank {
    let primary = match policy {
        Policy::Lru => 0,
        Policy::Lfu => references,
        // Non-negative floats order as their bit patterns do.
        Policy::Gdsf => (inflation + references as f64 / size.max(1) as f64).to_bits(),
    };
    (primary, tick)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(policy: Policy, capacity: u64, items: &[(&str, u64)]) -> Store<()> {
        let mut store = Store::new(policy, capacity);
        for (key, size) in items {
            store.insert(key.as_bytes(), *size, ());
        }
        store
    }

    fn order(store: &Store<()>) -> Vec<String> {
        store
            .eviction_order()
            .into_iter()
            .map(|k| String::from_utf8(k.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn lru_evicts_the_least_recently_used() {
        let mut s = filled(Policy::Lru, 30, &[("a", 10), ("b", 10), ("c", 10)]);
        assert!(s.get(b"a").is_some());
        assert_eq!(order(&s), ["b", "c", "a"]);
        assert_eq!(s.insert(b"d", 10, ()), Inserted::Stored { evicted: 1 });
        assert_eq!(order(&s), ["c", "a", "d"]);
        // Needs 20 bytes: c and a go, in that order.
        assert_eq!(s.insert(b"e", 20, ()), Inserted::Stored { evicted: 2 });
        assert_eq!(order(&s), ["d", "e"]);
    }

    #[test]
    fn lfu_evicts_the_least_used_and_the_older_among_equals() {
        let mut s = filled(Policy::Lfu, 30, &[("a", 10), ("b", 10), ("c", 10)]);
        for _ in 0..2 {
            s.get(b"a");
        }
        s.get(b"c");
        // References: a 3, b 1, c 2.
        assert_eq!(order(&s), ["b", "c", "a"]);
        s.insert(b"d", 10, ());
        // d has 1 reference and is newer than nothing left with 1: it goes next.
        assert_eq!(order(&s), ["d", "c", "a"]);
        s.get(b"d");
        s.get(b"d");
        // d (3 refs, newest) now outranks a (3 refs, older).
        assert_eq!(order(&s), ["c", "a", "d"]);
    }

    #[test]
    fn gdsf_prefers_small_popular_objects_and_ages_by_inflation() {
        // Equal references: the largest has the least value 1/size.
        let mut s = filled(
            Policy::Gdsf,
            100,
            &[("big", 50), ("mid", 25), ("small", 10)],
        );
        assert_eq!(order(&s), ["big", "mid", "small"]);
        // Two more references make big worth 3/50 = 0.06, above mid's 1/25 = 0.04.
        s.get(b"big");
        s.get(b"big");
        assert_eq!(order(&s), ["mid", "big", "small"]);
        // Evicting mid sets L = 0.04; new is worth 0.04 + 1/20 = 0.09, so it ranks
        // above big (0.06) and below small (0.1).
        assert_eq!(s.insert(b"new", 20, ()), Inserted::Stored { evicted: 1 });
        assert_eq!(order(&s), ["big", "new", "small"]);
        // A new reference to big is valued from the raised L: 0.04 + 4/50 = 0.12.
        s.get(b"big");
        assert_eq!(order(&s), ["new", "small", "big"]);
    }

    #[test]
    fn too_large_is_refused_and_replacing_keeps_references() {
        let mut s = filled(Policy::Lfu, 30, &[("a", 10), ("b", 10)]);
        assert_eq!(s.insert(b"huge", 31, ()), Inserted::TooLarge);
        assert_eq!((s.len(), s.used()), (2, 20));
        s.get(b"a");
        s.insert(b"a", 15, ()); // a fresh copy: 3 references now, 15 bytes
        assert_eq!((s.len(), s.used()), (2, 25));
        assert_eq!(order(&s), ["b", "a"]);
    }

    #[test]
    fn the_budget_is_never_exceeded_and_used_is_the_sum_of_sizes() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        for policy in [Policy::Lru, Policy::Lfu, Policy::Gdsf] {
            let mut s: Store<u64> = Store::new(policy, 1000);
            let mut sizes = HashMap::new();
            for _ in 0..20_000 {
                let key = rng.random_range(0..200u32).to_string().into_bytes();
                let size = *sizes.entry(key.clone()).or_insert(rng.random_range(1..300));
                if s.get(&key).is_none() {
                    s.insert(&key, size, size);
                }
                assert!(s.used() <= s.capacity(), "{policy:?}");
            }
            let total: u64 = s.entries.values().map(|e| e.value).sum();
            assert_eq!(s.used(), total, "{policy:?}");
            assert_eq!(s.order.len(), s.entries.len(), "{policy:?}");
        }
    }
}
