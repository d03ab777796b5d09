//! Byte buffers recycled between requests, so the hot path does not allocate: a
//! response buffer, once written, becomes a later request's buffer, and in engine mode
//! buffers travel between host and engine inside commands and events and are reused on
//! whichever side they end up.

/// Spare buffers; at most `MAX` are kept, the rest are freed.
#[derive(Debug, Default)]
pub struct Pool(Vec<Vec<u8>>);

const MAX: usize = 4096;

impl Pool {
    /// An empty buffer, reused when there is one.
    pub fn take(&mut self) -> Vec<u8> {
        self.0.pop().unwrap_or_default()
    }

    pub fn give(&mut self, mut buf: Vec<u8>) {
        if self.0.len() < MAX {
            buf.clear();
            self.0.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_empty_with_their_capacity() {
        let mut pool = Pool::default();
        let mut buf = pool.take();
        buf.extend_from_slice(&[7; 1000]);
        pool.give(buf);
        let again = pool.take();
        assert!(again.is_empty() && again.capacity() >= 1000);
    }
}
