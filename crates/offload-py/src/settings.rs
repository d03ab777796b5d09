//! Numeric settings Python passes by name as floats (the handoff model's `section.name`
//! keys, the flow detector's parameters), each written to a typed field of its struct.

/// A configuration value that arrives from Python as a float.
pub(crate) trait Field: Copy {
    fn from_f64(v: f64) -> Option<Self>;
    fn to_f64(self) -> f64;
}

impl Field for f64 {
    fn from_f64(v: f64) -> Option<Self> {
        Some(v)
    }
    fn to_f64(self) -> f64 {
        self
    }
}

impl Field for u32 {
    fn from_f64(v: f64) -> Option<Self> {
        (v.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&v)).then_some(v as u32)
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl Field for usize {
    fn from_f64(v: f64) -> Option<Self> {
        u32::from_f64(v).map(|n| n as usize)
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Field for u64 {
    fn from_f64(v: f64) -> Option<Self> {
        // Counts here stay far below 2^53, where floats are exact.
        (v.fract() == 0.0 && (0.0..9.007e15).contains(&v)).then_some(v as u64)
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

/// Write `v` to `slot`, or say that `key` needs a whole number.
pub(crate) fn assign<T: Field>(slot: &mut T, key: &str, v: f64) -> Result<(), String> {
    *slot = T::from_f64(v).ok_or_else(|| format!("{key} must be a whole number >= 0, got {v}"))?;
    Ok(())
}
