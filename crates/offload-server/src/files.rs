//! The document root (no request resolves outside it) and the table of open files.
//!
//! Files are opened on first request and kept open for the whole run, so the steady state
//! makes no path lookups: served files are assumed not to change (nor be replaced) while
//! the server runs, which holds for a benchmark's document root.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::http::Status;

/// The document root, canonicalised once.
#[derive(Clone, Debug)]
pub struct DocRoot {
    root: PathBuf,
}

impl DocRoot {
    /// Canonicalises `root`; an error if it is missing or not a directory.
    pub fn new(root: &Path) -> io::Result<DocRoot> {
        let canonical = std::fs::canonicalize(root).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "document root {}: {e}; give an existing directory",
                    root.display()
                ),
            )
        })?;
        if !canonical.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "document root {} is not a directory; give the directory to serve",
                    root.display()
                ),
            ));
        }
        Ok(DocRoot { root: canonical })
    }

    /// The canonical root.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Resolves a decoded request path ("/a/b.bin") to a regular file inside the root.
    ///
    /// Leading slashes are dropped, so "//etc/passwd" names a file under the root. Any "."
    /// or ".." segment is 400 (they are refused rather than interpreted). Symlinks are
    /// followed, but only to files inside the root; everything that is not a regular file
    /// inside the root is 404.
    pub fn resolve(&self, path: &[u8]) -> Result<PathBuf, Status> {
        let start = path.iter().position(|&b| b != b'/').unwrap_or(path.len());
        let relative = &path[start..];
        if relative
            .split(|&b| b == b'/')
            .any(|segment| segment == b"." || segment == b"..")
        {
            return Err(Status::BAD_REQUEST);
        }
        if relative.is_empty() {
            return Err(Status::NOT_FOUND);
        }
        let canonical = std::fs::canonicalize(self.root.join(OsStr::from_bytes(relative)))
            .map_err(|_| Status::NOT_FOUND)?;
        // Component-wise, so a sibling like "/srv/www2" is not inside "/srv/www".
        if !canonical.starts_with(&self.root) {
            return Err(Status::NOT_FOUND);
        }
        match std::fs::metadata(&canonical) {
            Ok(meta) if meta.is_file() => Ok(canonical),
            _ => Err(Status::NOT_FOUND),
        }
    }
}

/// An open file the server serves: its descriptor stays valid as long as the table lives.
#[derive(Clone, Copy, Debug)]
pub struct FileRef {
    /// Owned by the table; do not close it.
    pub fd: RawFd,
    /// Its size when it was opened.
    pub size: u64,
    /// Its entity tag: a hash of inode, size and modification time at open.
    pub etag: u64,
}

impl FileRef {
    /// Appends the whole file to `out` with pread (loop until `size` bytes; a short file is
    /// an error). On error `out` is left as it was.
    pub fn read_into(&self, out: &mut Vec<u8>) -> io::Result<()> {
        read_range(self.fd, 0, self.size, out)
    }
}

/// Appends `len` bytes of `fd` from `offset` to `out` with pread (loop until done; a
/// short file is an error). On error `out` is left as it was.
pub fn read_range(fd: RawFd, offset: u64, len: u64, out: &mut Vec<u8>) -> io::Result<()> {
    let size = usize::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file larger than memory"))?;
    let start = out.len();
    out.reserve(size);
    let mut done = 0;
    while done < size {
        let spare = &mut out.spare_capacity_mut()[..size - done];
        // SAFETY: pread writes at most `spare.len()` bytes into `spare`, memory that
        // `out` owns and that nothing else references.
        let n = unsafe {
            libc::pread(
                fd,
                spare.as_mut_ptr().cast(),
                spare.len(),
                (offset + done as u64) as libc::off_t,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            out.truncate(start);
            return Err(err);
        }
        if n == 0 {
            out.truncate(start);
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "file shrank to {} bytes after it was opened with {}; \
                     served files must not change during a run",
                    offset + done as u64,
                    offset + len
                ),
            ));
        }
        let n = n as usize;
        // SAFETY: the kernel initialised the first `n` spare bytes.
        unsafe { out.set_len(out.len() + n) };
        done += n;
    }
    Ok(())
}

/// A file the table keeps open.
#[derive(Debug)]
struct Open {
    file: File,
    size: u64,
    etag: u64,
}

/// Most files a server keeps open at once (each is a descriptor).
pub(crate) const FILE_CAP: usize = 16 * 1024;

/// Files opened so far, keyed by decoded request path; files are opened once and kept
/// open, since served files are assumed not to change during a run.
///
/// Some files may also be held in memory (seed 003's hybrid placement: the popular
/// ones in RAM, the rest on disk); with `uncached` the others are dropped from the
/// page cache before each use, so they are read from the disk every time, as on a
/// server whose memory cannot hold its working set.
#[derive(Debug)]
pub struct Files {
    root: DocRoot,
    cap: usize,
    open: HashMap<Vec<u8>, Open>,
    memory: HashMap<Vec<u8>, Arc<[u8]>>,
    uncached: bool,
}

impl Files {
    /// An empty table that will hold at most `cap` open files.
    pub fn new(root: DocRoot, cap: usize) -> Files {
        Files {
            root,
            cap,
            open: HashMap::new(),
            memory: HashMap::new(),
            uncached: false,
        }
    }

    /// Reads each of `paths` (request paths, e.g. `/c1/f000042.bin`) into memory, and
    /// sets whether the other files bypass the page cache. Returns the bytes held.
    pub fn place(&mut self, paths: &[String], uncached: bool) -> Result<u64, String> {
        self.uncached = uncached;
        let mut bytes = 0;
        for path in paths {
            let file = self
                .get(path.as_bytes())
                .map_err(|s| format!("memory tier: {path}: cannot open it ({})", s.0))?;
            let mut body = Vec::new();
            file.read_into(&mut body)
                .map_err(|e| format!("memory tier: {path}: {e}"))?;
            bytes += body.len() as u64;
            self.memory.insert(path.as_bytes().to_vec(), body.into());
        }
        Ok(bytes)
    }

    /// The body of a file held in memory.
    pub fn in_memory(&self, path: &[u8]) -> Option<Arc<[u8]>> {
        self.memory.get(path).cloned()
    }

    /// About to read `file` from disk: with `uncached`, drop its pages first so the read
    /// goes to the device (its pages are clean, so the kernel lets them go at once).
    pub fn before_disk_read(&self, file: FileRef) {
        if self.uncached {
            // SAFETY: fd is open for the table's lifetime; the advice only affects caching.
            unsafe { libc::posix_fadvise(file.fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }

    /// The file for a decoded request path: from the table, or resolved and opened
    /// (O_RDONLY|O_CLOEXEC) and added.
    ///
    /// Err(404) for missing/outside/not-regular, Err(400) for dot segments, Err(503) when
    /// the table holds `cap` files already (or the process is out of descriptors),
    /// Err(500) for other open errors. Paths that name the same file ("/a", "//a") are
    /// separate entries, each with its own descriptor.
    pub fn get(&mut self, path: &[u8]) -> Result<FileRef, Status> {
        if let Some(open) = self.open.get(path) {
            return Ok(open.file_ref());
        }
        // Resolve first so that a bad path gets its own answer even when the table is full.
        let canonical = self.root.resolve(path)?;
        if self.open.len() >= self.cap {
            return Err(Status::UNAVAILABLE);
        }
        let file = OpenOptions::new()
            .read(true)
            // The path was canonical a moment ago; refuse it if it has become a symlink.
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&canonical)
            .map_err(|e| open_error(&e))?;
        // Check what was opened, not what was resolved: it might have been replaced between.
        let meta = file.metadata().map_err(|_| Status::INTERNAL_ERROR)?;
        if !meta.is_file() {
            return Err(Status::NOT_FOUND);
        }
        let open = Open {
            file,
            size: meta.len(),
            etag: etag(&meta),
        };
        let file_ref = open.file_ref();
        self.open.insert(path.to_vec(), open);
        Ok(file_ref)
    }

    /// Number of open files in the table.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Whether no file has been opened yet.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

impl Open {
    fn file_ref(&self) -> FileRef {
        FileRef {
            fd: self.file.as_raw_fd(),
            size: self.size,
            etag: self.etag,
        }
    }
}

/// An entity tag that changes when the file is replaced or modified.
fn etag(meta: &std::fs::Metadata) -> u64 {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (meta.ino(), meta.len(), meta.mtime(), meta.mtime_nsec()).hash(&mut h);
    h.finish()
}

/// The status for a failed open of a resolved path.
fn open_error(err: &io::Error) -> Status {
    match err.raw_os_error() {
        // Gone or replaced since it was resolved.
        Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP) => Status::NOT_FOUND,
        // Out of descriptors: like a full table, a retry may succeed.
        Some(libc::EMFILE | libc::ENFILE) => Status::UNAVAILABLE,
        _ => Status::INTERNAL_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Limits;
    use crate::http::{parse, Parsed};
    use std::os::unix::fs::symlink;
    use tempfile::TempDir;

    /// A root with a.txt, sub/b.bin, an empty file and a directory `dir`.
    fn tree() -> (TempDir, DocRoot) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), b"hello\n").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b.bin"), [7u8; 3000]).unwrap();
        std::fs::write(dir.path().join("empty"), b"").unwrap();
        std::fs::create_dir(dir.path().join("dir")).unwrap();
        let root = DocRoot::new(dir.path()).unwrap();
        (dir, root)
    }

    fn canonical(dir: &TempDir, rel: &str) -> PathBuf {
        std::fs::canonicalize(dir.path().join(rel)).unwrap()
    }

    #[test]
    fn root_must_be_an_existing_directory() {
        let (dir, root) = tree();
        assert_eq!(root.path(), std::fs::canonicalize(dir.path()).unwrap());
        let missing = DocRoot::new(&dir.path().join("missing")).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        assert!(missing.to_string().contains("missing"));
        let file = DocRoot::new(&dir.path().join("a.txt")).unwrap_err();
        assert!(file.to_string().contains("not a directory"), "{file}");
    }

    #[test]
    fn resolves_files_inside() {
        let (dir, root) = tree();
        assert_eq!(root.resolve(b"/a.txt"), Ok(canonical(&dir, "a.txt")));
        assert_eq!(root.resolve(b"a.txt"), Ok(canonical(&dir, "a.txt")));
        assert_eq!(
            root.resolve(b"/sub/b.bin"),
            Ok(canonical(&dir, "sub/b.bin"))
        );
        assert_eq!(
            root.resolve(b"/sub//b.bin"),
            Ok(canonical(&dir, "sub/b.bin"))
        );
        assert_eq!(root.resolve(b"/empty"), Ok(canonical(&dir, "empty")));
    }

    #[test]
    fn leading_slashes_stay_inside() {
        let (dir, root) = tree();
        assert_eq!(root.resolve(b"///a.txt"), Ok(canonical(&dir, "a.txt")));
        assert_eq!(root.resolve(b"//etc/passwd"), Err(Status::NOT_FOUND));
        assert_eq!(root.resolve(b"/etc/passwd"), Err(Status::NOT_FOUND));
    }

    #[test]
    fn dot_segments_are_400() {
        let (_dir, root) = tree();
        for p in [
            "/../a.txt",
            "/sub/../a.txt",
            "/./a.txt",
            "/sub/.",
            "/a.txt/..",
            "/..",
            "/.",
            "..",
            "//../etc/passwd",
        ] {
            assert_eq!(root.resolve(p.as_bytes()), Err(Status::BAD_REQUEST), "{p}");
        }
    }

    #[test]
    fn dots_inside_names_are_names() {
        let (dir, root) = tree();
        std::fs::write(dir.path().join("..a"), b"x").unwrap();
        std::fs::write(dir.path().join("..."), b"x").unwrap();
        assert_eq!(root.resolve(b"/..a"), Ok(canonical(&dir, "..a")));
        assert_eq!(root.resolve(b"/..."), Ok(canonical(&dir, "...")));
        assert_eq!(root.resolve(b"/.hidden"), Err(Status::NOT_FOUND));
    }

    #[test]
    fn empty_paths_directories_and_missing_files_are_404() {
        let (dir, root) = tree();
        for p in [
            "", "/", "//", "/dir", "/dir/", "/sub", "/missing", "/a.txt/", "/a.txt/x",
        ] {
            assert_eq!(root.resolve(p.as_bytes()), Err(Status::NOT_FOUND), "{p}");
        }
        // Not a regular file: a FIFO is refused before anything opens (and blocks on) it.
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
        assert_eq!(root.resolve(b"/fifo"), Err(Status::NOT_FOUND));
    }

    #[test]
    fn symlinks_are_followed_only_inside() {
        let (dir, root) = tree();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"s").unwrap();
        symlink(outside.path().join("secret"), dir.path().join("out")).unwrap();
        symlink(outside.path(), dir.path().join("outdir")).unwrap();
        symlink(dir.path().join("a.txt"), dir.path().join("in")).unwrap();
        symlink("../a.txt", dir.path().join("sub/rel")).unwrap();
        symlink(dir.path().join("sub"), dir.path().join("subdir")).unwrap();

        assert_eq!(root.resolve(b"/out"), Err(Status::NOT_FOUND));
        assert_eq!(root.resolve(b"/outdir/secret"), Err(Status::NOT_FOUND));
        assert_eq!(root.resolve(b"/in"), Ok(canonical(&dir, "a.txt")));
        assert_eq!(root.resolve(b"/sub/rel"), Ok(canonical(&dir, "a.txt")));
        assert_eq!(
            root.resolve(b"/subdir/b.bin"),
            Ok(canonical(&dir, "sub/b.bin"))
        );
        assert_eq!(root.resolve(b"/subdir"), Err(Status::NOT_FOUND));
    }

    #[test]
    fn a_sibling_with_the_root_as_prefix_is_outside() {
        let parent = tempfile::tempdir().unwrap();
        std::fs::create_dir(parent.path().join("www")).unwrap();
        std::fs::create_dir(parent.path().join("www2")).unwrap();
        std::fs::write(parent.path().join("www2/f"), b"x").unwrap();
        symlink(parent.path().join("www2/f"), parent.path().join("www/f")).unwrap();
        let root = DocRoot::new(&parent.path().join("www")).unwrap();
        assert_eq!(root.resolve(b"/f"), Err(Status::NOT_FOUND));
    }

    #[test]
    fn encoded_dots_are_refused_after_decoding() {
        let (_dir, root) = tree();
        let mut files = Files::new(root, 16);
        let mut path = Vec::new();
        for target in ["/%2e%2e/etc/passwd", "/sub/%2E%2E/a.txt", "/%2e/a.txt"] {
            let req = format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n");
            let parsed = parse(req.as_bytes(), &Limits::default(), &mut path);
            assert!(matches!(parsed, Parsed::Done(_)), "{target}: {parsed:?}");
            assert_eq!(
                files.get(&path).unwrap_err(),
                Status::BAD_REQUEST,
                "{target}"
            );
        }
        assert!(files.is_empty());
    }

    #[test]
    fn files_are_opened_once() {
        let (_dir, root) = tree();
        let mut files = Files::new(root, 16);
        let a = files.get(b"/a.txt").unwrap();
        assert_eq!(a.size, 6);
        assert_eq!(files.len(), 1);
        let again = files.get(b"/a.txt").unwrap();
        assert_eq!(again.fd, a.fd);
        assert_eq!(files.len(), 1);
        let b = files.get(b"/sub/b.bin").unwrap();
        assert_ne!(b.fd, a.fd);
        assert_eq!(b.size, 3000);
        assert_eq!(files.len(), 2);
        // The descriptor does not leak into children.
        // SAFETY: fcntl on a descriptor the table keeps open.
        let flags = unsafe { libc::fcntl(a.fd, libc::F_GETFD) };
        assert!(flags & libc::FD_CLOEXEC != 0);
    }

    #[test]
    fn errors_from_get() {
        let (_dir, root) = tree();
        let mut files = Files::new(root, 16);
        assert_eq!(files.get(b"/missing").unwrap_err(), Status::NOT_FOUND);
        assert_eq!(files.get(b"/dir").unwrap_err(), Status::NOT_FOUND);
        assert_eq!(files.get(b"/../x").unwrap_err(), Status::BAD_REQUEST);
        assert!(files.is_empty());
    }

    #[test]
    fn a_full_table_is_503() {
        let (_dir, root) = tree();
        let mut files = Files::new(root, 1);
        let a = files.get(b"/a.txt").unwrap();
        assert_eq!(files.get(b"/sub/b.bin").unwrap_err(), Status::UNAVAILABLE);
        // What is open is still served, and bad paths keep their own status.
        assert_eq!(files.get(b"/a.txt").unwrap().fd, a.fd);
        assert_eq!(files.get(b"/missing").unwrap_err(), Status::NOT_FOUND);
        assert_eq!(files.len(), 1);
    }

    #[test]
    fn read_into_appends_the_whole_file() {
        let (_dir, root) = tree();
        let mut files = Files::new(root, 16);
        let mut out = b"head:".to_vec();
        files.get(b"/a.txt").unwrap().read_into(&mut out).unwrap();
        assert_eq!(out, b"head:hello\n");
        out.clear();
        files
            .get(b"/sub/b.bin")
            .unwrap()
            .read_into(&mut out)
            .unwrap();
        assert_eq!(out, [7u8; 3000]);
        out.clear();
        files.get(b"/empty").unwrap().read_into(&mut out).unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn a_short_file_is_an_error() {
        let (dir, root) = tree();
        let mut files = Files::new(root, 16);
        let a = files.get(b"/a.txt").unwrap();
        std::fs::write(dir.path().join("a.txt"), b"hi").unwrap();
        let mut out = b"keep".to_vec();
        let err = a.read_into(&mut out).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(out, b"keep");
        // A bad descriptor is reported too.
        let bad = FileRef {
            fd: -1,
            size: 4,
            etag: 0,
        };
        assert!(bad.read_into(&mut out).is_err());
        assert_eq!(out, b"keep");
    }
}
