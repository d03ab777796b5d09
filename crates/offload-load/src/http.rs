//! HTTP/1.x on the wire: request bytes (formatted once per object, before the run) and
//! response heads.
//!
//! Requests are as small as wrk's: a request line and `Host`, plus `Connection: close`
//! on the last request of an HTTP/1.1 connection. HTTP/1.0 needs no header to close
//! (closing is its default).

use crate::body::Body;
use crate::options::Method;
use crate::plan::Object;

/// Which request form: indices into `RequestBytes`' spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Form {
    /// HTTP/1.0: a connection's only request.
    Http10 = 0,
    /// HTTP/1.1, the connection stays open.
    KeepAlive = 1,
    /// HTTP/1.1 with `Connection: close`.
    Close = 2,
}

/// Every request the run can send, formatted in one buffer.
pub(crate) struct RequestBytes {
    bytes: Vec<u8>,
    /// Per object, per form: (start, end) in `bytes`.
    spans: Vec<[(u32, u32); 3]>,
}

impl RequestBytes {
    pub(crate) fn new(objects: &[Object], method: Method, host: &str) -> RequestBytes {
        let mut bytes = Vec::new();
        let mut spans = Vec::with_capacity(objects.len());
        let m = method.as_str();
        for o in objects {
            let mut span = [(0, 0); 3];
            let forms = [
                (Form::Http10, "HTTP/1.0", ""),
                (Form::KeepAlive, "HTTP/1.1", ""),
                (Form::Close, "HTTP/1.1", "Connection: close\r\n"),
            ];
            for (form, version, extra) in forms {
                let start = bytes.len() as u32;
                let head = format!("{m} {} {version}\r\nHost: {host}\r\n{extra}\r\n", o.path);
                bytes.extend_from_slice(head.as_bytes());
                span[form as usize] = (start, bytes.len() as u32);
            }
            spans.push(span);
        }
        RequestBytes { bytes, spans }
    }

    #[inline]
    pub(crate) fn get(&self, object: u32, form: Form) -> &[u8] {
        let (a, b) = self.spans[object as usize][form as usize];
        &self.bytes[a as usize..b as usize]
    }
}

/// What a response head says about the rest of the response.
#[derive(Debug, PartialEq)]
pub(crate) struct Head {
    /// Bytes of the head, the blank line included.
    pub len: usize,
    pub status: u16,
    pub body: Body,
    /// `Content-Length`, when given.
    pub content_length: Option<u64>,
    /// The server will close the connection after this response.
    pub close: bool,
}

/// Header slots for httparse; nginx sends about 8.
const MAX_HEADERS: usize = 48;

/// Parses a response head at the start of `buf`. `Ok(None)`: not all of it yet.
/// `head_request`: the request was HEAD, so no body follows whatever the head says.
pub(crate) fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<Head>, ()> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(()),
    };
    let status = resp.code.ok_or(())?;
    // HTTP/1.0 closes unless the server says keep-alive; HTTP/1.1 stays open unless it
    // says close (RFC 9112 §9.3).
    let mut close = resp.version != Some(1);
    let (mut chunked, mut content_length) = (false, None);
    for h in resp.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            let n = parse_decimal(h.value).ok_or(())?;
            if content_length.is_some_and(|m| m != n) {
                return Err(()); // two different lengths: the framing is ambiguous
            }
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = has_token(h.value, b"chunked");
        } else if name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, b"close") {
                close = true;
            } else if has_token(h.value, b"keep-alive") {
                close = false;
            }
        }
    }
    // RFC 9112 §6.3: HEAD, 1xx, 204 and 304 have no body; then chunked wins over
    // Content-Length; with neither, the body runs to the close of the connection.
    let body = if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
        Body::Empty
    } else if chunked {
        Body::chunked()
    } else if let Some(n) = content_length {
        Body::Length(n)
    } else {
        close = true;
        Body::UntilClose
    };
    Ok(Some(Head {
        len,
        status,
        body,
        content_length,
        close,
    }))
}

fn parse_decimal(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
}

/// Whether a comma-separated header value holds `token` (case-insensitive).
fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(path: &str) -> Object {
        Object {
            path: path.into(),
            size: 1,
            sha256: None,
            class: 0,
        }
    }

    #[test]
    fn request_forms() {
        let r = RequestBytes::new(&[object("/a"), object("/bb")], Method::Get, "h:1");
        assert_eq!(
            r.get(1, Form::Http10),
            b"GET /bb HTTP/1.0\r\nHost: h:1\r\n\r\n"
        );
        assert_eq!(
            r.get(0, Form::KeepAlive),
            b"GET /a HTTP/1.1\r\nHost: h:1\r\n\r\n"
        );
        let close = b"GET /a HTTP/1.1\r\nHost: h:1\r\nConnection: close\r\n\r\n";
        assert_eq!(r.get(0, Form::Close), close);
        let r = RequestBytes::new(&[object("/a")], Method::Head, "h");
        assert!(r
            .get(0, Form::KeepAlive)
            .starts_with(b"HEAD /a HTTP/1.1\r\n"));
    }

    #[test]
    fn heads() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhello", false)
            .unwrap()
            .unwrap();
        assert_eq!((h.len, h.status, h.close), (39, 200, false));
        assert_eq!(h.body, Body::Length(12));
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Le", false),
            Ok(None)
        );
        let h = parse_head(b"HTTP/1.0 200 OK\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert_eq!((h.body, h.close), (Body::UntilClose, true));
        let ka = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n";
        assert!(!parse_head(ka, false).unwrap().unwrap().close);
        let close = b"HTTP/1.1 404 No\r\nConnection: close\r\nContent-Length: 3\r\n\r\n";
        let h = parse_head(close, false).unwrap().unwrap();
        assert_eq!((h.status, h.close), (404, true));
        let ch = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        assert_eq!(
            parse_head(ch, false).unwrap().unwrap().body,
            Body::chunked()
        );
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true);
        let h = h.unwrap().unwrap();
        assert_eq!((h.body, h.content_length), (Body::Empty, Some(9)));
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false).is_err());
        let two = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        assert!(parse_head(two, false).is_err());
        assert!(parse_head(b"SSH-2.0-OpenSSH\r\n\r\n", false).is_err());
    }
}
