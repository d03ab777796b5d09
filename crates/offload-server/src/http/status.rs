//! Status codes the server sends, with their reason phrases.

/// An HTTP status code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status(pub u16);

impl Status {
    /// The file follows.
    pub const OK: Status = Status(200);
    /// The client's copy, named by `If-None-Match`, is still the file.
    pub const NOT_MODIFIED: Status = Status(304);
    /// Malformed request line, target or headers.
    pub const BAD_REQUEST: Status = Status(400);
    /// No such file inside the document root.
    pub const NOT_FOUND: Status = Status(404);
    /// A well-formed method other than GET or HEAD.
    pub const METHOD_NOT_ALLOWED: Status = Status(405);
    /// The request announced a body; this server takes none.
    pub const PAYLOAD_TOO_LARGE: Status = Status(413);
    /// The request target is longer than `Limits::max_uri_bytes`.
    pub const URI_TOO_LONG: Status = Status(414);
    /// Too many header fields, or a head longer than `Limits::max_header_bytes`.
    pub const HEADER_FIELDS_TOO_LARGE: Status = Status(431);
    /// Something failed on our side (an open or read error other than a missing file).
    pub const INTERNAL_ERROR: Status = Status(500);
    /// Out of a resource (connections, open files); the client may retry later.
    pub const UNAVAILABLE: Status = Status(503);
    /// A well-formed `HTTP/x.y` version other than 1.0 and 1.1.
    pub const VERSION_NOT_SUPPORTED: Status = Status(505);

    /// The reason phrase for the status line; codes without their own get their class's name.
    pub fn reason(self) -> &'static str {
        match self.0 {
            200 => "OK",
            304 => "Not Modified",
            400 => "Bad Request",
            404 => "Not Found",
            405 => "Method Not Allowed",
            413 => "Payload Too Large",
            414 => "URI Too Long",
            431 => "Request Header Fields Too Large",
            500 => "Internal Server Error",
            503 => "Service Unavailable",
            505 => "HTTP Version Not Supported",
            100..=199 => "Informational",
            201..=299 => "Success",
            300..=399 => "Redirection",
            401..=499 => "Client Error",
            501..=599 => "Server Error",
            _ => "Unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_of_the_codes_we_send() {
        assert_eq!(Status::OK.reason(), "OK");
        assert_eq!(Status::BAD_REQUEST.reason(), "Bad Request");
        assert_eq!(Status::NOT_FOUND.reason(), "Not Found");
        assert_eq!(Status::METHOD_NOT_ALLOWED.reason(), "Method Not Allowed");
        assert_eq!(Status::PAYLOAD_TOO_LARGE.reason(), "Payload Too Large");
        assert_eq!(Status::URI_TOO_LONG.reason(), "URI Too Long");
        assert_eq!(
            Status::HEADER_FIELDS_TOO_LARGE.reason(),
            "Request Header Fields Too Large"
        );
        assert_eq!(Status::INTERNAL_ERROR.reason(), "Internal Server Error");
        assert_eq!(Status::UNAVAILABLE.reason(), "Service Unavailable");
        assert_eq!(
            Status::VERSION_NOT_SUPPORTED.reason(),
            "HTTP Version Not Supported"
        );
    }

    #[test]
    fn unknown_codes_fall_back_to_their_class() {
        assert_eq!(Status(204).reason(), "Success");
        assert_eq!(Status(418).reason(), "Client Error");
        assert_eq!(Status(42).reason(), "Unknown");
    }
}
