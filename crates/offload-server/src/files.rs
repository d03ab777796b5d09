//! The document root (no request resolves outside it) and the table of open files.
//!
//! Files are opened on first request and kept open while they are used, so the steady
//! state makes no path lookups: served files are assumed not to change (nor be
//! replaced) while the server runs, which holds for a benchmark's document root.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lru::LruCache;

use crate::http::Status;

/// The document root, canonicalised and opened once: every file is opened beneath
/// this descriptor with `openat2(RESOLVE_BENEATH)`, so the kernel itself keeps each
/// lookup inside the root, also while a local user swaps symlinks in it.
#[derive(Debug)]
pub struct DocRoot {
    root: PathBuf,
    dir: File,
}

impl DocRoot {
    /// Canonicalises and opens `root`; an error if it is missing or not a directory,
    /// or if the kernel lacks `openat2` (Linux 5.6).
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
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(&canonical)?;
        let root = DocRoot {
            root: canonical,
            dir,
        };
        if let Err(e) = root.open_beneath(b".") {
            if e.raw_os_error() == Some(libc::ENOSYS) {
                return Err(io::Error::other(
                    "this kernel has no openat2 (Linux 5.6 or later is needed to keep \
                     file lookups inside the root)",
                ));
            }
        }
        Ok(root)
    }

    /// The canonical root.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Opens a regular file at `relative`, a path made by [`normalise`], beneath the
    /// root. Symlinks are followed, but only to files inside the root; everything that
    /// is not a regular file inside the root is 404.
    fn open(&self, relative: &[u8]) -> Result<File, Status> {
        if relative.is_empty() {
            return Err(Status::NOT_FOUND);
        }
        let file = match self.open_beneath(relative) {
            // An absolute symlink on the way, which RESOLVE_BENEATH never follows:
            // resolve it by hand, and open what it names only if that is inside the
            // root, again beneath it (so a swap in between still cannot lead out).
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                let canonical = std::fs::canonicalize(self.root.join(OsStr::from_bytes(relative)))
                    .map_err(|_| Status::NOT_FOUND)?;
                // Component-wise, so a sibling like "/srv/www2" is not inside "/srv/www".
                let inside = canonical
                    .strip_prefix(&self.root)
                    .map_err(|_| Status::NOT_FOUND)?;
                self.open_beneath(inside.as_os_str().as_bytes())
            }
            opened => opened,
        }
        .map_err(|e| open_error(&e))?;
        // Check what was opened, not what a path named a moment earlier.
        match file.metadata() {
            Ok(meta) if meta.is_file() => Ok(file),
            Ok(_) => Err(Status::NOT_FOUND),
            Err(_) => Err(Status::INTERNAL_ERROR),
        }
    }

    /// openat2 beneath the root: read-only, close-on-exec, and non-blocking so that a
    /// FIFO put in the root cannot hang the server before it is seen not to be a file.
    fn open_beneath(&self, relative: &[u8]) -> io::Result<File> {
        let path =
            CString::new(relative).map_err(|_| io::Error::from_raw_os_error(libc::ENOENT))?;
        // SAFETY: open_how is plain integers, for which all zeroes is valid.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK) as u64;
        how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
        // EAGAIN: a rename elsewhere raced the lookup; the kernel asks for a retry.
        for _ in 0..8 {
            // SAFETY: `path` is NUL-terminated and `how` is a live open_how whose size
            // is passed with it; the kernel returns a new descriptor or -1.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    self.dir.as_raw_fd(),
                    path.as_ptr(),
                    &how as *const libc::open_how,
                    std::mem::size_of::<libc::open_how>(),
                )
            };
            if fd >= 0 {
                // SAFETY: the descriptor is new and owned by nothing else.
                return Ok(unsafe { File::from_raw_fd(fd as RawFd) });
            }
            let e = io::Error::last_os_error();
            if !matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN)) {
                return Err(e);
            }
        }
        Err(io::Error::from_raw_os_error(libc::EAGAIN))
    }
}

/// Writes the decoded request `path` ("/a//b.bin") into `out` as a path relative to
/// the root ("a/b.bin"): leading slashes dropped and runs of slashes made one, so all
/// spellings of a file are one key of the table. Any "." or ".." segment is 400
/// (refused rather than interpreted).
pub fn normalise(path: &[u8], out: &mut Vec<u8>) -> Result<(), Status> {
    out.clear();
    for segment in path.split(|&b| b == b'/') {
        if segment == b"." || segment == b".." {
            return Err(Status::BAD_REQUEST);
        }
        if !segment.is_empty() {
            if !out.is_empty() {
                out.push(b'/');
            }
            out.extend_from_slice(segment);
        }
    }
    // A trailing slash names a directory: keep it, so "a.txt/" stays a 404.
    if path.last() == Some(&b'/') && !out.is_empty() {
        out.push(b'/');
    }
    Ok(())
}

/// An open file the server serves. The descriptor stays open while the table or any
/// answer in flight holds it, so a file evicted from the table mid-answer is safe.
#[derive(Clone, Debug)]
pub struct FileRef {
    pub file: Arc<File>,
    /// Its size when it was opened.
    pub size: u64,
    /// Its entity tag: a hash of inode, size and modification time at open.
    pub etag: u64,
}

impl FileRef {
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Appends the whole file to `out` with pread (loop until `size` bytes; a short file is
    /// an error). On error `out` is left as it was.
    pub fn read_into(&self, out: &mut Vec<u8>) -> io::Result<()> {
        read_range(self.fd(), 0, self.size, out)
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

/// Most files the table keeps open at once (each is a descriptor); beyond it the least
/// recently used one is closed.
pub(crate) const FILE_CAP: usize = 16 * 1024;

/// Files opened so far, keyed by normalised path, least recently used evicted first.
///
/// Some files may also be held in memory (seed 003's hybrid placement: the popular
/// ones in RAM, the rest on disk); with `uncached` the others are dropped from the
/// page cache before each use, so they are read from the disk every time, as on a
/// server whose memory cannot hold its working set.
#[derive(Debug)]
pub struct Files {
    root: DocRoot,
    open: LruCache<Vec<u8>, FileRef>,
    memory: HashMap<Vec<u8>, Arc<[u8]>>,
    uncached: bool,
    /// The normalised path of the request at hand (reused, so lookups do not allocate).
    key: Vec<u8>,
}

impl Files {
    /// An empty table that will keep at most `cap` files open.
    pub fn new(root: DocRoot, cap: usize) -> Files {
        Files {
            root,
            open: LruCache::new(NonZeroUsize::new(cap).unwrap_or(NonZeroUsize::MIN)),
            memory: HashMap::new(),
            uncached: false,
            key: Vec::new(),
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
            // `get` left the normalised path in `key`.
            self.memory.insert(self.key.clone(), body.into());
        }
        Ok(bytes)
    }

    /// The body of a file held in memory.
    pub fn in_memory(&mut self, path: &[u8]) -> Option<Arc<[u8]>> {
        if self.memory.is_empty() {
            return None;
        }
        normalise(path, &mut self.key).ok()?;
        self.memory.get(&self.key).cloned()
    }

    /// About to read `file` from disk: with `uncached`, drop its pages first so the read
    /// goes to the device (its pages are clean, so the kernel lets them go at once).
    pub fn before_disk_read(&self, file: &FileRef) {
        if self.uncached {
            // SAFETY: fd is open while `file` lives; the advice only affects caching.
            unsafe { libc::posix_fadvise(file.fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }

    /// The file for a decoded request path: from the table, or opened beneath the root
    /// and added (closing the least recently used file when the table is full).
    ///
    /// Err(404) for missing/outside/not-regular, Err(400) for dot segments, Err(503)
    /// when the process is out of descriptors, Err(500) for other open errors.
    pub fn get(&mut self, path: &[u8]) -> Result<FileRef, Status> {
        normalise(path, &mut self.key)?;
        if let Some(file) = self.open.get(&self.key) {
            return Ok(file.clone());
        }
        let file = self.root.open(&self.key)?;
        let meta = file.metadata().map_err(|_| Status::INTERNAL_ERROR)?;
        let file_ref = FileRef {
            file: Arc::new(file),
            size: meta.len(),
            etag: etag(&meta),
        };
        self.open.push(self.key.clone(), file_ref.clone());
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

/// An entity tag that changes when the file is replaced or modified.
fn etag(meta: &std::fs::Metadata) -> u64 {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (meta.ino(), meta.len(), meta.mtime(), meta.mtime_nsec()).hash(&mut h);
    h.finish()
}

/// The status for a failed open.
fn open_error(err: &io::Error) -> Status {
    match err.raw_os_error() {
        // Missing, outside the root (EXDEV), or not something to serve (ENXIO: a
        // socket or device).
        Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::EXDEV | libc::ENXIO) => {
            Status::NOT_FOUND
        }
        // Out of descriptors: a retry may succeed.
        Some(libc::EMFILE | libc::ENFILE) => Status::UNAVAILABLE,
        _ => Status::INTERNAL_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Limits;
    use crate::http::{parse, Parsed};
    use std::os::unix::fs::{symlink, MetadataExt};
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

    /// The inode that a request for `path` opens, or its status.
    fn opened(root: &DocRoot, path: &[u8]) -> Result<u64, Status> {
        let mut key = Vec::new();
        normalise(path, &mut key)?;
        root.open(&key).map(|f| f.metadata().unwrap().ino())
    }

    /// The inode of the file at `rel` (after symlinks).
    fn inode(dir: &TempDir, rel: &str) -> Result<u64, Status> {
        Ok(std::fs::metadata(dir.path().join(rel)).unwrap().ino())
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
        assert_eq!(opened(&root, b"/a.txt"), inode(&dir, "a.txt"));
        assert_eq!(opened(&root, b"a.txt"), inode(&dir, "a.txt"));
        assert_eq!(opened(&root, b"/sub/b.bin"), inode(&dir, "sub/b.bin"));
        assert_eq!(opened(&root, b"/sub//b.bin"), inode(&dir, "sub/b.bin"));
        assert_eq!(opened(&root, b"/empty"), inode(&dir, "empty"));
    }

    #[test]
    fn leading_slashes_stay_inside() {
        let (dir, root) = tree();
        assert_eq!(opened(&root, b"///a.txt"), inode(&dir, "a.txt"));
        assert_eq!(opened(&root, b"//etc/passwd"), Err(Status::NOT_FOUND));
        assert_eq!(opened(&root, b"/etc/passwd"), Err(Status::NOT_FOUND));
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
            assert_eq!(opened(&root, p.as_bytes()), Err(Status::BAD_REQUEST), "{p}");
        }
    }

    #[test]
    fn dots_inside_names_are_names() {
        let (dir, root) = tree();
        std::fs::write(dir.path().join("..a"), b"x").unwrap();
        std::fs::write(dir.path().join("..."), b"x").unwrap();
        assert_eq!(opened(&root, b"/..a"), inode(&dir, "..a"));
        assert_eq!(opened(&root, b"/..."), inode(&dir, "..."));
        assert_eq!(opened(&root, b"/.hidden"), Err(Status::NOT_FOUND));
    }

    #[test]
    fn empty_paths_directories_and_missing_files_are_404() {
        let (dir, root) = tree();
        for p in [
            "", "/", "//", "/dir", "/dir/", "/sub", "/missing", "/a.txt/", "/a.txt/x",
        ] {
            assert_eq!(opened(&root, p.as_bytes()), Err(Status::NOT_FOUND), "{p}");
        }
        // Not a regular file: a FIFO is refused, and opening it does not block.
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
        assert_eq!(opened(&root, b"/fifo"), Err(Status::NOT_FOUND));
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

        assert_eq!(opened(&root, b"/out"), Err(Status::NOT_FOUND));
        assert_eq!(opened(&root, b"/outdir/secret"), Err(Status::NOT_FOUND));
        assert_eq!(opened(&root, b"/in"), inode(&dir, "a.txt"));
        assert_eq!(opened(&root, b"/sub/rel"), inode(&dir, "a.txt"));
        assert_eq!(opened(&root, b"/subdir/b.bin"), inode(&dir, "sub/b.bin"));
        assert_eq!(opened(&root, b"/subdir"), Err(Status::NOT_FOUND));
    }

    #[test]
    fn a_sibling_with_the_root_as_prefix_is_outside() {
        let parent = tempfile::tempdir().unwrap();
        std::fs::create_dir(parent.path().join("www")).unwrap();
        std::fs::create_dir(parent.path().join("www2")).unwrap();
        std::fs::write(parent.path().join("www2/f"), b"x").unwrap();
        symlink(parent.path().join("www2/f"), parent.path().join("www/f")).unwrap();
        let root = DocRoot::new(&parent.path().join("www")).unwrap();
        assert_eq!(opened(&root, b"/f"), Err(Status::NOT_FOUND));
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
        assert_eq!(again.fd(), a.fd());
        assert_eq!(files.len(), 1);
        let b = files.get(b"/sub/b.bin").unwrap();
        assert_ne!(b.fd(), a.fd());
        assert_eq!(b.size, 3000);
        assert_eq!(files.len(), 2);
        // The descriptor does not leak into children.
        // SAFETY: fcntl on a descriptor the table keeps open.
        let flags = unsafe { libc::fcntl(a.fd(), libc::F_GETFD) };
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
    fn every_spelling_of_a_file_is_one_entry() {
        let (_dir, root) = tree();
        let mut files = Files::new(root, 16);
        let a = files.get(b"/sub/b.bin").unwrap();
        for n in 1..200 {
            let spelling = format!("{}sub{}b.bin", "/".repeat(n), "/".repeat(n % 7 + 1));
            assert_eq!(
                files.get(spelling.as_bytes()).unwrap().fd(),
                a.fd(),
                "{spelling}"
            );
        }
        assert_eq!(files.len(), 1);
        // A trailing slash asks for a directory.
        assert_eq!(files.get(b"/sub/b.bin/").unwrap_err(), Status::NOT_FOUND);
    }

    #[test]
    fn a_full_table_lets_the_least_recently_used_file_go() {
        let (_dir, root) = tree();
        let mut files = Files::new(root, 2);
        let a = files.get(b"/a.txt").unwrap();
        files.get(b"/empty").unwrap();
        files.get(b"/a.txt").unwrap(); // now /empty is the least recently used
        let b = files.get(b"/sub/b.bin").unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files.get(b"/a.txt").unwrap().fd(), a.fd());
        assert_eq!(files.get(b"/sub/b.bin").unwrap().fd(), b.fd());
        // An answer still holding an evicted file can still send it.
        files.get(b"/empty").unwrap();
        files.get(b"/a.txt").unwrap();
        let mut body = Vec::new();
        b.read_into(&mut body).unwrap();
        assert_eq!(body, [7u8; 3000]);
        assert_eq!(files.get(b"/missing").unwrap_err(), Status::NOT_FOUND);
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_mid_lookup_never_leads_outside() {
        let (dir, _root) = tree();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("b.bin"), b"secret").unwrap();
        let at = |name: &str| dir.path().join(name);
        std::fs::create_dir(at("d")).unwrap();
        std::fs::write(at("d/b.bin"), b"inside").unwrap();
        symlink(outside.path(), at("d.link")).unwrap();
        // A local user who can write in the root turns `d` from a directory into a
        // symlink out of the root and back, again and again.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flipper = {
            let stop = stop.clone();
            let names = [at("d"), at("d.dir"), at("d.link")];
            std::thread::spawn(move || {
                let [d, parked, link] = names;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::fs::rename(&d, &parked).unwrap();
                    std::fs::rename(&link, &d).unwrap();
                    std::fs::rename(&d, &link).unwrap();
                    std::fs::rename(&parked, &d).unwrap();
                }
            })
        };
        let (mut inside, mut body) = (0, Vec::new());
        for _ in 0..20_000 {
            // A table of one, emptied each time, so every request looks the path up.
            let mut files = Files::new(DocRoot::new(dir.path()).unwrap(), 1);
            if let Ok(file) = files.get(b"/d/b.bin") {
                body.clear();
                file.read_into(&mut body).unwrap();
                assert_eq!(body, b"inside", "served from outside the root");
                inside += 1;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        flipper.join().unwrap();
        assert!(inside > 0, "the file inside was never served");
    }

    #[test]
    fn normalise_keeps_one_spelling() {
        let mut out = Vec::new();
        for (path, want) in [
            ("/a", "a"),
            ("//a", "a"),
            ("/a//b///c", "a/b/c"),
            ("a/b", "a/b"),
            ("/a/", "a/"),
            ("///", ""),
            ("", ""),
        ] {
            normalise(path.as_bytes(), &mut out).unwrap();
            assert_eq!(out, want.as_bytes(), "{path}");
        }
        assert_eq!(normalise(b"/a/./b", &mut out), Err(Status::BAD_REQUEST));
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
        assert!(read_range(-1, 0, 4, &mut out).is_err());
        assert_eq!(out, b"keep");
    }
}
