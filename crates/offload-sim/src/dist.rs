//! Service-time distributions, with the same parameters and meaning as `offloadlab.dist`.
//!
//! Python parses and checks a spec; Rust gets the typed value through the constructors
//! below (which check again, since they are a public API) and only samples. All times
//! are in seconds.

use std::sync::Arc;

use rand::Rng;
use rand_distr::{Exp1, StandardNormal};

/// A service-time distribution, ready to sample (derived constants precomputed).
#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    /// Exponential with mean `mean`.
    Exp { mean: f64 },
    /// Always `value`.
    Det { value: f64 },
    /// ln X ~ Normal(nu, sigma^2).
    Lognormal { nu: f64, sigma: f64 },
    /// P[X > x] = (k/x)^alpha for x >= k; sampled by inversion, x = k u^(-1/alpha).
    Pareto { alpha: f64, k: f64 },
    /// Pareto truncated to [lo, hi]; `tail` = 1 - (lo/hi)^alpha is the mass kept.
    BPareto {
        alpha: f64,
        lo: f64,
        hi: f64,
        tail: f64,
    },
    /// Resampling (bootstrap) of measured values.
    Empirical { values: Arc<[f64]> },
    /// Part i with probability w_i; `cumulative` holds the running sums of the weights.
    Mixture {
        cumulative: Arc<[f64]>,
        parts: Arc<[Dist]>,
    },
}

impl Dist {
    pub fn exp(mean: f64) -> Result<Dist, String> {
        check(
            mean > 0.0 && mean.is_finite(),
            "exp mean must be finite and > 0",
        )?;
        Ok(Dist::Exp { mean })
    }

    pub fn det(value: f64) -> Result<Dist, String> {
        check(
            value >= 0.0 && value.is_finite(),
            "det value must be finite and >= 0",
        )?;
        Ok(Dist::Det { value })
    }

    pub fn lognormal(nu: f64, sigma: f64) -> Result<Dist, String> {
        check(nu.is_finite(), "lognormal nu must be finite")?;
        check(
            sigma >= 0.0 && sigma.is_finite(),
            "lognormal sigma must be finite and >= 0",
        )?;
        Ok(Dist::Lognormal { nu, sigma })
    }

    pub fn pareto(alpha: f64, k: f64) -> Result<Dist, String> {
        check(
            alpha > 1.0 && alpha.is_finite(),
            "pareto alpha must be > 1 (finite mean)",
        )?;
        check(k > 0.0 && k.is_finite(), "pareto k must be finite and > 0")?;
        Ok(Dist::Pareto { alpha, k })
    }

    pub fn bpareto(alpha: f64, lo: f64, hi: f64) -> Result<Dist, String> {
        check(
            alpha > 0.0 && alpha.is_finite(),
            "bpareto alpha must be finite and > 0",
        )?;
        check(
            0.0 < lo && lo < hi && hi.is_finite(),
            "bpareto needs 0 < lo < hi",
        )?;
        let tail = -(-alpha * (hi / lo).ln()).exp_m1();
        Ok(Dist::BPareto {
            alpha,
            lo,
            hi,
            tail,
        })
    }

    pub fn empirical(values: Vec<f64>) -> Result<Dist, String> {
        check(!values.is_empty(), "empirical needs at least one value")?;
        check(
            values.iter().all(|v| v.is_finite() && *v >= 0.0),
            "empirical values must be finite and >= 0",
        )?;
        Ok(Dist::Empirical {
            values: values.into(),
        })
    }

    /// `parts[i]` with probability `weights[i] / sum(weights)`: e.g. a per-request cost
    /// that depends on the request's class, over the class mix.
    pub fn mixture(weights: Vec<f64>, parts: Vec<Dist>) -> Result<Dist, String> {
        check(
            !parts.is_empty() && weights.len() == parts.len(),
            "mixture needs one weight per part, and at least one part",
        )?;
        check(
            weights.iter().all(|w| w.is_finite() && *w >= 0.0),
            "mixture weights must be finite and >= 0",
        )?;
        let total: f64 = weights.iter().sum();
        check(total > 0.0, "mixture weights must not all be 0")?;
        let mut sum = 0.0;
        let cumulative = weights.iter().map(|w| {
            sum += w / total;
            sum
        });
        Ok(Dist::Mixture {
            cumulative: cumulative.collect(),
            parts: parts.into(),
        })
    }

    /// One draw, in seconds.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match self {
            Dist::Exp { mean } => mean * rng.sample::<f64, _>(Exp1),
            Dist::Det { value } => *value,
            Dist::Lognormal { nu, sigma } => {
                (nu + sigma * rng.sample::<f64, _>(StandardNormal)).exp()
            }
            // 1 - u lies in (0, 1], so the power never divides by zero.
            Dist::Pareto { alpha, k } => k * (1.0 - rng.random::<f64>()).powf(-1.0 / alpha),
            Dist::BPareto {
                alpha, lo, tail, ..
            } => lo * (1.0 - rng.random::<f64>() * tail).powf(-1.0 / alpha),
            Dist::Empirical { values } => values[rng.random_range(0..values.len())],
            Dist::Mixture { cumulative, parts } => {
                let u: f64 = rng.random();
                let i = cumulative.partition_point(|&c| c <= u).min(parts.len() - 1);
                parts[i].sample(rng)
            }
        }
    }

    /// Whether every draw is 0: an absent cost, which the simulator never samples.
    pub fn is_zero(&self) -> bool {
        self.mean() == 0.0
    }

    /// E[X]: the simulator uses it to tell a stable queue from a saturated one.
    pub fn mean(&self) -> f64 {
        match self {
            Dist::Exp { mean } => *mean,
            Dist::Det { value } => *value,
            Dist::Lognormal { nu, sigma } => (nu + sigma * sigma / 2.0).exp(),
            Dist::Pareto { alpha, k } => alpha * k / (alpha - 1.0),
            Dist::BPareto {
                alpha,
                lo,
                hi,
                tail,
            } => {
                // alpha lo r phi((1 - alpha) r) / tail, phi(t) = (e^t - 1)/t, r = ln(hi/lo)
                let r = (hi / lo).ln();
                let t = (1.0 - alpha) * r;
                let phi = if t == 0.0 { 1.0 } else { t.exp_m1() / t };
                alpha * lo * r * phi / tail
            }
            Dist::Empirical { values } => values.iter().sum::<f64>() / values.len() as f64,
            Dist::Mixture { cumulative, parts } => {
                let mut below = 0.0;
                let weight = cumulative.iter().map(|c| {
                    let w = c - below;
                    below = *c;
                    w
                });
                weight.zip(parts.iter()).map(|(w, d)| w * d.mean()).sum()
            }
        }
    }
}

fn check(ok: bool, message: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(message.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Sample mean and its standard error over n draws.
    fn sample_mean(d: &Dist, n: usize) -> (f64, f64) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let (mut s, mut s2) = (0.0, 0.0);
        for _ in 0..n {
            let x = d.sample(&mut rng);
            s += x;
            s2 += x * x;
        }
        let mean = s / n as f64;
        (mean, ((s2 / n as f64 - mean * mean) / n as f64).sqrt())
    }

    #[test]
    fn sample_means_match_closed_forms() {
        let cases = [
            Dist::exp(1e-3).unwrap(),
            Dist::lognormal((9e-3f64).ln() - 0.5, 1.0).unwrap(),
            Dist::pareto(3.5, 5.4e-3).unwrap(),
            Dist::bpareto(1.2, 1e-4, 8e-2).unwrap(),
            Dist::empirical(vec![1e-3, 2e-3, 6e-3]).unwrap(),
            Dist::mixture(
                vec![1.0, 3.0],
                vec![Dist::det(1e-3).unwrap(), Dist::exp(5e-3).unwrap()],
            )
            .unwrap(),
        ];
        for d in &cases {
            let (mean, se) = sample_mean(d, 400_000);
            assert!(
                (mean - d.mean()).abs() < 5.0 * se,
                "{d:?}: {mean} vs {}",
                d.mean()
            );
        }
    }

    #[test]
    fn bounded_pareto_stays_in_bounds() {
        let d = Dist::bpareto(1.2, 1e-4, 8e-2).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        assert!((0..100_000)
            .map(|_| d.sample(&mut rng))
            .all(|x| (1e-4..=8e-2).contains(&x)));
    }

    #[test]
    fn deterministic_is_constant_and_bad_parameters_are_refused() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        assert_eq!(Dist::det(2e-3).unwrap().sample(&mut rng), 2e-3);
        assert!(Dist::exp(0.0).is_err());
        assert!(Dist::pareto(1.0, 1e-3).is_err());
        assert!(Dist::bpareto(1.2, 2e-3, 1e-3).is_err());
        assert!(Dist::lognormal(0.0, -1.0).is_err());
        assert!(Dist::empirical(vec![]).is_err());
        assert!(Dist::empirical(vec![f64::NAN]).is_err());
        assert!(Dist::mixture(vec![1.0], vec![]).is_err());
        assert!(Dist::mixture(vec![0.0], vec![Dist::det(1e-3).unwrap()]).is_err());
    }

    #[test]
    fn a_mixture_has_the_weighted_mean_of_its_parts() {
        let parts = vec![Dist::det(1e-3).unwrap(), Dist::det(5e-3).unwrap()];
        let d = Dist::mixture(vec![1.0, 3.0], parts).unwrap();
        assert!((d.mean() - 4e-3).abs() < 1e-15);
        assert!(!d.is_zero());
    }
}
