//! How a request can fail. Each failure is counted under one kind, and the kind's code
//! is what a per-request record holds (0 for success).

use std::io;

/// The kinds of failure, in report order. Codes are stable: 1..=10.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ErrorKind {
    /// The server refused the connection (RST to the SYN: nothing listens).
    ConnectRefused = 1,
    /// The connection was not established within the timeout.
    ConnectTimeout = 2,
    /// The response was not complete within the timeout.
    ResponseTimeout = 3,
    /// The connection was reset or closed before any of the response came back.
    Reset = 4,
    /// A complete response with a status outside 2xx.
    BadStatus = 5,
    /// The connection closed in the middle of the response (the server quit early).
    ShortBody = 6,
    /// A complete response whose length is not the object's size.
    WrongLength = 7,
    /// A complete response of the right length whose SHA-256 is not the object's.
    BadContent = 8,
    /// A response that is not HTTP/1.x (bad head, bad chunk framing, bytes after it).
    Parse = 9,
    /// Any other socket error (e.g. no free local port).
    Io = 10,
}

/// Record code of a request that was started but cut off by the end of the run.
pub const UNFINISHED: u8 = 254;

impl ErrorKind {
    pub const COUNT: usize = 10;
    pub const ALL: [ErrorKind; ErrorKind::COUNT] = [
        ErrorKind::ConnectRefused,
        ErrorKind::ConnectTimeout,
        ErrorKind::ResponseTimeout,
        ErrorKind::Reset,
        ErrorKind::BadStatus,
        ErrorKind::ShortBody,
        ErrorKind::WrongLength,
        ErrorKind::BadContent,
        ErrorKind::Parse,
        ErrorKind::Io,
    ];

    /// The code in per-request records.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Position in `ALL` and in `Report::errors`.
    pub fn index(self) -> usize {
        self as usize - 1
    }

    /// snake_case name, as in JSON output.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "connect_refused",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::ResponseTimeout => "response_timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::BadStatus => "bad_status",
            ErrorKind::ShortBody => "short_body",
            ErrorKind::WrongLength => "wrong_length",
            ErrorKind::BadContent => "bad_content",
            ErrorKind::Parse => "parse",
            ErrorKind::Io => "io",
        }
    }

    /// A complete, well-framed response that is wrong: the connection is still in step
    /// and may carry the next request. Every other kind closes it.
    pub fn keeps_connection(self) -> bool {
        matches!(
            self,
            ErrorKind::BadStatus | ErrorKind::WrongLength | ErrorKind::BadContent
        )
    }

    /// A failed connect.
    pub(crate) fn of_connect(e: &io::Error) -> ErrorKind {
        match e.kind() {
            io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
            io::ErrorKind::TimedOut => ErrorKind::ConnectTimeout,
            _ => ErrorKind::of_io(e),
        }
    }

    /// A failed read or write on an established connection.
    pub(crate) fn of_io(e: &io::Error) -> ErrorKind {
        match e.kind() {
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof => ErrorKind::Reset,
            io::ErrorKind::ConnectionRefused => ErrorKind::ConnectRefused,
            io::ErrorKind::TimedOut => ErrorKind::ResponseTimeout,
            _ => ErrorKind::Io,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_indices_agree() {
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
            assert_eq!(k.code() as usize, i + 1);
        }
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(ErrorKind::of_io(&reset), ErrorKind::Reset);
        let pipe = io::Error::from(io::ErrorKind::BrokenPipe);
        assert_eq!(ErrorKind::of_io(&pipe), ErrorKind::Reset);
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(ErrorKind::of_connect(&refused), ErrorKind::ConnectRefused);
    }
}
