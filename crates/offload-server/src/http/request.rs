//! Request heads: parse with httparse, then apply the server's rules (limits, method,
//! origin- or absolute-form target, Host, no bodies, keep-alive) and percent-decode the
//! path.
//!
//! Each call looks at one request at the start of the buffer and reports how many bytes
//! it used, so pipelined requests are parsed one after the other. A rejected request
//! reports no length: the caller answers it and closes the connection, since the rest of
//! the buffer can no longer be trusted to start at a request boundary.

use std::mem::MaybeUninit;
use std::time::Duration;

use super::Status;
use crate::config::Limits;

/// Header fields parsed per request at most; `Limits::max_headers` above it acts as this.
/// The field array lives on the stack so parsing does not allocate.
pub const MAX_HEADERS: usize = 128;

/// The methods the server serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Head and body.
    Get,
    /// The head GET would send, without the body.
    Head,
}

/// What the caller needs from an accepted request besides its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// GET or HEAD (anything else was rejected).
    pub method: Method,
    /// The `y` of `HTTP/1.y` (0 or 1).
    pub minor: u8,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// Bytes of the buffer this request used (head only: bodies are refused).
    pub len: usize,
    /// The first entity tag of `If-None-Match` in the form this server issues
    /// (`"` + 16 hex digits + `"`, weak or not); other tags can never match, so they are
    /// left out.
    pub if_none_match: Option<u64>,
    /// A dynamic page: the query asked for application work (`work=MICROSECONDS`).
    pub dynamic: Option<Dynamic>,
}

/// What a dynamic page's query asks of the origin:
/// `?work=MICROSECONDS[&query=COUNT[&key=ID]][&cacheable=1]`. The page's body is the
/// file at the path, produced after `work_us` of CPU and `queries` database queries
/// for the items from `key` on (a random key when none is given). `work_us` is at most
/// `Limits::max_work`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dynamic {
    pub work_us: u32,
    pub queries: u32,
    pub key: Option<u64>,
    /// The origin marks the page cacheable (otherwise `Cache-Control: no-store`).
    pub cacheable: bool,
}

/// The outcome of [`parse`].
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// The head is not complete yet and nothing is wrong so far: read more.
    Partial,
    /// An acceptable request.
    Done(Head),
    /// Answer with this status and close the connection.
    Reject(Status),
}

/// Parses the request at the start of `buf`; on Done, `path` holds the percent-decoded path
/// (query string removed).
///
/// `path` is cleared and refilled, so a caller that keeps it across requests stops
/// allocating once it has grown to its longest path. `limits.max_headers` is capped at
/// [`MAX_HEADERS`].
pub fn parse(buf: &[u8], limits: &Limits, path: &mut Vec<u8>) -> Parsed {
    // Uninitialised slots spare a 4 KiB memset per request; httparse only reads back the
    // slots it has written.
    let mut slots = [MaybeUninit::<httparse::Header>::uninit(); MAX_HEADERS];
    let slots = &mut slots[..limits.max_headers.min(MAX_HEADERS)];
    let mut req = httparse::Request::new(&mut []);
    let parsed =
        httparse::ParserConfig::default().parse_request_with_uninit_headers(&mut req, buf, slots);
    // The target is checked first everywhere so that a long URI gets 414 even when it
    // also makes the head too long.
    match parsed {
        Ok(httparse::Status::Complete(len)) => {
            if target_too_long(&req, limits) {
                Parsed::Reject(Status::URI_TOO_LONG)
            } else if len > limits.max_header_bytes {
                Parsed::Reject(Status::HEADER_FIELDS_TOO_LARGE)
            } else {
                match accept(&req, len, limits, path) {
                    Ok(head) => Parsed::Done(head),
                    Err(status) => Parsed::Reject(status),
                }
            }
        }
        Ok(httparse::Status::Partial) => partial(buf, &req, limits),
        Err(httparse::Error::TooManyHeaders) => {
            if target_too_long(&req, limits) {
                Parsed::Reject(Status::URI_TOO_LONG)
            } else {
                Parsed::Reject(Status::HEADER_FIELDS_TOO_LARGE)
            }
        }
        Err(httparse::Error::Version) => bad_version(buf, &req, limits),
        Err(_) => Parsed::Reject(Status::BAD_REQUEST),
    }
}

fn target_too_long(req: &httparse::Request, limits: &Limits) -> bool {
    req.path.is_some_and(|t| t.len() > limits.max_uri_bytes)
}

/// Where `part`, a slice of `buf`, starts in it.
fn offset_in(buf: &[u8], part: &str) -> usize {
    part.as_ptr() as usize - buf.as_ptr() as usize
}

/// An incomplete head: refuse it as soon as it can no longer fit the limits, so a client
/// cannot make us buffer without bound.
fn partial(buf: &[u8], req: &httparse::Request, limits: &Limits) -> Parsed {
    let target_so_far = match (req.method, req.path) {
        (_, Some(target)) => target.len(),
        // httparse stops at the first byte that cannot be in a target, so when it wants
        // more, everything after "METHOD " is target.
        (Some(method), None) => buf
            .len()
            .saturating_sub(offset_in(buf, method) + method.len() + 1),
        _ => 0,
    };
    if target_so_far > limits.max_uri_bytes {
        Parsed::Reject(Status::URI_TOO_LONG)
    } else if buf.len() >= limits.max_header_bytes {
        // Still incomplete at the limit, so the complete head would be longer than it.
        Parsed::Reject(Status::HEADER_FIELDS_TOO_LARGE)
    } else {
        Parsed::Partial
    }
}

/// httparse reports any version but 1.0 and 1.1 as an error; a well-formed `HTTP/d.d` is
/// a version we do not support (505), anything else a malformed request (400).
fn bad_version(buf: &[u8], req: &httparse::Request, limits: &Limits) -> Parsed {
    // The method and target parsed, or httparse would not have looked at the version.
    let Some(target) = req.path else {
        return Parsed::Reject(Status::BAD_REQUEST);
    };
    if target_too_long(req, limits) {
        return Parsed::Reject(Status::URI_TOO_LONG);
    }
    let version = &buf[offset_in(buf, target) + target.len() + 1..];
    match version_shape(version) {
        Shape::Numeric => Parsed::Reject(Status::VERSION_NOT_SUPPORTED),
        Shape::Garbage => Parsed::Reject(Status::BAD_REQUEST),
        Shape::Incomplete if buf.len() >= limits.max_header_bytes => {
            Parsed::Reject(Status::HEADER_FIELDS_TOO_LARGE)
        }
        Shape::Incomplete => Parsed::Partial,
    }
}

enum Shape {
    /// `HTTP/<digit>.<digit>` and a line end.
    Numeric,
    /// A prefix of such a version; more bytes will tell.
    Incomplete,
    Garbage,
}

fn version_shape(rest: &[u8]) -> Shape {
    const FORM: &[u8; 10] = b"HTTP/0.0\r\n";
    for (i, &b) in rest.iter().take(FORM.len()).enumerate() {
        let fits = match i {
            5 | 7 => b.is_ascii_digit(),
            // httparse accepts a bare LF as a line end; so do we.
            8 if b == b'\n' => return Shape::Numeric,
            _ => b == FORM[i],
        };
        if !fits {
            return Shape::Garbage;
        }
    }
    if rest.len() >= FORM.len() {
        Shape::Numeric
    } else {
        Shape::Incomplete
    }
}

/// The server's rules for a complete, syntactically valid head of `len` bytes.
fn accept(
    req: &httparse::Request,
    len: usize,
    limits: &Limits,
    path: &mut Vec<u8>,
) -> Result<Head, Status> {
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(Status::BAD_REQUEST);
    };
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        _ => return Err(Status::METHOD_NOT_ALLOWED),
    };
    let target = origin_form(target.as_bytes()).ok_or(Status::BAD_REQUEST)?;
    let end = target
        .iter()
        .position(|&b| b == b'?')
        .unwrap_or(target.len());
    if end == 0 {
        path.clear();
        path.push(b'/'); // "http://host?q" names the root
    } else {
        percent_decode(&target[..end], path).ok_or(Status::BAD_REQUEST)?;
    }
    let dynamic = match target.get(end + 1..) {
        Some(query) => dynamic(query, limits)?,
        None => None,
    };

    let fields = Fields::scan(req.headers)?;
    if fields.hosts > 1 || (minor >= 1 && fields.hosts == 0) {
        return Err(Status::BAD_REQUEST);
    }
    if fields.chunked || fields.has_body {
        return Err(Status::PAYLOAD_TOO_LARGE);
    }
    let keep_alive = if minor >= 1 {
        !fields.close
    } else {
        fields.keep_alive && !fields.close
    };
    Ok(Head {
        method,
        minor,
        keep_alive,
        len,
        if_none_match: fields.if_none_match,
        dynamic,
    })
}

/// The path and query of a target in origin form (`/p?q`) or absolute form
/// (`http://host/p?q`, which RFC 9112 §3.2.2 says a server must accept; the authority
/// is not used, as `Host` is not). None for authority form, `*` and anything else.
fn origin_form(target: &[u8]) -> Option<&[u8]> {
    if target.first() == Some(&b'/') {
        return Some(target);
    }
    let scheme = target.iter().position(|&b| b == b':')?;
    if !(target[..scheme].eq_ignore_ascii_case(b"http")
        || target[..scheme].eq_ignore_ascii_case(b"https"))
    {
        return None;
    }
    let rest = target[scheme..].strip_prefix(b"://")?;
    let authority = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    (authority > 0).then_some(&rest[authority..])
}

/// The dynamic-page parameters of a query; None when it has neither `work` nor
/// `query`. A parameter is ours only when its value is a decimal number: others
/// (`?query=shoes`, `?work=`) are ordinary parameters of an ordinary URL and ignored,
/// as all other names are. A number too large for its field, or work beyond
/// `limits.max_work`, is a 400.
fn dynamic(query: &[u8], limits: &Limits) -> Result<Option<Dynamic>, Status> {
    fn number<T: std::str::FromStr>(value: &[u8]) -> Result<Option<T>, Status> {
        if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
            return Ok(None);
        }
        // Digits only, so the text is ASCII and the only failure is overflow.
        let digits = std::str::from_utf8(value).map_err(|_| Status::BAD_REQUEST)?;
        digits
            .parse::<T>()
            .map(Some)
            .map_err(|_| Status::BAD_REQUEST)
    }
    let (mut work_us, mut queries, mut key) = (None, None, None);
    let mut cacheable = false;
    for pair in query.split(|&b| b == b'&') {
        let (name, value) = match pair.iter().position(|&b| b == b'=') {
            Some(at) => (&pair[..at], &pair[at + 1..]),
            None => (pair, &b""[..]),
        };
        match name {
            b"work" => work_us = number(value)?.or(work_us),
            b"query" => queries = number(value)?.or(queries),
            b"key" => key = number(value)?.or(key),
            b"cacheable" => cacheable = value == b"1",
            _ => {}
        }
    }
    if work_us.is_none() && queries.is_none() {
        return Ok(None);
    }
    if work_us.is_some_and(|us: u32| Duration::from_micros(us.into()) > limits.max_work) {
        return Err(Status::BAD_REQUEST);
    }
    Ok(Some(Dynamic {
        work_us: work_us.unwrap_or(0),
        queries: queries.unwrap_or(0),
        key,
        cacheable,
    }))
}

/// The tag of an `If-None-Match` list that this server could have issued, if any.
pub(crate) fn our_tag(list: &[u8]) -> Option<u64> {
    list.split(|&b| b == b',').find_map(|tag| {
        let tag = tag.trim_ascii();
        let tag = tag.strip_prefix(b"W/").unwrap_or(tag);
        let hex = tag.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
        if hex.len() != 16 {
            return None;
        }
        u64::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    })
}

/// What the header fields say, gathered in one pass.
#[derive(Default)]
struct Fields {
    hosts: usize,
    /// Any Transfer-Encoding: a body of unknown length follows.
    chunked: bool,
    /// A Content-Length above zero.
    has_body: bool,
    close: bool,
    keep_alive: bool,
    if_none_match: Option<u64>,
}

impl Fields {
    fn scan(headers: &[httparse::Header]) -> Result<Fields, Status> {
        let mut fields = Fields::default();
        // The digits of the first Content-Length, leading zeros dropped, so that repeats
        // compare by value.
        let mut length: Option<&[u8]> = None;
        for h in headers {
            let name = h.name.as_bytes();
            if name.eq_ignore_ascii_case(b"host") {
                fields.hosts += 1;
            } else if name.eq_ignore_ascii_case(b"content-length") {
                let digits = decimal(h.value).ok_or(Status::BAD_REQUEST)?;
                match length {
                    Some(first) if first != digits => return Err(Status::BAD_REQUEST),
                    _ => length = Some(digits),
                }
            } else if name.eq_ignore_ascii_case(b"if-none-match") {
                fields.if_none_match = fields.if_none_match.or(our_tag(h.value));
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                fields.chunked = true;
            } else if name.eq_ignore_ascii_case(b"connection") {
                for token in h.value.split(|&b| b == b',') {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        fields.close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        fields.keep_alive = true;
                    }
                }
            }
        }
        fields.has_body = length.is_some_and(|digits| !digits.is_empty());
        Ok(fields)
    }
}

/// A plain decimal number without its leading zeros (empty for zero); None if `value` is
/// not one. Compared as digits, so a length too big for u64 is still a length.
fn decimal(value: &[u8]) -> Option<&[u8]> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let first = value.iter().position(|&b| b != b'0').unwrap_or(value.len());
    Some(&value[first..])
}

/// Decodes `%XX` escapes of `raw` into `out` (cleared first). None for a malformed escape
/// or a decoded NUL, which no file name can hold. '+' stays '+': it means space only in
/// form data, not in paths.
fn percent_decode(raw: &[u8], out: &mut Vec<u8>) -> Option<()> {
    out.clear();
    let mut rest = raw;
    while let Some(at) = rest.iter().position(|&b| b == b'%') {
        out.extend_from_slice(&rest[..at]);
        let hi = hex(*rest.get(at + 1)?)?;
        let lo = hex(*rest.get(at + 2)?)?;
        let byte = hi << 4 | lo;
        if byte == 0 {
            return None;
        }
        out.push(byte);
        rest = &rest[at + 3..];
    }
    out.extend_from_slice(rest);
    Some(())
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_header_bytes: usize, max_uri_bytes: usize, max_headers: usize) -> Limits {
        Limits {
            max_header_bytes,
            max_uri_bytes,
            max_headers,
            ..Limits::default()
        }
    }

    fn parse_default(buf: &[u8]) -> (Parsed, Vec<u8>) {
        let mut path = Vec::new();
        let parsed = parse(buf, &Limits::default(), &mut path);
        (parsed, path)
    }

    fn done(buf: &[u8]) -> (Head, Vec<u8>) {
        match parse_default(buf) {
            (Parsed::Done(head), path) => (head, path),
            (other, _) => panic!("{:?} for {:?}", other, String::from_utf8_lossy(buf)),
        }
    }

    fn status(buf: &[u8]) -> Status {
        match parse_default(buf).0 {
            Parsed::Reject(s) => s,
            other => panic!("{:?} for {:?}", other, String::from_utf8_lossy(buf)),
        }
    }

    #[test]
    fn simple_get() {
        let buf = b"GET /index.html HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n";
        let (head, path) = done(buf);
        assert_eq!(
            head,
            Head {
                method: Method::Get,
                minor: 1,
                keep_alive: true,
                len: buf.len(),
                if_none_match: None,
                dynamic: None,
            }
        );
        assert_eq!(path, b"/index.html");
    }

    #[test]
    fn if_none_match_keeps_the_first_tag_of_our_form() {
        let tag = |value: &str| {
            let buf = format!("GET / HTTP/1.1\r\nHost: a\r\nIf-None-Match: {value}\r\n\r\n");
            done(buf.as_bytes()).0.if_none_match
        };
        assert_eq!(tag("\"00000000000000ff\""), Some(255));
        assert_eq!(tag("W/\"00000000000000Ff\""), Some(255));
        assert_eq!(tag("\"x\", \"0000000000000010\""), Some(16));
        assert_eq!(tag("*"), None);
        assert_eq!(tag("\"ff\""), None);
        assert_eq!(
            done(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").0.if_none_match,
            None
        );
    }

    #[test]
    fn a_work_query_makes_a_dynamic_page() {
        let dynamic = |target: &str| {
            let buf = format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n");
            done(buf.as_bytes()).0.dynamic
        };
        assert_eq!(dynamic("/p?x=1"), None);
        let page = Dynamic {
            work_us: 250,
            queries: 0,
            key: None,
            cacheable: false,
        };
        assert_eq!(dynamic("/p?work=250"), Some(page));
        assert_eq!(
            dynamic("/p?a&work=0&cacheable=1"),
            Some(Dynamic {
                work_us: 0,
                cacheable: true,
                ..page
            })
        );
        // Queries alone make a page too, with no extra work.
        assert_eq!(
            dynamic("/p?query=3&key=41"),
            Some(Dynamic {
                work_us: 0,
                queries: 3,
                key: Some(41),
                ..page
            })
        );
        // Values that are not numbers belong to an ordinary URL: ignored.
        for plain in [
            "/p?work=",
            "/p?work=-1",
            "/p?work=1.5",
            "/p?work=abc",
            "/p?query=x",
            "/p?query=",
            "/p?key=abc",
        ] {
            assert_eq!(dynamic(plain), None, "{plain}");
        }
        assert_eq!(
            dynamic("/p?work=1&key=-2"),
            Some(Dynamic { work_us: 1, ..page })
        );
        // Numbers the server cannot honour are refused.
        for bad in [
            "/p?work=99999999999",
            "/p?query=99999999999",
            "/p?work=1000001",
        ] {
            let buf = format!("GET {bad} HTTP/1.1\r\nHost: a\r\n\r\n");
            assert_eq!(status(buf.as_bytes()), Status::BAD_REQUEST, "{bad}");
        }
        assert_eq!(
            dynamic("/p?work=1000000").map(|d| d.work_us),
            Some(1_000_000)
        );
    }

    #[test]
    fn head_method() {
        let (head, path) = done(b"HEAD /x HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(head.method, Method::Head);
        assert_eq!(path, b"/x");
    }

    #[test]
    fn other_valid_methods_are_405() {
        for m in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "get"] {
            let buf = format!("{m} / HTTP/1.1\r\nHost: a\r\n\r\n");
            assert_eq!(status(buf.as_bytes()), Status::METHOD_NOT_ALLOWED, "{m}");
        }
    }

    #[test]
    fn invalid_method_token_is_400() {
        assert_eq!(status(b"GE(T / HTTP/1.1\r\n\r\n"), Status::BAD_REQUEST);
        assert_eq!(status(b"G\x01T / HTTP/1.1\r\n\r\n"), Status::BAD_REQUEST);
        assert_eq!(status(b" GET / HTTP/1.1\r\n\r\n"), Status::BAD_REQUEST);
    }

    #[test]
    fn malformed_lines_are_400() {
        assert_eq!(status(b"GET  / HTTP/1.1\r\n\r\n"), Status::BAD_REQUEST);
        assert_eq!(status(b"GET / HTTP/1.1 x\r\n\r\n"), Status::BAD_REQUEST);
        assert_eq!(status(b"GET /\x7f HTTP/1.1\r\n\r\n"), Status::BAD_REQUEST);
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n"),
            Status::BAD_REQUEST
        );
    }

    #[test]
    fn too_many_headers_is_431() {
        let l = limits(8192, 4096, 4);
        let mut path = Vec::new();
        let four = b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
        assert!(matches!(parse(four, &l, &mut path), Parsed::Done(_)));
        let five = b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n";
        assert_eq!(
            parse(five, &l, &mut path),
            Parsed::Reject(Status::HEADER_FIELDS_TOO_LARGE)
        );
    }

    #[test]
    fn max_headers_is_capped_at_the_stack_array() {
        let l = limits(1 << 20, 4096, 100_000);
        let mut path = Vec::new();
        let with = |n: usize| {
            let mut buf = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
            for i in 1..n {
                buf.push_str(&format!("X-{i}: {i}\r\n"));
            }
            buf.push_str("\r\n");
            buf
        };
        let full = with(MAX_HEADERS);
        assert!(matches!(
            parse(full.as_bytes(), &l, &mut path),
            Parsed::Done(_)
        ));
        let over = with(MAX_HEADERS + 1);
        assert_eq!(
            parse(over.as_bytes(), &l, &mut path),
            Parsed::Reject(Status::HEADER_FIELDS_TOO_LARGE)
        );
    }

    #[test]
    fn incomplete_head_is_partial() {
        let buf = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        for end in 0..buf.len() {
            assert_eq!(parse_default(&buf[..end]).0, Parsed::Partial, "{end}");
        }
        assert!(matches!(parse_default(buf).0, Parsed::Done(_)));
    }

    #[test]
    fn head_size_limit_is_431() {
        let head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        let mut path = Vec::new();
        // A complete head exactly at the limit passes; one byte more does not.
        let at = limits(head.len(), 4096, 64);
        assert!(matches!(parse(head, &at, &mut path), Parsed::Done(_)));
        let below = limits(head.len() - 1, 4096, 64);
        assert_eq!(
            parse(head, &below, &mut path),
            Parsed::Reject(Status::HEADER_FIELDS_TOO_LARGE)
        );
        // An incomplete head that already fills the limit can only end up longer.
        let partial = &head[..head.len() - 1];
        assert_eq!(parse(partial, &at, &mut path), Parsed::Partial);
        assert_eq!(
            parse(partial, &below, &mut path),
            Parsed::Reject(Status::HEADER_FIELDS_TOO_LARGE)
        );
        // A big header on default limits, complete and not.
        let big = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
            "v".repeat(9000)
        );
        assert_eq!(status(big.as_bytes()), Status::HEADER_FIELDS_TOO_LARGE);
        assert_eq!(
            status(&big.as_bytes()[..8500]),
            Status::HEADER_FIELDS_TOO_LARGE
        );
    }

    #[test]
    fn long_target_is_414() {
        let long = format!("/{}", "a".repeat(4096));
        let buf = format!("GET {long} HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(status(buf.as_bytes()), Status::URI_TOO_LONG);
        // At the limit it is fine.
        let ok = format!("GET {} HTTP/1.1\r\nHost: a\r\n\r\n", &long[..4096]);
        assert!(matches!(parse_default(ok.as_bytes()).0, Parsed::Done(_)));
    }

    #[test]
    fn long_target_is_414_while_partial() {
        // The target is still being received.
        let buf = format!("GET /{}", "a".repeat(4096));
        assert_eq!(status(buf.as_bytes()), Status::URI_TOO_LONG);
        // One byte shorter, it could still be fine.
        assert_eq!(
            parse_default(&buf.as_bytes()[..4096 + 4]).0,
            Parsed::Partial
        );
        // The target is complete but the head is not.
        let buf = format!("GET /{} HTTP/1.1\r\nHost", "a".repeat(4096));
        assert_eq!(status(buf.as_bytes()), Status::URI_TOO_LONG);
    }

    #[test]
    fn uri_limit_wins_over_head_limit() {
        let huge = format!("GET /{}", "a".repeat(20_000));
        assert_eq!(status(huge.as_bytes()), Status::URI_TOO_LONG);
        let complete = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(20_000));
        assert_eq!(status(complete.as_bytes()), Status::URI_TOO_LONG);
        // Even when there are too many headers as well.
        let l = limits(1 << 20, 16, 1);
        let buf = format!(
            "GET /{} HTTP/1.1\r\nHost: a\r\nA: b\r\n\r\n",
            "a".repeat(20)
        );
        assert_eq!(
            parse(buf.as_bytes(), &l, &mut Vec::new()),
            Parsed::Reject(Status::URI_TOO_LONG)
        );
    }

    #[test]
    fn numeric_unsupported_versions_are_505() {
        for v in ["HTTP/2.0", "HTTP/1.2", "HTTP/0.9", "HTTP/3.0"] {
            let buf = format!("GET / {v}\r\nHost: a\r\n\r\n");
            assert_eq!(status(buf.as_bytes()), Status::VERSION_NOT_SUPPORTED, "{v}");
        }
        // Decided as soon as the request line ends, bare LF included.
        assert_eq!(status(b"GET / HTTP/2.0\r\n"), Status::VERSION_NOT_SUPPORTED);
        assert_eq!(status(b"GET / HTTP/2.0\n"), Status::VERSION_NOT_SUPPORTED);
    }

    #[test]
    fn garbage_versions_are_400() {
        for v in [
            "HTTP/x.y",
            "HTTP/10.0",
            "HTTP/1.10",
            "HTTP/2",
            "FOO/1.1",
            "http/1.1",
            "HTTP/2.0 ",
            "HTTP/1.1x",
            "HTTP/2.0x",
            "HTTP/2.0\rx",
        ] {
            let buf = format!("GET / {v}\r\nHost: a\r\n\r\n");
            assert_eq!(status(buf.as_bytes()), Status::BAD_REQUEST, "{v}");
        }
    }

    #[test]
    fn unfinished_versions_wait_for_more() {
        for v in ["HTTP/2", "HTTP/2.", "HTTP/2.0", "HTTP/2.0\r", "HTTP/1."] {
            let buf = format!("GET / {v}");
            assert_eq!(parse_default(buf.as_bytes()).0, Parsed::Partial, "{v}");
        }
    }

    #[test]
    fn absolute_form_targets_name_their_path() {
        for (target, want) in [
            ("http://example.com/a%20b?x=1", &b"/a b"[..]),
            ("HTTPS://example.com:8443/p", b"/p"),
            ("http://example.com", b"/"),
            ("http://example.com?work=5", b"/"),
        ] {
            let buf = format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n");
            assert_eq!(done(buf.as_bytes()).1, want, "{target}");
        }
        let buf = b"GET http://h/p?work=7 HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(done(buf).0.dynamic.map(|d| d.work_us), Some(7));
    }

    #[test]
    fn other_targets_are_400() {
        for t in [
            "*",
            "example.com:80",
            "index.html",
            "?a",
            "ftp://example.com/",
            "http:/example.com/",
            "http:///p",
        ] {
            let buf = format!("GET {t} HTTP/1.1\r\nHost: a\r\n\r\n");
            assert_eq!(status(buf.as_bytes()), Status::BAD_REQUEST, "{t}");
        }
    }

    #[test]
    fn path_is_percent_decoded() {
        let cases: [(&[u8], &[u8]); 7] = [
            (b"/a%20b", b"/a b"),
            (b"/%41%62c", b"/Abc"),
            (b"/a+b", b"/a+b"),
            (b"/%C3%a9", b"/\xc3\xa9"),
            (b"/%2e%2e/etc", b"/../etc"),
            (b"/%2F", b"//"),
            (b"/%25", b"/%"),
        ];
        for (raw, want) in cases {
            let mut buf = b"GET ".to_vec();
            buf.extend_from_slice(raw);
            buf.extend_from_slice(b" HTTP/1.1\r\nHost: a\r\n\r\n");
            assert_eq!(done(&buf).1, want);
        }
    }

    #[test]
    fn bad_escapes_and_nul_are_400() {
        for t in ["/%G1", "/%4", "/x%", "/%4?x", "/%00", "/a%00b", "/%zz"] {
            let buf = format!("GET {t} HTTP/1.1\r\nHost: a\r\n\r\n");
            assert_eq!(status(buf.as_bytes()), Status::BAD_REQUEST, "{t}");
        }
    }

    #[test]
    fn query_string_is_stripped() {
        let (_, path) = done(b"GET /a%20b?x=1&y=%zz HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(path, b"/a b");
        let (_, path) = done(b"GET /?q HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(path, b"/");
    }

    #[test]
    fn host_rules() {
        assert_eq!(status(b"GET / HTTP/1.1\r\n\r\n"), Status::BAD_REQUEST);
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n"),
            Status::BAD_REQUEST
        );
        assert_eq!(
            status(b"GET / HTTP/1.0\r\nHost: a\r\nHOST: a\r\n\r\n"),
            Status::BAD_REQUEST
        );
        done(b"GET / HTTP/1.0\r\n\r\n");
        done(b"GET / HTTP/1.1\r\nhOsT: a\r\n\r\n");
    }

    #[test]
    fn bodies_are_refused() {
        let with = |fields: &str| format!("GET / HTTP/1.1\r\nHost: a\r\n{fields}\r\n");
        let ok = |fields: &str| {
            done(with(fields).as_bytes());
        };
        let no = |fields: &str, want: Status| {
            assert_eq!(status(with(fields).as_bytes()), want, "{fields}");
        };
        ok("Content-Length: 0\r\n");
        ok("Content-Length: 000\r\n");
        ok("Content-Length: 0\r\ncontent-length: 00\r\n");
        no("Content-Length: 5\r\n", Status::PAYLOAD_TOO_LARGE);
        no(
            "Content-Length: 99999999999999999999999\r\n",
            Status::PAYLOAD_TOO_LARGE,
        );
        no(
            "Content-Length: 5\r\nContent-Length: 5\r\n",
            Status::PAYLOAD_TOO_LARGE,
        );
        no("Transfer-Encoding: chunked\r\n", Status::PAYLOAD_TOO_LARGE);
        no("transfer-encoding: identity\r\n", Status::PAYLOAD_TOO_LARGE);
        no(
            "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n",
            Status::PAYLOAD_TOO_LARGE,
        );
        for bad in ["abc", "-1", "+5", "", "5 5", "0x10", "5, 5", "1.0"] {
            no(&format!("Content-Length: {bad}\r\n"), Status::BAD_REQUEST);
        }
        no(
            "Content-Length: 0\r\nContent-Length: 1\r\n",
            Status::BAD_REQUEST,
        );
    }

    #[test]
    fn keep_alive_http11() {
        let ka = |fields: &str| {
            let buf = format!("GET / HTTP/1.1\r\nHost: a\r\n{fields}\r\n");
            done(buf.as_bytes()).0.keep_alive
        };
        assert!(ka(""));
        assert!(ka("Connection: keep-alive\r\n"));
        assert!(ka("Connection: Upgrade\r\n"));
        assert!(!ka("Connection: close\r\n"));
        assert!(!ka("connection: CLOSE\r\n"));
        assert!(!ka("Connection: Keep-Alive , Close\r\n"));
        assert!(!ka("Connection: te\r\nConnection: close\r\n"));
        assert!(ka("Connection: closed\r\n"));
    }

    #[test]
    fn keep_alive_http10() {
        let ka = |fields: &str| {
            let buf = format!("GET / HTTP/1.0\r\n{fields}\r\n");
            let (head, _) = done(buf.as_bytes());
            assert_eq!(head.minor, 0);
            head.keep_alive
        };
        assert!(!ka(""));
        assert!(ka("Connection: keep-alive\r\n"));
        assert!(ka("connection: Keep-Alive\r\n"));
        assert!(ka("Connection: foo,keep-alive\r\n"));
        assert!(!ka("Connection: keep-alive, close\r\n"));
        assert!(!ka("Connection: close\r\n"));
    }

    #[test]
    fn pipelined_requests_parse_one_after_the_other() {
        let first = b"GET /one HTTP/1.1\r\nHost: a\r\n\r\n".as_slice();
        let second = b"HEAD /two?x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".as_slice();
        let third = b"GET /thr".as_slice();
        let buf = [first, second, third].concat();
        let l = Limits::default();
        let mut path = Vec::new();

        let Parsed::Done(a) = parse(&buf, &l, &mut path) else {
            panic!("first")
        };
        assert_eq!(
            (a.method, a.len, a.keep_alive),
            (Method::Get, first.len(), true)
        );
        assert_eq!(path, b"/one");

        let rest = &buf[a.len..];
        let Parsed::Done(b) = parse(rest, &l, &mut path) else {
            panic!("second")
        };
        assert_eq!(
            (b.method, b.len, b.keep_alive),
            (Method::Head, second.len(), false)
        );
        assert_eq!(path, b"/two");

        assert_eq!(parse(&rest[b.len..], &l, &mut path), Parsed::Partial);
    }

    #[test]
    fn leading_empty_lines_are_skipped_and_counted() {
        let buf = b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(done(buf).0.len, buf.len());
    }

    #[test]
    fn path_buffer_is_reused() {
        let l = Limits::default();
        let mut path = Vec::with_capacity(64);
        let cap = path.capacity();
        parse(b"GET /long/path HTTP/1.1\r\nHost: a\r\n\r\n", &l, &mut path);
        parse(b"GET /s HTTP/1.1\r\nHost: a\r\n\r\n", &l, &mut path);
        assert_eq!(path, b"/s");
        assert_eq!(path.capacity(), cap);
    }

    #[test]
    fn empty_buffer_is_partial() {
        assert_eq!(parse_default(b"").0, Parsed::Partial);
    }
}
