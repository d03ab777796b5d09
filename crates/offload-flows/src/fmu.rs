//! The flow management unit (FMU): merges the FCUs' exact counts and the sampled LLF
//! packets, and builds the long-lived flow list with the entropy rule.
//!
//! The rule (reference 002 §2.7, the corrected per-symbol reading of the thesis's
//! Algorithm 2.2): with p̂(f) a flow's share of the packets the FMU holds and
//! Ĥ = −Σ p̂ log2 p̂ the entropy of that distribution in bits, flow f is long-lived iff
//!
//! ```text
//!     p̂(f) > 2^−(Ĥ − ε)        i.e. its self-information −log2 p̂(f) < Ĥ − ε.
//! ```
//!
//! 2^Ĥ is the distribution's effective number of flows, so the rule keeps the flows
//! with more than 2^ε times the share of an "effective" flow. The comparison is strict so
//! that a uniform distribution has no LLF at ε = 0.
//!
//! Two records are kept. `recent` feeds the rule: at each refresh it is multiplied by
//! `decay` and flows that fall under one packet are forgotten, so an online detector
//! follows flows that come and go (decay 1 keeps the whole interval). `totals` keeps the
//! whole interval for the offline estimates (the thesis pages it to disk).

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// A flow's packets over the whole interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Counted exactly by the FCUs (while the flow was not on the LLF list).
    pub exact: u64,
    /// Sampled by the sampling clock while on the list (each stands for `sample_every`).
    pub sampled: u64,
    /// Whether it was ever on the LLF list.
    pub listed: bool,
}

#[derive(Clone, Debug)]
pub struct Fmu<K> {
    recent: HashMap<K, f64>,
    totals: HashMap<K, Totals>,
    llf: HashSet<K>,
    entropy_bits: f64,
    /// Packets merged so far (exact plus sampled times their weight).
    merged: f64,
}

impl<K: Copy + Eq + Hash> Default for Fmu<K> {
    fn default() -> Self {
        Fmu {
            recent: HashMap::new(),
            totals: HashMap::new(),
            llf: HashSet::new(),
            entropy_bits: 0.0,
            merged: 0.0,
        }
    }
}

impl<K: Copy + Eq + Hash> Fmu<K> {
    pub fn is_llf(&self, key: &K) -> bool {
        self.llf.contains(key)
    }

    pub fn llf(&self) -> &HashSet<K> {
        &self.llf
    }

    pub fn totals(&self) -> &HashMap<K, Totals> {
        &self.totals
    }

    /// Ĥ at the last refresh, bits.
    pub fn entropy_bits(&self) -> f64 {
        self.entropy_bits
    }

    pub fn merged_packets(&self) -> f64 {
        self.merged
    }

    /// An FCU's epoch of exact counts.
    pub fn upload(&mut self, counts: impl Iterator<Item = (K, u32)>) {
        for (key, n) in counts {
            *self.recent.entry(key).or_default() += f64::from(n);
            self.totals.entry(key).or_default().exact += u64::from(n);
            self.merged += f64::from(n);
        }
    }

    /// One sampled packet of a listed flow, standing for `weight` packets.
    pub fn sample(&mut self, key: K, weight: u32) {
        *self.recent.entry(key).or_default() += f64::from(weight);
        self.totals.entry(key).or_default().sampled += 1;
        self.merged += f64::from(weight);
    }

    /// Recompute Ĥ and, when `publish`, the LLF list; then age `recent` by `decay`.
    pub fn refresh(&mut self, margin_bits: f64, decay: f64, publish: bool) {
        let total: f64 = self.recent.values().sum();
        if total > 0.0 {
            let sum_c_log_c: f64 = self.recent.values().map(|&c| c * c.log2()).sum();
            self.entropy_bits = (total.log2() - sum_c_log_c / total).max(0.0);
        }
        if publish && total > 0.0 {
            let threshold = total * (-(self.entropy_bits - margin_bits)).exp2();
            self.llf = self
                .recent
                .iter()
                .filter(|&(_, &c)| c > threshold)
                .map(|(&k, _)| k)
                .collect();
            for k in &self.llf {
                self.totals.entry(*k).or_default().listed = true;
            }
        }
        if decay < 1.0 {
            self.recent.retain(|_, c| {
                *c *= decay;
                *c >= 1.0
            });
        }
    }

    /// Memory of what the online rule needs: the recent counts and the list.
    pub fn bytes(&self) -> usize {
        self.recent.capacity() * crate::entry_bytes::<K, f64>()
            + self.llf.capacity() * crate::entry_bytes::<K, ()>()
    }

    /// Does the online rule hold a count for `key`?
    pub fn holds(&self, key: &K) -> bool {
        self.recent.contains_key(key)
    }

    /// Flows the online rule holds.
    pub fn tracked(&self) -> usize {
        self.recent.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_flows_have_no_llf_and_a_dominant_one_is_listed() {
        let mut f = Fmu::default();
        f.upload((0..8u32).map(|k| (k, 10)));
        f.refresh(0.0, 1.0, true);
        assert!((f.entropy_bits() - 3.0).abs() < 1e-12);
        assert!(f.llf().is_empty());
        f.upload([(0u32, 1000)].into_iter());
        f.refresh(0.0, 1.0, true);
        assert_eq!(f.llf().iter().copied().collect::<Vec<_>>(), [0]);
        assert!(f.totals()[&0].listed && !f.totals()[&1].listed);
    }

    #[test]
    fn decay_forgets_flows_that_stop() {
        let mut f = Fmu::default();
        f.upload([(1u32, 4), (2, 100)].into_iter());
        f.refresh(0.0, 0.5, false);
        f.refresh(0.0, 0.5, false);
        f.refresh(0.0, 0.5, false);
        assert_eq!(f.tracked(), 1); // 4 -> 2 -> 1 -> 0.5: gone; 100 stays
        assert_eq!(f.totals()[&1].exact, 4); // the interval's record keeps it
    }
}
