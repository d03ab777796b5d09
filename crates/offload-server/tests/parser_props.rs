//! Properties of the request parser over generated heads: well-formed ones built from
//! the grammar's pieces, then mutated (bytes flipped, inserted, dropped, cut).
//!
//! - parsing never panics;
//! - no prefix of a rejected head is accepted (the server would have answered it
//!   before seeing the bytes that make it bad);
//! - the bytes after an accepted head never change it (pipelining);
//! - a head that waits for more bytes never turns acceptable by losing some.
//!
//! `OFFLOAD_FUZZ_HEADS` sets how many heads (100,000 by default, about a second in a
//! release build); `bench/fuzz_parser` runs ten million.

use offload_server::http::{parse, Parsed};
use offload_server::Limits;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Pieces of heads, good ones first: `piece` takes one of the first `GOOD` most of
/// the time, so that every outcome is common.
const METHODS: [&str; 6] = ["GET", "HEAD", "POST", "get", "G\u{0}T", "OPTIONS"];
const TARGETS: [&str; 9] = [
    "/",
    "/a/b.bin",
    "/p?work=12&query=abc",
    "http://h:80/p?q",
    "//x//y",
    "/%41%2e%2E/x",
    "*",
    "h:443",
    "/a b",
];
const VERSIONS: [&str; 6] = [
    "HTTP/1.1",
    "HTTP/1.0",
    "HTTP/2.0",
    "HTTP/1.",
    "http/1.1",
    "HTTP/1.12",
];
const FIELDS: [&str; 12] = [
    "Connection: close",
    "Connection: keep-alive",
    "If-None-Match: \"00000000000000ff\"",
    "X-Empty:",
    "X-Tab:\tv",
    "Content-Length: 0",
    "Content-Length: 5",
    "Transfer-Encoding: chunked",
    "Host: t",
    " Folded: x",
    "No-Colon",
    "Bad Name: x",
];
const GOOD: usize = 2;

fn piece(rng: &mut Xoshiro256PlusPlus, xs: &[&'static str]) -> &'static str {
    if rng.random_bool(0.8) {
        xs[rng.random_range(0..GOOD)]
    } else {
        xs[rng.random_range(0..xs.len())]
    }
}

fn head(rng: &mut Xoshiro256PlusPlus) -> Vec<u8> {
    let mut text = format!(
        "{} {} {}\r\n",
        piece(rng, &METHODS),
        piece(rng, &TARGETS),
        piece(rng, &VERSIONS)
    );
    if rng.random_bool(0.9) {
        text += "Host: t\r\n";
    }
    for _ in 0..rng.random_range(0..4) {
        text += piece(rng, &FIELDS);
        text += if rng.random_bool(0.95) { "\r\n" } else { "\n" };
    }
    text += "\r\n";
    let mut bytes = text.into_bytes();
    let mutations = if rng.random_bool(0.5) {
        0
    } else {
        rng.random_range(1..4)
    };
    for _ in 0..mutations {
        if bytes.is_empty() {
            break;
        }
        let at = rng.random_range(0..bytes.len());
        match rng.random_range(0..4) {
            0 => bytes[at] = rng.random(),
            1 => bytes.insert(at, rng.random()),
            2 => {
                bytes.remove(at);
            }
            _ => bytes.truncate(at.max(1)),
        }
    }
    bytes
}

fn accepted(parsed: &Parsed) -> bool {
    matches!(parsed, Parsed::Done(_))
}

#[test]
fn generated_heads_keep_the_parsers_promises() {
    let count: usize = std::env::var("OFFLOAD_FUZZ_HEADS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let limits = Limits::default();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(27);
    let (mut path, mut other) = (Vec::new(), Vec::new());
    let mut seen = [0usize; 3];
    for i in 0..count {
        let buf = head(&mut rng);
        let whole = parse(&buf, &limits, &mut path);
        seen[match whole {
            Parsed::Partial => 0,
            Parsed::Done(_) => 1,
            Parsed::Reject(_) => 2,
        }] += 1;
        // Prefixes: a few at random, and every one for one head in a hundred.
        let cuts: Vec<usize> = if i % 100 == 0 {
            (0..buf.len()).collect()
        } else {
            (0..4).map(|_| rng.random_range(0..=buf.len())).collect()
        };
        for cut in cuts {
            let part = parse(&buf[..cut], &limits, &mut other);
            match &whole {
                Parsed::Reject(_) => assert!(
                    !accepted(&part),
                    "prefix {cut} of a rejected head accepted: {:?}",
                    String::from_utf8_lossy(&buf)
                ),
                Parsed::Partial => assert!(
                    !accepted(&part),
                    "a shorter buffer accepted where the whole one waits: {:?}",
                    String::from_utf8_lossy(&buf)
                ),
                // A prefix accepted: it is the same request, with bytes after it.
                Parsed::Done(head) if accepted(&part) => {
                    assert_eq!((&part, &other), (&Parsed::Done(*head), &path))
                }
                Parsed::Done(_) => {}
            }
        }
        if let Parsed::Done(head) = whole {
            let mut longer = buf[..head.len].to_vec();
            for _ in 0..rng.random_range(1..64) {
                longer.push(rng.random());
            }
            let again = parse(&longer, &limits, &mut other);
            assert_eq!(
                again,
                Parsed::Done(head),
                "{:?}",
                String::from_utf8_lossy(&longer)
            );
            assert_eq!(other, path);
        }
    }
    // The generator reaches every outcome often, or the properties say little.
    assert!(
        seen.iter().all(|&n| n > count / 20),
        "partial, done, rejected: {seen:?}"
    );
    eprintln!("{count} heads: partial, done, rejected = {seen:?}");
}
