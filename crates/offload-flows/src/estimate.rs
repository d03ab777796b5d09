//! The FMU's sizing and the offline estimates (reference 002 §2.6 and §2.8).

use std::f64::consts::PI;

/// The FMU's initialization length M: the fewest sampled packets that hold more than
/// `min_llf` LLF packets with probability `confidence`, when a packet is an LLF's with
/// probability `tau`. The count is Binomial(M, τ) ≈ Poisson(Mτ), so (corrected
/// T-2.19/2.20) M is the smallest M with PoissonCDF(min_llf; Mτ) ≤ 1 − confidence.
pub fn init_packets(tau: f64, min_llf: u32, confidence: f64) -> Result<u64, String> {
    if !(tau > 0.0 && tau <= 1.0) {
        return Err(format!("tau must be in (0, 1], got {tau}"));
    }
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(format!("confidence must be in (0, 1), got {confidence}"));
    }
    let enough = |m: u64| poisson_cdf(min_llf, m as f64 * tau) <= 1.0 - confidence;
    // The CDF falls as M grows: bracket, then bisect.
    let mut hi = 1u64;
    while !enough(hi) {
        hi *= 2;
    }
    let mut lo = hi / 2; // not enough (or 0)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if enough(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

/// P(X ≤ k) for X ~ Poisson(λ), summed in log space (e^−λ underflows for large λ).
fn poisson_cdf(k: u32, lambda: f64) -> f64 {
    if lambda == 0.0 {
        return 1.0;
    }
    let mut log_term = -lambda;
    let mut log_sum = log_term;
    for i in 1..=k {
        log_term += lambda.ln() - f64::from(i).ln();
        let (a, b) = (log_sum.max(log_term), log_sum.min(log_term));
        log_sum = a + (b - a).exp().ln_1p();
    }
    log_sum.exp().min(1.0)
}

/// The coupon-collector maximum-likelihood estimate of how many distinct LLFs there are,
/// from `samples` sampled LLF packets holding `distinct` different flows (T-2.25,
/// Finkelstein, Tucker & Veeh): the smallest j ≥ distinct with
/// (j+1)/(j+1−d) · (j/(j+1))^n < 1. `None` when every sample is a different flow (the
/// likelihood grows without bound) or `distinct > samples`.
pub fn unseen_llf_mle(samples: u64, distinct: u64) -> Option<u64> {
    if distinct == 0 {
        return Some(0);
    }
    if distinct >= samples {
        return None;
    }
    let (n, d) = (samples as f64, distinct as f64);
    // ln of the ratio L(j+1)/L(j); negative once the likelihood has peaked.
    let falls = |j: u64| {
        let j = j as f64;
        -(-d / (j + 1.0)).ln_1p() - n * (1.0 / j).ln_1p() < 0.0
    };
    let mut hi = distinct;
    while !falls(hi) {
        hi = hi.checked_mul(2)?;
    }
    let mut lo = distinct;
    if falls(lo) {
        return Some(lo);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if falls(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// Silverman's rule of thumb, h = 1.06 σ̂ N^(−1/5), with σ̂ the 1/N standard deviation.
pub fn silverman_bandwidth(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    1.06 * var.sqrt() * n.powf(-0.2)
}

/// A Gaussian Parzen-window density estimate, f̂(x) = (1/(N h)) Σ ψ((x − x_i)/h)
/// with ψ the standard normal density (T-2.23/2.24).
#[derive(Clone, Debug)]
pub struct Kde {
    points: Vec<f64>,
    pub bandwidth: f64,
}

impl Kde {
    /// With Silverman's bandwidth; needs two points that differ.
    pub fn silverman(points: Vec<f64>) -> Result<Self, String> {
        let bandwidth = silverman_bandwidth(&points);
        if points.len() < 2 || !(bandwidth > 0.0 && bandwidth.is_finite()) {
            return Err("a density needs at least two different finite sizes".into());
        }
        Ok(Kde { points, bandwidth })
    }

    /// Where the density is not negligible: the points' range widened by 3 bandwidths.
    pub fn support(&self) -> (f64, f64) {
        let lo = self.points.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self
            .points
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        (lo - 3.0 * self.bandwidth, hi + 3.0 * self.bandwidth)
    }

    pub fn density(&self, x: f64) -> f64 {
        let h = self.bandwidth;
        let sum: f64 = self
            .points
            .iter()
            .map(|p| (-0.5 * ((x - p) / h).powi(2)).exp())
            .sum();
        sum / (self.points.len() as f64 * h * (2.0 * PI).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_length_matches_the_reference_table() {
        // Reference 002 §2.6: (τ, m) -> M for CL 0.95 and 0.99.
        for (tau, m, m95, m99) in [
            (0.03, 10, 566, 672),
            (0.03, 100, 3936, 4195),
            (0.01, 10, 1697, 2015),
        ] {
            assert_eq!(init_packets(tau, m, 0.95).unwrap(), m95, "tau {tau} m {m}");
            assert_eq!(init_packets(tau, m, 0.99).unwrap(), m99, "tau {tau} m {m}");
        }
        assert!(init_packets(0.0, 10, 0.95).unwrap_err().contains("tau"));
    }

    #[test]
    fn coupon_collector_matches_the_reference_checks() {
        assert_eq!(unseen_llf_mle(1000, 500), Some(627));
        assert_eq!(unseen_llf_mle(10_000, 3000), Some(3127));
        assert_eq!(unseen_llf_mle(1000, 900), Some(4656));
        assert_eq!(unseen_llf_mle(10, 10), None);
        assert_eq!(unseen_llf_mle(10, 0), Some(0));
    }

    #[test]
    fn kde_integrates_to_one_with_silverman_bandwidth() {
        let pts: Vec<f64> = (0..50)
            .map(|i| f64::from(i % 7) + 0.1 * f64::from(i))
            .collect();
        let k = Kde::silverman(pts.clone()).unwrap();
        assert!((k.bandwidth - silverman_bandwidth(&pts)).abs() < 1e-15);
        let area: f64 = (-2000..4000)
            .map(|i| k.density(f64::from(i) * 0.01) * 0.01)
            .sum();
        assert!((area - 1.0).abs() < 1e-6, "area {area}");
        assert!(Kde::silverman(vec![3.0, 3.0]).is_err());
    }
}
