//! Response heads and canned error responses, appended to the caller's output buffer.
//!
//! Every response is `HTTP/1.1` (a server may answer a 1.0 request with its own version)
//! and always carries Content-Length, so a client never has to wait for the close to find
//! the end of a body.

use std::io::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use httpdate::HttpDate;

use super::Status;

/// The Date header value, formatted at most once per second (httpdate crate).
#[derive(Clone, Debug)]
pub struct Date {
    /// The second `text` shows, in Unix time.
    secs: u64,
    text: [u8; 29],
}

impl Date {
    /// The current date, already formatted.
    pub fn new() -> Self {
        let mut date = Date {
            secs: u64::MAX,
            text: [b' '; 29],
        };
        date.now();
        date
    }

    /// The current date as an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT", 29 bytes).
    pub fn now(&mut self) -> &[u8] {
        // A clock before 1970 is a broken clock; show the epoch rather than fail.
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if secs != self.secs {
            self.set(secs);
        }
        &self.text
    }

    fn set(&mut self, secs: u64) {
        self.secs = secs;
        let when = HttpDate::from(UNIX_EPOCH + Duration::from_secs(secs));
        // Writing into the fixed array cannot allocate; an IMF-fixdate is always 29 bytes,
        // so the write fills it exactly and cannot fail.
        let _ = write!(&mut self.text[..], "{when}");
    }
}

impl Default for Date {
    fn default() -> Self {
        Self::new()
    }
}

/// Appends a response head: status line (always "HTTP/1.1"), Server: offloadlab, Date,
/// Content-Type, Content-Length, and "Connection: keep-alive" or "Connection: close", then
/// the blank line.
pub fn head(
    out: &mut Vec<u8>,
    status: Status,
    content_type: &str,
    content_length: u64,
    keep_alive: bool,
    date: &[u8],
) {
    head_with(
        out,
        status,
        content_type,
        content_length,
        keep_alive,
        date,
        b"",
    );
}

/// [`head`] with `extra`, whole header lines ending in CRLF, before Connection.
pub fn head_with(
    out: &mut Vec<u8>,
    status: Status,
    content_type: &str,
    content_length: u64,
    keep_alive: bool,
    date: &[u8],
    extra: &[u8],
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    push_u64(out, u64::from(status.0));
    out.push(b' ');
    out.extend_from_slice(status.reason().as_bytes());
    out.extend_from_slice(b"\r\nServer: offloadlab\r\nDate: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\nContent-Type: ");
    out.extend_from_slice(content_type.as_bytes());
    out.extend_from_slice(b"\r\nContent-Length: ");
    push_u64(out, content_length);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(extra);
    out.extend_from_slice(if keep_alive {
        b"Connection: keep-alive\r\n\r\n".as_slice()
    } else {
        b"Connection: close\r\n\r\n".as_slice()
    });
}

/// Appends a complete error response: a head and a one-line text/plain body such as
/// "404 Not Found\n" (no body when `head_only`, though Content-Length still states its
/// length, as a response to HEAD must). 405 also carries "Allow: GET, HEAD".
pub fn error(out: &mut Vec<u8>, status: Status, keep_alive: bool, head_only: bool, date: &[u8]) {
    let reason = status.reason().as_bytes();
    let body_len = digits(u64::from(status.0)) + 1 + reason.len() + 1;
    let extra: &[u8] = if status == Status::METHOD_NOT_ALLOWED {
        b"Allow: GET, HEAD\r\n"
    } else {
        b""
    };
    head_with(
        out,
        status,
        "text/plain",
        body_len as u64,
        keep_alive,
        date,
        extra,
    );
    if !head_only {
        push_u64(out, u64::from(status.0));
        out.push(b' ');
        out.extend_from_slice(reason);
        out.push(b'\n');
    }
}

/// Content type from the path's extension: html/htm, txt, css, js, json, png, jpg/jpeg,
/// gif, svg, else application/octet-stream.
pub fn content_type(path: &[u8]) -> &'static str {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    let Some(dot) = name.iter().rposition(|&b| b == b'.') else {
        return "application/octet-stream";
    };
    let ext = &name[dot + 1..];
    const TYPES: [(&str, &str); 11] = [
        ("html", "text/html"),
        ("htm", "text/html"),
        ("txt", "text/plain"),
        ("css", "text/css"),
        ("js", "text/javascript"),
        ("json", "application/json"),
        ("png", "image/png"),
        ("jpg", "image/jpeg"),
        ("jpeg", "image/jpeg"),
        ("gif", "image/gif"),
        ("svg", "image/svg+xml"),
    ];
    TYPES
        .iter()
        .find(|(e, _)| ext.eq_ignore_ascii_case(e.as_bytes()))
        .map_or("application/octet-stream", |&(_, t)| t)
}

/// Number of decimal digits of `n`.
fn digits(mut n: u64) -> usize {
    let mut count = 1;
    while n >= 10 {
        n /= 10;
        count += 1;
    }
    count
}

/// Appends `n` in decimal, through a stack buffer rather than the formatting machinery.
/// Appends `ETag: "<16 hex digits>"` and its CRLF.
pub fn etag(out: &mut Vec<u8>, tag: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(b"ETag: \"");
    for shift in (0..16).rev() {
        out.push(HEX[(tag >> (4 * shift)) as usize & 0xf]);
    }
    out.extend_from_slice(b"\"\r\n");
}

/// Appends `Cache-Control: max-age=<seconds>` and its CRLF.
pub fn max_age(out: &mut Vec<u8>, seconds: u64) {
    out.extend_from_slice(b"Cache-Control: max-age=");
    push_u64(out, seconds);
    out.extend_from_slice(b"\r\n");
}

pub fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20]; // u64::MAX has 20 digits
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &[u8; 29] = b"Sun, 06 Nov 1994 08:49:37 GMT";

    /// Parses `out` as one response: status code, headers as (lowercase name, value), head
    /// length.
    fn parse_response(out: &[u8]) -> (u16, Vec<(String, String)>, usize) {
        let mut fields = [httparse::EMPTY_HEADER; 16];
        let mut resp = httparse::Response::new(&mut fields);
        let len = match resp.parse(out).expect("valid response") {
            httparse::Status::Complete(len) => len,
            httparse::Status::Partial => panic!("incomplete head"),
        };
        assert_eq!(resp.version, Some(1));
        let headers = resp
            .headers
            .iter()
            .map(|h| {
                let value = String::from_utf8(h.value.to_vec()).unwrap();
                (h.name.to_ascii_lowercase(), value)
            })
            .collect();
        (resp.code.unwrap(), headers, len)
    }

    fn field<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn date_is_an_imf_fixdate_of_now() {
        let mut date = Date::new();
        let text = date.now().to_vec();
        assert_eq!(text.len(), 29);
        let parsed = httpdate::parse_http_date(std::str::from_utf8(&text).unwrap()).unwrap();
        let now = SystemTime::now();
        let off = now.duration_since(parsed).unwrap_or_else(|e| e.duration());
        assert!(off < Duration::from_secs(2), "{off:?}");
    }

    #[test]
    fn date_formats_a_known_second() {
        let mut date = Date::new();
        date.set(784_111_777);
        assert_eq!(&date.text, DATE);
        date.set(0);
        assert_eq!(&date.text, b"Thu, 01 Jan 1970 00:00:00 GMT");
    }

    #[test]
    fn date_is_reused_within_a_second() {
        let mut date = Date::new();
        let second = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs()
        };
        // Plant a marker for the current second: now() must hand it back untouched. Retry
        // in case the second turns between the two clock reads.
        for _ in 0..3 {
            let secs = second();
            date.secs = secs;
            date.text = *DATE;
            let shown = date.now().to_vec();
            if second() == secs {
                assert_eq!(shown, DATE.as_slice());
                return;
            }
        }
        panic!("the clock kept turning");
    }

    #[test]
    fn head_parses_back() {
        let mut out = b"previous".to_vec();
        head(&mut out, Status::OK, "text/html", 1234, true, DATE);
        assert!(out.starts_with(b"previous"));
        let resp = &out[8..];
        let (code, headers, len) = parse_response(resp);
        assert_eq!(code, 200);
        assert_eq!(len, resp.len());
        assert!(resp.starts_with(b"HTTP/1.1 200 OK\r\n"));
        assert_eq!(field(&headers, "server"), Some("offloadlab"));
        assert_eq!(
            field(&headers, "date").map(str::as_bytes),
            Some(DATE.as_slice())
        );
        assert_eq!(field(&headers, "content-type"), Some("text/html"));
        assert_eq!(field(&headers, "content-length"), Some("1234"));
        assert_eq!(field(&headers, "connection"), Some("keep-alive"));
    }

    #[test]
    fn head_states_close_and_big_lengths() {
        let mut out = Vec::new();
        head(
            &mut out,
            Status::OK,
            "application/octet-stream",
            u64::MAX,
            false,
            DATE,
        );
        let (_, headers, _) = parse_response(&out);
        assert_eq!(field(&headers, "connection"), Some("close"));
        assert_eq!(
            field(&headers, "content-length"),
            Some(u64::MAX.to_string().as_str())
        );
    }

    #[test]
    fn head_does_not_allocate_with_room() {
        let mut out = Vec::with_capacity(512);
        let cap = out.capacity();
        let mut date = Date::new();
        for _ in 0..100 {
            out.clear();
            head(&mut out, Status::OK, "text/plain", 99, true, date.now());
            error(&mut out, Status::NOT_FOUND, true, false, date.now());
        }
        assert_eq!(out.capacity(), cap);
    }

    #[test]
    fn error_responses_parse_back() {
        let all = [
            Status::BAD_REQUEST,
            Status::NOT_FOUND,
            Status::METHOD_NOT_ALLOWED,
            Status::PAYLOAD_TOO_LARGE,
            Status::URI_TOO_LONG,
            Status::HEADER_FIELDS_TOO_LARGE,
            Status::INTERNAL_ERROR,
            Status::UNAVAILABLE,
            Status::VERSION_NOT_SUPPORTED,
        ];
        for status in all {
            for keep_alive in [true, false] {
                let mut out = Vec::new();
                error(&mut out, status, keep_alive, false, DATE);
                let (code, headers, len) = parse_response(&out);
                assert_eq!(code, status.0);
                let body = &out[len..];
                assert_eq!(
                    body,
                    format!("{} {}\n", status.0, status.reason()).as_bytes()
                );
                let stated: usize = field(&headers, "content-length").unwrap().parse().unwrap();
                assert_eq!(stated, body.len());
                assert_eq!(field(&headers, "content-type"), Some("text/plain"));
                let conn = if keep_alive { "keep-alive" } else { "close" };
                assert_eq!(field(&headers, "connection"), Some(conn));
                let allow = field(&headers, "allow");
                if status == Status::METHOD_NOT_ALLOWED {
                    assert_eq!(allow, Some("GET, HEAD"));
                } else {
                    assert_eq!(allow, None);
                }

                // For HEAD the same head, no body.
                let mut bare = Vec::new();
                error(&mut bare, status, keep_alive, true, DATE);
                assert_eq!(bare, out[..len]);
            }
        }
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::MAX] {
            let mut out = Vec::new();
            push_u64(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
            assert_eq!(digits(n), out.len());
        }
    }

    #[test]
    fn content_types_by_extension() {
        let cases: [(&[u8], &str); 16] = [
            (b"/index.html", "text/html"),
            (b"/a/b.HTM", "text/html"),
            (b"/r.txt", "text/plain"),
            (b"/s.css", "text/css"),
            (b"/app.js", "text/javascript"),
            (b"/d.json", "application/json"),
            (b"/i.png", "image/png"),
            (b"/i.jpg", "image/jpeg"),
            (b"/i.JPEG", "image/jpeg"),
            (b"/i.gif", "image/gif"),
            (b"/i.svg", "image/svg+xml"),
            (b"/blob.bin", "application/octet-stream"),
            (b"/noext", "application/octet-stream"),
            (b"/dir.html/file", "application/octet-stream"),
            (b"/x.tar.gz", "application/octet-stream"),
            (b"", "application/octet-stream"),
        ];
        for (path, want) in cases {
            assert_eq!(
                content_type(path),
                want,
                "{}",
                String::from_utf8_lossy(path)
            );
        }
    }
}
