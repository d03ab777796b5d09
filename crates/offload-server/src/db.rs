//! The database tier behind dynamic pages (seed 003's application servers query a
//! database). SQLite is embedded: a query is CPU on the host thread. PostgreSQL is a
//! server of its own, reached over a socket: the host thread waits for each answer, as
//! a thread of a web application does.
//!
//! The data is one catalogue table, `offload_items(id, name, price)` with ids 1 to
//! `rows`; [`Db::fill`] writes it, the same rows for both backends. A page asks for
//! `count` items from `key` on, one point query each (the way many applications fetch
//! a page's items), and folds what came back into an FNV-1a digest, so a client can
//! check that the rows really came from the database.

use std::path::PathBuf;
use std::time::Instant;

/// The table every page queries.
pub const TABLE: &str = "offload_items";

/// Where the data lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DbConfig {
    /// A SQLite file, opened by the server.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (`postgresql://user@host:port/db`).
    Postgres(String),
}

impl DbConfig {
    /// `postgresql://...` or `postgres://...` is PostgreSQL; anything else a SQLite path.
    pub fn parse(text: &str) -> DbConfig {
        if text.starts_with("postgresql://") || text.starts_with("postgres://") {
            DbConfig::Postgres(text.to_string())
        } else {
            DbConfig::Sqlite(PathBuf::from(text.strip_prefix("sqlite:").unwrap_or(text)))
        }
    }
}

enum Backend {
    Sqlite(rusqlite::Connection),
    Postgres(postgres::Client),
}

/// An open database with its table checked.
pub struct Db {
    backend: Backend,
    /// PostgreSQL's point query, prepared once the table is known to exist.
    lookup: Option<postgres::Statement>,
    rows: u64,
}

/// What one page fetched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    pub rows: u32,
    pub digest: u64,
    /// Time spent in the database calls, nanoseconds (wall time: a PostgreSQL query
    /// waits for another process).
    pub elapsed_ns: u64,
}

const LOOKUP: &str = "SELECT id, name, price FROM offload_items WHERE id = $1";
const SQLITE_LOOKUP: &str = "SELECT id, name, price FROM offload_items WHERE id = ?1";

impl Db {
    /// Connect and check that the table is there and not empty.
    pub fn open(config: &DbConfig) -> Result<Db, String> {
        let backend = connect(config)?;
        let mut db = Db {
            backend,
            lookup: None,
            rows: 0,
        };
        db.rows = db.count().map_err(|e| {
            format!(
                "{}: no readable table {TABLE} ({e}); fill it first: offload workload db",
                describe(config)
            )
        })?;
        if db.rows == 0 {
            return Err(format!(
                "{}: table {TABLE} is empty; fill it: offload workload db",
                describe(config)
            ));
        }
        if let Backend::Postgres(client) = &mut db.backend {
            db.lookup = Some(client.prepare(LOOKUP).map_err(|e| e.to_string())?);
        }
        Ok(db)
    }

    /// Write the table afresh with `rows` items (the same content in both backends:
    /// name `item 00000042`, price `id * 7919 mod 100000`).
    pub fn fill(config: &DbConfig, rows: u64) -> Result<(), String> {
        let fail = |e: String| format!("{}: cannot fill {TABLE}: {e}", describe(config));
        let rows = i64::try_from(rows).map_err(|_| fail("too many rows".into()))?;
        match connect(config)? {
            Backend::Sqlite(mut conn) => {
                let tx = conn.transaction().map_err(|e| fail(e.to_string()))?;
                tx.execute_batch(&format!(
                    "DROP TABLE IF EXISTS {TABLE};
                     CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
                                           price INTEGER NOT NULL);"
                ))
                .map_err(|e| fail(e.to_string()))?;
                tx.execute(
                    &format!(
                        "WITH RECURSIVE s(i) AS (SELECT 1 WHERE ?1 >= 1
                                                  UNION ALL SELECT i + 1 FROM s
                                                  WHERE i < ?1)
                         INSERT INTO {TABLE} SELECT i, printf('item %08d', i),
                                                    (i * 7919) % 100000 FROM s"
                    ),
                    [rows],
                )
                .map_err(|e| fail(e.to_string()))?;
                tx.commit().map_err(|e| fail(e.to_string()))
            }
            Backend::Postgres(mut client) => {
                let mut tx = client.transaction().map_err(|e| fail(e.to_string()))?;
                tx.batch_execute(&format!(
                    "DROP TABLE IF EXISTS {TABLE};
                     CREATE TABLE {TABLE} (id BIGINT PRIMARY KEY, name TEXT NOT NULL,
                                           price BIGINT NOT NULL);"
                ))
                .map_err(|e| fail(e.to_string()))?;
                tx.execute(
                    &format!(
                        "INSERT INTO {TABLE} SELECT i, 'item ' || lpad(i::text, 8, '0'),
                                                    (i * 7919) % 100000
                         FROM generate_series(1, $1::bigint) AS i"
                    ),
                    &[&rows],
                )
                .map_err(|e| fail(e.to_string()))?;
                tx.commit().map_err(|e| fail(e.to_string()))
            }
        }
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// `count` point queries for ids `key`, `key + 1`, ... (wrapping past the last row).
    pub fn page(&mut self, key: u64, count: u32) -> Result<Page, String> {
        let started = Instant::now();
        let mut digest = Fnv::new();
        let mut found = 0;
        for i in 0..u64::from(count) {
            let id = ((key + i) % self.rows + 1) as i64;
            let row = match &mut self.backend {
                Backend::Sqlite(conn) => {
                    let mut lookup = conn
                        .prepare_cached(SQLITE_LOOKUP)
                        .map_err(|e| e.to_string())?;
                    let mut rows = lookup.query([id]).map_err(|e| e.to_string())?;
                    match rows.next().map_err(|e| e.to_string())? {
                        Some(r) => Some((
                            r.get::<_, i64>(0).map_err(|e| e.to_string())?,
                            r.get::<_, String>(1).map_err(|e| e.to_string())?,
                            r.get::<_, i64>(2).map_err(|e| e.to_string())?,
                        )),
                        None => None,
                    }
                }
                Backend::Postgres(client) => client
                    .query_opt(self.lookup.as_ref().expect("prepared at open"), &[&id])
                    .map_err(|e| e.to_string())?
                    .map(|r| {
                        (
                            r.get::<_, i64>(0),
                            r.get::<_, String>(1),
                            r.get::<_, i64>(2),
                        )
                    }),
            };
            if let Some((id, name, price)) = row {
                digest.row(id, &name, price);
                found += 1;
            }
        }
        Ok(Page {
            rows: found,
            digest: digest.0,
            elapsed_ns: started.elapsed().as_nanos() as u64,
        })
    }

    fn count(&mut self) -> Result<u64, String> {
        let sql = format!("SELECT COUNT(*) FROM {TABLE}");
        let n: i64 = match &mut self.backend {
            Backend::Sqlite(conn) => conn
                .query_row(&sql, [], |r| r.get(0))
                .map_err(|e| e.to_string())?,
            Backend::Postgres(client) => client
                .query_one(sql.as_str(), &[])
                .map_err(|e| e.to_string())?
                .get(0),
        };
        Ok(n.max(0) as u64)
    }
}

fn connect(config: &DbConfig) -> Result<Backend, String> {
    let fail = |e: String| format!("{}: cannot connect: {e}", describe(config));
    match config {
        DbConfig::Sqlite(path) => rusqlite::Connection::open(path)
            .map(Backend::Sqlite)
            .map_err(|e| fail(e.to_string())),
        DbConfig::Postgres(url) => postgres::Client::connect(url, postgres::NoTls)
            .map(Backend::Postgres)
            .map_err(|e| fail(e.to_string())),
    }
}

/// The database named for a message, without a password that a URL might carry.
fn describe(config: &DbConfig) -> String {
    match config {
        DbConfig::Sqlite(path) => format!("database {}", path.display()),
        DbConfig::Postgres(url) => {
            let shown = match (url.find("://"), url.rfind('@')) {
                (Some(scheme), Some(at)) if at > scheme => {
                    format!("{}://…@{}", &url[..scheme], &url[at + 1..])
                }
                _ => url.clone(),
            };
            format!("database {shown}")
        }
    }
}

/// FNV-1a, 64 bits, over each row as `id|name|price\n`.
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn row(&mut self, id: i64, name: &str, price: i64) {
        self.bytes(format!("{id}|{name}|{price}\n").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(rows: u64) -> (tempfile::TempDir, DbConfig) {
        let dir = tempfile::tempdir().unwrap();
        let config = DbConfig::Sqlite(dir.path().join("items.db"));
        Db::fill(&config, rows).unwrap();
        (dir, config)
    }

    #[test]
    fn a_page_folds_the_rows_it_fetched() {
        let (_dir, config) = filled(100);
        let mut db = Db::open(&config).unwrap();
        assert_eq!(db.rows(), 100);
        let page = db.page(98, 3).unwrap();
        // Ids 99, 100, then 1: the key wraps past the last row.
        let mut expected = Fnv::new();
        expected.row(99, "item 00000099", 99 * 7919 % 100_000);
        expected.row(100, "item 00000100", 100 * 7919 % 100_000);
        expected.row(1, "item 00000001", 7919);
        assert_eq!((page.rows, page.digest), (3, expected.0));
        assert_eq!(db.page(98, 0).unwrap().rows, 0);
    }

    #[test]
    fn a_missing_or_empty_table_says_how_to_fill_it() {
        let dir = tempfile::tempdir().unwrap();
        let config = DbConfig::Sqlite(dir.path().join("none.db"));
        let e = Db::open(&config).err().unwrap();
        assert!(e.contains("offload workload db"), "{e}");
        let (_dir, empty) = filled(0);
        assert!(Db::open(&empty).err().unwrap().contains("is empty"));
    }

    #[test]
    fn urls_pick_the_backend_and_messages_hide_passwords() {
        let pg = DbConfig::parse("postgresql://u:secret@127.0.0.1:5433/db");
        assert!(matches!(pg, DbConfig::Postgres(_)));
        assert_eq!(describe(&pg), "database postgresql://…@127.0.0.1:5433/db");
        assert_eq!(
            DbConfig::parse("sqlite:/tmp/a.db"),
            DbConfig::Sqlite("/tmp/a.db".into())
        );
        assert_eq!(DbConfig::parse("a.db"), DbConfig::Sqlite("a.db".into()));
    }

    #[test]
    fn fnv_matches_the_published_vectors() {
        let mut h = Fnv::new();
        assert_eq!(h.0, 0xcbf2_9ce4_8422_2325);
        h.bytes(b"a");
        assert_eq!(h.0, 0xaf63_dc4c_8601_ec8c);
        h = Fnv::new();
        h.bytes(b"foobar");
        assert_eq!(h.0, 0x8594_4171_f739_67e8);
    }
}
