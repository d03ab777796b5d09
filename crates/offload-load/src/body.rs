//! Response body framing (RFC 9112 §6): where a body ends, and which of its bytes are
//! content. Content is handed to a sink (a byte count and, when checked, a hash) as it
//! streams by; nothing is buffered.

/// How the body in progress is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Body {
    /// No body (HEAD, 1xx, 204, 304).
    Empty,
    /// `Content-Length`: this many bytes still to come.
    Length(u64),
    /// `Transfer-Encoding: chunked`, at this point of the chunk grammar.
    Chunked(Chunk),
    /// Neither: the body is everything until the server closes.
    UntilClose,
}

/// Where a chunked decoder is: `size [; ext] CRLF data CRLF ... 0 CRLF trailers CRLF`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Chunk {
    /// Reading a chunk size in hex (`digits` seen so far).
    Size { size: u64, digits: u8 },
    /// Skipping the rest of the size line (extensions) up to LF.
    SizeLine { size: u64 },
    /// Inside a chunk's data.
    Data { left: u64 },
    /// After a chunk's data: CRLF.
    DataEnd,
    /// After the last chunk: at the start of a trailer line or the final CRLF.
    TrailerStart,
    /// Inside a trailer field line.
    Trailer,
}

/// Result of feeding bytes to a body.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Fed {
    /// All bytes were used and more are needed.
    More,
    /// The body ended after this many of the bytes.
    Done(usize),
}

/// A chunk size of more than 15 hex digits is refused (nobody sends 2^60 bytes).
const MAX_SIZE_DIGITS: u8 = 15;

impl Body {
    pub(crate) fn chunked() -> Body {
        Body::Chunked(Chunk::Size { size: 0, digits: 0 })
    }

    /// Feeds the next bytes of the response; content goes to `sink`. `Err` on chunk
    /// framing that does not parse.
    pub(crate) fn feed(&mut self, data: &[u8], sink: &mut impl FnMut(&[u8])) -> Result<Fed, ()> {
        match self {
            Body::Empty => Ok(Fed::Done(0)),
            Body::UntilClose => {
                sink(data);
                Ok(Fed::More)
            }
            Body::Length(left) => {
                let n = (*left).min(data.len() as u64) as usize;
                sink(&data[..n]);
                *left -= n as u64;
                Ok(if *left == 0 { Fed::Done(n) } else { Fed::More })
            }
            Body::Chunked(state) => feed_chunked(state, data, sink),
        }
    }

    /// The connection closed: true if that completes the body.
    pub(crate) fn ends_at_close(&self) -> bool {
        matches!(self, Body::UntilClose | Body::Empty)
    }
}

fn feed_chunked(state: &mut Chunk, data: &[u8], sink: &mut impl FnMut(&[u8])) -> Result<Fed, ()> {
    let mut i = 0;
    while i < data.len() {
        let b = data[i];
        *state = match *state {
            Chunk::Size { size, digits } => match (b as char).to_digit(16) {
                Some(d) if digits < MAX_SIZE_DIGITS => Chunk::Size {
                    size: size * 16 + u64::from(d),
                    digits: digits + 1,
                },
                Some(_) => return Err(()),
                None if digits == 0 => return Err(()),
                None if b == b'\n' => after_size(size),
                None if matches!(b, b'\r' | b';' | b' ' | b'\t') => Chunk::SizeLine { size },
                None => return Err(()),
            },
            Chunk::SizeLine { size } => match memchr(b'\n', &data[i..]) {
                Some(at) => {
                    i += at;
                    after_size(size)
                }
                None => {
                    i = data.len();
                    continue;
                }
            },
            Chunk::Data { left } => {
                let n = left.min((data.len() - i) as u64) as usize;
                sink(&data[i..i + n]);
                i += n;
                *state = if left == n as u64 {
                    Chunk::DataEnd
                } else {
                    Chunk::Data {
                        left: left - n as u64,
                    }
                };
                continue;
            }
            Chunk::DataEnd => match b {
                b'\r' => Chunk::DataEnd,
                b'\n' => Chunk::Size { size: 0, digits: 0 },
                _ => return Err(()),
            },
            Chunk::TrailerStart => match b {
                b'\r' => Chunk::TrailerStart,
                b'\n' => return Ok(Fed::Done(i + 1)),
                _ => Chunk::Trailer,
            },
            Chunk::Trailer => match memchr(b'\n', &data[i..]) {
                Some(at) => {
                    i += at;
                    Chunk::TrailerStart
                }
                None => {
                    i = data.len();
                    continue;
                }
            },
        };
        i += 1;
    }
    Ok(Fed::More)
}

/// The state after a size line: data, or (size 0) the trailer section.
fn after_size(size: u64) -> Chunk {
    if size == 0 {
        Chunk::TrailerStart
    } else {
        Chunk::Data { left: size }
    }
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` in pieces of `step` bytes; returns the content and the bytes used.
    fn decode(mut body: Body, wire: &[u8], step: usize) -> Result<(Vec<u8>, usize), ()> {
        let mut content = Vec::new();
        let mut used = 0;
        for piece in wire.chunks(step) {
            match body.feed(piece, &mut |c| content.extend_from_slice(c))? {
                Fed::More => used += piece.len(),
                Fed::Done(n) => return Ok((content, used + n)),
            }
        }
        Ok((content, usize::MAX)) // not finished
    }

    #[test]
    fn chunked_in_any_pieces() {
        let wire = b"5\r\nhello\r\nA;ext=1\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        for step in 1..wire.len() {
            let (content, used) = decode(Body::chunked(), wire, step).unwrap();
            assert_eq!(content, b"hello0123456789", "step {step}");
            assert_eq!(used, wire.len() - 4, "step {step}");
        }
        let (content, used) = decode(Body::chunked(), b"0\r\n\r\n", 64).unwrap();
        assert_eq!((content.len(), used), (0, 5));
    }

    #[test]
    fn chunked_errors() {
        assert!(decode(Body::chunked(), b"zz\r\n", 64).is_err());
        assert!(decode(Body::chunked(), b"3\r\nabcX\r\n", 64).is_err());
        assert!(decode(Body::chunked(), b"1000000000000000\r\n", 64).is_err());
    }

    #[test]
    fn length_and_close() {
        let (content, used) = decode(Body::Length(3), b"abcdef", 2).unwrap();
        assert_eq!((content, used), (b"abc".to_vec(), 3));
        let (content, used) = decode(Body::UntilClose, b"abc", 2).unwrap();
        assert_eq!((content, used), (b"abc".to_vec(), usize::MAX));
        assert!(Body::UntilClose.ends_at_close() && !Body::Length(1).ends_at_close());
    }
}
