//! The detector: two FCUs in active/standby alternation, the FMU, and the sampling clock
//! (SCLK) for listed flows.
//!
//! Per packet: a flow on the LLF list is not counted by the FCU (the thesis's SCAM
//! match); one in `sample_every` of those packets goes to the FMU as a systematic
//! sample. Any other packet is counted exactly by the active FCU. An epoch ends when the
//! active FCU holds `fcu_flows` distinct flows or has seen `epoch_packets` packets (the
//! continuous clock, CCLK, counted in packets); the FCUs then swap roles, the one going
//! to standby uploads its counts to the FMU, and the FMU refreshes the LLF list, which
//! takes effect for the next epoch. No list is published before the FMU has merged the
//! initialization length M of [`crate::estimate::init_packets`].
//!
//! In software the upload is done at the swap, so the standby FCU is always empty when
//! it becomes active again; the two buffers are kept to mirror the design (and the
//! memory it needs).

use std::hash::Hash;

use crate::estimate::{init_packets, unseen_llf_mle, Kde};
use crate::fcu::Fcu;
use crate::fmu::Fmu;

/// The detector's parameters; `Default` gives the documented defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Distinct flows an FCU holds before the swap (k = floor(S/(m+c)) in hardware).
    pub fcu_flows: usize,
    /// Packets per epoch at most (≤ 2^32 − 1 so that no 32-bit counter saturates).
    pub epoch_packets: u32,
    /// SCLK: one sampled packet in this many packets of listed flows.
    pub sample_every: u32,
    /// ε of the rule p̂(f) > 2^−(Ĥ − ε), bits.
    pub margin_bits: f64,
    /// Factor applied to the FMU's recent counts at each refresh (1: the whole interval).
    pub decay: f64,
    /// τ, the expected share of packets that are LLF packets (for M).
    pub tau: f64,
    /// LLF packets M must hold (the m of §2.6).
    pub min_llf: u32,
    /// The confidence CL of holding them.
    pub confidence: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            fcu_flows: 16_384,
            epoch_packets: 65_536,
            sample_every: 10,
            margin_bits: 3.0,
            decay: 1.0,
            tau: 0.03,
            min_llf: 10,
            confidence: 0.95,
        }
    }
}

impl Params {
    pub fn validate(&self) -> Result<(), String> {
        let counts = [
            ("fcu_flows", self.fcu_flows as u64),
            ("epoch_packets", u64::from(self.epoch_packets)),
            ("sample_every", u64::from(self.sample_every)),
        ];
        for (name, v) in counts {
            if v == 0 {
                return Err(format!("{name} must be at least 1, got 0"));
            }
        }
        if !self.margin_bits.is_finite() {
            return Err(format!(
                "margin_bits must be finite, got {}",
                self.margin_bits
            ));
        }
        if !(self.decay > 0.0 && self.decay <= 1.0) {
            return Err(format!("decay must be in (0, 1], got {}", self.decay));
        }
        init_packets(self.tau, self.min_llf, self.confidence).map(|_| ())
    }
}

#[derive(Clone, Debug)]
pub struct Detector<K> {
    params: Params,
    init_packets: u64,
    fcus: [Fcu<K>; 2],
    active: usize,
    fmu: Fmu<K>,
    epoch_packets: u32,
    sclk: u32,
    packets: u64,
    epochs: u64,
    peak_bytes: usize,
    peak_tracked: usize,
}

/// A flow on the final LLF list with its estimated packets.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed<K> {
    pub key: K,
    pub packets: f64,
}

/// What the detector found, and the offline estimates (reference 002 §2.8).
#[derive(Clone, Debug)]
pub struct Summary<K> {
    pub packets: u64,
    pub epochs: u64,
    /// The LLF list at the end, largest first.
    pub llf: Vec<Listed<K>>,
    /// The listed flows' share of all packets (exact counts plus scaled samples).
    pub llf_packet_share: f64,
    /// Ĥ at the last refresh, bits.
    pub entropy_bits: f64,
    /// Distinct flows seen.
    pub flows: u64,
    /// Flows never listed, each counted exactly (N_SLF).
    pub slf_flows: u64,
    /// Sampled LLF packets and the distinct flows among them (n and d of the MLE).
    pub llf_samples: u64,
    pub llf_sampled_flows: u64,
    /// Coupon-collector estimate of the LLFs, seen or not; `None` without a finite one.
    pub llf_flows_mle: Option<u64>,
    /// N = N_SLF + N̂_LLF.
    pub flows_estimate: Option<u64>,
    /// Gaussian KDE of log10(estimated packets per flow), Silverman's bandwidth.
    pub size_kde: Option<Kde>,
    /// Largest memory the online part held (both FCUs, the recent counts, the list) and
    /// the distinct flows it held then.
    pub peak_bytes: usize,
    pub peak_tracked: usize,
}

impl<K: Copy + Eq + Hash> Detector<K> {
    pub fn new(params: Params) -> Result<Self, String> {
        params.validate()?;
        let init_packets = init_packets(params.tau, params.min_llf, params.confidence)?;
        let fcu = || Fcu::with_capacity(params.fcu_flows);
        Ok(Detector {
            init_packets,
            fcus: [fcu(), fcu()],
            active: 0,
            fmu: Fmu::default(),
            epoch_packets: 0,
            sclk: 0,
            packets: 0,
            epochs: 0,
            peak_bytes: 0,
            peak_tracked: 0,
            params,
        })
    }

    /// The FMU's initialization length M, packets.
    pub fn init_packets(&self) -> u64 {
        self.init_packets
    }

    /// One packet of flow `key`.
    pub fn observe(&mut self, key: K) {
        self.packets += 1;
        self.epoch_packets += 1;
        if self.fmu.is_llf(&key) {
            self.sclk += 1;
            if self.sclk == self.params.sample_every {
                self.sclk = 0;
                self.fmu.sample(key, self.params.sample_every);
            }
        } else {
            self.fcus[self.active].count(key);
        }
        if self.fcus[self.active].len() >= self.params.fcu_flows
            || self.epoch_packets >= self.params.epoch_packets
        {
            self.swap();
        }
    }

    /// Is `key` on the current LLF list?
    pub fn is_llf(&self, key: &K) -> bool {
        self.fmu.is_llf(key)
    }

    /// End the epoch: the active FCU goes to standby and uploads, the list is refreshed.
    fn swap(&mut self) {
        let bytes = self.fcus[0].bytes() + self.fcus[1].bytes() + self.fmu.bytes();
        let fcu = &self.fcus[self.active];
        let tracked = self.fmu.tracked() + fcu.keys().filter(|k| !self.fmu.holds(k)).count();
        if bytes > self.peak_bytes {
            (self.peak_bytes, self.peak_tracked) = (bytes, tracked);
        }
        let standby = self.active;
        self.active ^= 1;
        self.fmu.upload(self.fcus[standby].drain());
        let publish = self.fmu.merged_packets() >= self.init_packets as f64;
        self.fmu
            .refresh(self.params.margin_bits, self.params.decay, publish);
        self.epoch_packets = 0;
        self.epochs += 1;
    }

    /// Close the last epoch and make the offline estimates.
    pub fn finish(mut self) -> Summary<K> {
        if self.epoch_packets > 0 {
            self.swap();
        }
        let weight = f64::from(self.params.sample_every);
        let estimate = |t: &crate::fmu::Totals| t.exact as f64 + t.sampled as f64 * weight;
        let totals = self.fmu.totals();
        let mut llf: Vec<Listed<K>> = self
            .fmu
            .llf()
            .iter()
            .map(|k| Listed {
                key: *k,
                packets: estimate(&totals[k]),
            })
            .collect();
        llf.sort_by(|a, b| b.packets.total_cmp(&a.packets));
        let listed_packets: f64 = llf.iter().map(|l| l.packets).sum();
        let slf_flows = totals.values().filter(|t| !t.listed).count() as u64;
        let llf_samples = totals.values().map(|t| t.sampled).sum();
        let llf_sampled_flows = totals.values().filter(|t| t.sampled > 0).count() as u64;
        let llf_flows_mle = unseen_llf_mle(llf_samples, llf_sampled_flows);
        let sizes = totals.values().map(|t| estimate(t).log10()).collect();
        Summary {
            packets: self.packets,
            epochs: self.epochs,
            llf_packet_share: if self.packets > 0 {
                listed_packets / self.packets as f64
            } else {
                0.0
            },
            llf,
            entropy_bits: self.fmu.entropy_bits(),
            flows: totals.len() as u64,
            slf_flows,
            llf_samples,
            llf_sampled_flows,
            llf_flows_mle,
            flows_estimate: llf_flows_mle.map(|n| n + slf_flows),
            size_kde: Kde::silverman(sizes).ok(),
            peak_bytes: self.peak_bytes,
            peak_tracked: self.peak_tracked,
        }
    }

    /// Exact counts of the flows never listed (every packet of theirs was counted).
    pub fn exact_counts(&self) -> impl Iterator<Item = (K, u64)> + '_ {
        self.fmu
            .totals()
            .iter()
            .filter(|(_, t)| !t.listed)
            .map(|(k, t)| (*k, t.exact))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A deterministic stream: `heavy` flows of ids 0.. each with `heavy_share` of the
    /// packets, interleaved with short flows of 1–20 packets (ids from 1000), bursty.
    fn trace(heavy: u64, heavy_share: f64, packets: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(packets);
        let mut state = 12345u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as f64 / (1u64 << 31) as f64
        };
        let mut short_id = 1000u64;
        let mut burst = 0;
        while out.len() < packets {
            let u = next();
            if u < heavy_share * heavy as f64 {
                out.push((u / heavy_share) as u64);
            } else {
                if burst == 0 {
                    short_id += 1;
                    burst = 1 + (next() * 20.0) as u32;
                }
                burst -= 1;
                out.push(short_id);
            }
        }
        out
    }

    fn small() -> Params {
        Params {
            fcu_flows: 512,
            epoch_packets: 4096,
            ..Params::default()
        }
    }

    #[test]
    fn short_flows_are_counted_exactly_across_swaps() {
        let keys = trace(5, 0.1, 50_000);
        let mut truth: HashMap<u64, u64> = HashMap::new();
        for k in &keys {
            *truth.entry(*k).or_default() += 1;
        }
        let mut d = Detector::new(small()).unwrap();
        keys.iter().for_each(|k| d.observe(*k));
        d.swap();
        let exact: Vec<_> = d.exact_counts().collect();
        assert!(exact.len() > 1000);
        for (k, n) in exact {
            assert_eq!(n, truth[&k], "flow {k}");
        }
    }

    #[test]
    fn dominant_flows_are_all_found_without_false_positives() {
        let keys = trace(5, 0.1, 100_000);
        let mut d = Detector::new(small()).unwrap();
        keys.iter().for_each(|k| d.observe(*k));
        assert!(d.epochs > 10);
        let s = d.finish();
        let mut found: Vec<u64> = s.llf.iter().map(|l| l.key).collect();
        found.sort();
        assert_eq!(found, [0, 1, 2, 3, 4]);
        // Each carries 10 %: half the packets are listed ones (estimates, ±sampling).
        assert!(
            (s.llf_packet_share - 0.5).abs() < 0.02,
            "{}",
            s.llf_packet_share
        );
        assert!(s.size_kde.is_some());
        assert_eq!(s.llf_flows_mle, Some(5));
    }

    #[test]
    fn no_list_before_the_initialization_length() {
        let mut d = Detector::new(Params {
            epoch_packets: 100,
            margin_bits: 0.0,
            ..Params::default()
        })
        .unwrap();
        assert_eq!(d.init_packets(), 566);
        let feed = |d: &mut Detector<u8>, rounds| {
            for _ in 0..rounds {
                [1, 1, 1, 2].iter().for_each(|k| d.observe(*k));
            }
        };
        // Flow 1 has 3/4 of the packets, above 2^-H = 0.57, but M is not reached yet.
        feed(&mut d, 125);
        assert!(!d.is_llf(&1));
        feed(&mut d, 25);
        assert!(d.is_llf(&1) && !d.is_llf(&2));
    }

    #[test]
    fn bad_parameters_are_refused() {
        let bad = Params {
            decay: 0.0,
            ..Params::default()
        };
        assert!(Detector::<u32>::new(bad).unwrap_err().contains("decay"));
    }
}
