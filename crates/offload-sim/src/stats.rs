//! Output analysis: running sums, confidence intervals, warm-up detection.

use hdrhistogram::Histogram;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Time histograms are in nanoseconds up to an hour, to 3 significant digits.
const HIST_MAX_NS: u64 = 3_600_000_000_000;

pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("valid histogram bounds")
}

/// Record a time in seconds.
#[inline]
pub(crate) fn record(hist: &mut Histogram<u64>, seconds: f64) {
    // Adding 0.5 before the saturating cast rounds to the nearest ns without a libm call.
    hist.saturating_record((seconds * 1e9 + 0.5) as u64);
}

/// A count and a sum: enough for a mean, and two tallies merge by adding.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    pub n: u64,
    pub sum: f64,
}

impl Tally {
    #[inline]
    pub fn add(&mut self, x: f64) {
        self.n += 1;
        self.sum += x;
    }

    pub fn merge(&mut self, other: &Tally) {
        self.n += other.n;
        self.sum += other.sum;
    }

    /// The tally of x + `by` for each x observed.
    pub fn shifted(self, by: f64) -> Tally {
        Tally {
            n: self.n,
            sum: self.sum + self.n as f64 * by,
        }
    }

    /// The mean, NaN when nothing was observed.
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            f64::NAN
        } else {
            self.sum / self.n as f64
        }
    }
}

/// Half-width of the 95% confidence interval of the mean of `values`, taken as
/// independent (batch means or replications): t(0.975, n-1) s / sqrt(n).
/// NaN with fewer than two values or any value that is not finite.
pub fn half_width_95(values: &[f64]) -> f64 {
    let n = values.len();
    if n < 2 || values.iter().any(|v| !v.is_finite()) {
        return f64::NAN;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
        .expect("n >= 2 gives a valid t")
        .inverse_cdf(0.975);
    t * (var / n as f64).sqrt()
}

/// Lag-1 autocorrelation of a series (NaN if it is constant or shorter than 3).
/// Batch means are trusted as independent only when it is small.
pub fn lag1_autocorrelation(values: &[f64]) -> f64 {
    let n = values.len();
    if n < 3 {
        return f64::NAN;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let var: f64 = values.iter().map(|v| (v - mean).powi(2)).sum();
    let cov: f64 = values
        .windows(2)
        .map(|w| (w[0] - mean) * (w[1] - mean))
        .sum();
    cov / var
}

/// A warm-up cut found by [`mser5`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    /// Observations to delete: the best cut in the first half of the series.
    pub delete: usize,
    /// False when the statistic is lower still in the second half: the series may be
    /// too short to reach a steady state (or heavy tails put a spike near its middle).
    pub settled: bool,
}

/// MSER-5 warm-up detection (White, 1997). The series is averaged in batches of 5; a
/// cut after d batches scores sum_{i>d} (Y_i - mean_d)^2 / (k - d)^2 (the squared
/// standard error of what remains); the best d in the first half of the k batches is
/// the cut. `None` for fewer than 4 batches.
pub fn mser5(series: &[f64]) -> Option<Cut> {
    let batches: Vec<f64> = series
        .chunks_exact(5)
        .map(|c| c.iter().sum::<f64>() / 5.0)
        .collect();
    let k = batches.len();
    if k < 4 {
        return None;
    }
    // Suffix sums give every candidate's score in one backward pass.
    let (mut s, mut s2) = (0.0, 0.0);
    let (mut best, mut best_first_half) = ((f64::INFINITY, k), (f64::INFINITY, k));
    for d in (0..k - 1).rev() {
        s += batches[d + 1];
        s2 += batches[d + 1] * batches[d + 1];
        let (x, m) = (batches[d], (k - d) as f64);
        let (sum, sum2) = (s + x, s2 + x * x);
        let score = (sum2 - sum * sum / m).max(0.0) / (m * m);
        if score <= best.0 {
            best = (score, d);
        }
        if d <= k / 2 && score <= best_first_half.0 {
            best_first_half = (score, d);
        }
    }
    Some(Cut {
        delete: 5 * best_first_half.1,
        settled: best.1 <= k / 2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_mean_and_merge() {
        let mut a = Tally::default();
        assert!(a.mean().is_nan());
        a.add(1.0);
        a.add(3.0);
        let mut b = Tally::default();
        b.add(5.0);
        a.merge(&b);
        assert_eq!((a.n, a.mean()), (3, 3.0));
    }

    #[test]
    fn half_width_matches_the_t_interval() {
        // mean 3, s = sqrt(2.5), n = 5, t(0.975, 4) = 2.7764451
        let hw = half_width_95(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert!((hw - 2.7764451 * (2.5f64 / 5.0).sqrt()).abs() < 1e-6);
        assert!(half_width_95(&[1.0]).is_nan());
        assert!(half_width_95(&[1.0, f64::INFINITY]).is_nan());
    }

    #[test]
    fn autocorrelation_of_alternating_and_trending_series() {
        let alternating: Vec<f64> = (0..100)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert!(lag1_autocorrelation(&alternating) < -0.9);
        let trend: Vec<f64> = (0..100).map(f64::from).collect();
        assert!(lag1_autocorrelation(&trend) > 0.9);
    }

    #[test]
    fn mser5_cuts_an_initial_transient() {
        // 500 observations decaying from 50 to the steady level 0, then 4500 around it.
        let mut x = 0.12345f64;
        let series: Vec<f64> = (0..5000)
            .map(|i| {
                x = (x * 7.31 + 0.17).fract();
                let transient = if i < 500 {
                    50.0 * (1.0 - i as f64 / 500.0)
                } else {
                    0.0
                };
                transient + x - 0.5
            })
            .collect();
        let cut = mser5(&series).unwrap();
        assert!(cut.settled);
        assert!(
            (400..=600).contains(&cut.delete),
            "truncation {}",
            cut.delete
        );
    }

    #[test]
    fn mser5_keeps_a_stationary_series_and_rejects_a_ramp() {
        let mut x = 0.5f64;
        let stationary: Vec<f64> = (0..5000)
            .map(|_| {
                x = (x * 7.31 + 0.17).fract();
                x
            })
            .collect();
        assert!(mser5(&stationary).unwrap().delete < 2500);
        let ramp: Vec<f64> = (0..5000).map(f64::from).collect();
        assert!(!mser5(&ramp).unwrap().settled);
        assert_eq!(mser5(&ramp[..15]), None);
    }
}
