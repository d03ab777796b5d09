"""The database tier of seed 003's web tier: dynamic pages that fetch items from SQLite
or from a real PostgreSQL server, checked against what an independent client (Python's
sqlite3, the psql command) reads from the same database, including after a change, so
the server must really be asking the database. Also the three tiers together: the
engine's cache in front of the web tier in front of the database."""

from __future__ import annotations

import http.client
import sqlite3
import subprocess

import pytest
from typer.testing import CliRunner

from offloadlab.cli import app
from offloadlab.errors import InputError, RunError
from offloadlab.testbed.server import DB_TABLE, ServerOptions, fill_db, running
from offloadlab.workload import fileset

ROWS = 500


def fnv(rows) -> str:
    """FNV-1a 64 over ``id|name|price\\n`` per row, as the server folds them."""
    h = 0xcbf29ce484222325
    for row in rows:
        for b in "{}|{}|{}\n".format(*row).encode():
            h = ((h ^ b) * 0x100000001b3) % 2**64
    return f"{h:016x}"


def ids(key: int, count: int, rows: int = ROWS) -> list[int]:
    """The items a page asks for: from ``key`` on, wrapping past the last."""
    return [(key + i) % rows + 1 for i in range(count)]


def served_file(root, i: int) -> str:
    """The i-th file of a served file set, as its path under the root."""
    return str(fileset.read_manifest(root)["path"].iloc[i])


def page(server, path: str) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


@pytest.fixture
def sqlite_db(tmp_path):
    path = tmp_path / "items.db"
    fill_db(path, ROWS)
    return path


def sqlite_rows(path, wanted):
    with sqlite3.connect(path) as conn:
        found = {r[0]: r for r in conn.execute(
            f"SELECT id, name, price FROM {DB_TABLE} WHERE id IN "
            f"({','.join(map(str, wanted))})")}
    return [found[i] for i in wanted]


def test_sqlite_pages_carry_the_rows_the_database_holds(served_set, sqlite_db, testbed):
    name = served_file(served_set, 0)
    body = (served_set / name).read_bytes()
    with running(ServerOptions(root=served_set, db=sqlite_db, stats_endpoint=True)) as server:
        status, headers, got = page(server, f"/{name}?query=5&key={ROWS - 2}")
        assert status == 200 and got == body
        wanted = ids(ROWS - 2, 5)
        assert wanted == [ROWS - 1, ROWS, 1, 2, 3]
        assert headers["X-Db-Rows"] == "5"
        assert headers["X-Db-Digest"] == fnv(sqlite_rows(sqlite_db, wanted))
        # Change an item behind the server's back: the next page must show it.
        with sqlite3.connect(sqlite_db) as conn:
            conn.execute(f"UPDATE {DB_TABLE} SET price = 1 WHERE id = 1")
        _, again, _ = page(server, f"/{name}?query=5&key={ROWS - 2}")
        assert again["X-Db-Digest"] == fnv(sqlite_rows(sqlite_db, wanted))
        assert again["X-Db-Digest"] != headers["X-Db-Digest"]
        # Without a key the server picks one; the page still has its rows.
        _, random_key, _ = page(server, f"/{name}?query=3&work=50")
        assert random_key["X-Db-Rows"] == "3"
    database = server.final.database
    assert database.queries == 13
    assert database.time_s > 0


def test_the_table_holds_the_stated_items(sqlite_db):
    rows = sqlite_rows(sqlite_db, [1, 42, ROWS])
    assert rows == [(1, "item 00000001", 7919), (42, "item 00000042", 42 * 7919 % 100_000),
                    (ROWS, f"item {ROWS:08d}", ROWS * 7919 % 100_000)]
    with sqlite3.connect(sqlite_db) as conn:
        assert conn.execute(f"SELECT COUNT(*) FROM {DB_TABLE}").fetchone() == (ROWS,)


def psql_rows(url, wanted):
    sql = (f"SELECT id, name, price FROM {DB_TABLE} WHERE id IN "
           f"({','.join(map(str, wanted))})")
    done = subprocess.run(["psql", url, "-At", "-F", "|", "-c", sql], capture_output=True,
                          text=True, timeout=30, check=True)
    found = {int(r.split("|")[0]): (int(r.split("|")[0]), r.split("|")[1], int(r.split("|")[2]))
             for r in done.stdout.splitlines()}
    return [found[i] for i in wanted]


def test_postgresql_pages_through_the_engine_match_psql(served_set, postgres_url, testbed):
    fill_db(postgres_url, ROWS)
    name = served_file(served_set, 1)
    options = ServerOptions(root=served_set, mode="engine", host_core=0, engine_core=1,
                            db=postgres_url, stats_endpoint=True)
    with running(options) as server:
        status, headers, got = page(server, f"/{name}?query=4&key=10&work=100")
        assert status == 200 and got == (served_set / name).read_bytes()
        wanted = ids(10, 4)
        assert headers["X-Db-Digest"] == fnv(psql_rows(postgres_url, wanted))
        subprocess.run(["psql", postgres_url, "-c",
                        f"UPDATE {DB_TABLE} SET name = 'changed' WHERE id = 12"],
                       capture_output=True, timeout=30, check=True)
        _, again, _ = page(server, f"/{name}?query=4&key=10")
        assert again["X-Db-Digest"] == fnv(psql_rows(postgres_url, wanted))
        assert again["X-Db-Digest"] != headers["X-Db-Digest"]
    assert server.final.database.queries == 8
    # The host thread waited for PostgreSQL: the time shows, per request.
    assert server.final.per_request.db_s > 0


def test_three_tiers_the_engines_cache_spares_the_database(served_set, sqlite_db, testbed):
    name = served_file(served_set, 2)
    options = ServerOptions(root=served_set, mode="engine", host_core=0, engine_core=1,
                            app_offload="cache", db=sqlite_db)
    with running(options) as server:
        path = f"/{name}?query=2&key=7&cacheable=1"
        first = page(server, path)
        second = page(server, path)
        assert first[0] == second[0] == 200 and first[2] == second[2]
    # The second answer came from the engine's cache: one page's queries in all.
    assert server.final.database.queries == 2
    assert server.final.cache.hits == 1


def test_a_page_that_needs_a_database_the_server_lacks_is_503(served_set, testbed):
    name = served_file(served_set, 3)
    with running(ServerOptions(root=served_set)) as server:
        assert page(server, f"/{name}?query=1")[0] == 503
        # Not a number: an ordinary URL's parameter, so the file is served.
        assert page(server, f"/{name}?query=x")[0] == 200


def test_bad_databases_are_refused_naming_the_fix(served_set, tmp_path, testbed):
    with pytest.raises(InputError, match="no such SQLite file"):
        ServerOptions(root=served_set, db=tmp_path / "none.db").check()
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    with pytest.raises(RunError, match="offload workload db"), \
            running(ServerOptions(root=served_set, db=empty)):
        pass
    with pytest.raises(RunError, match="cannot connect"):
        fill_db("postgresql://postgres@127.0.0.1:1/none", 10)
    with pytest.raises(InputError, match="rows"):
        fill_db(tmp_path / "x.db", 0)


def test_the_db_command_fills_a_table(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["workload", "db", "--db", str(tmp_path / "c.db"),
                                 "--rows", "250"])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(tmp_path / "c.db") as conn:
        assert conn.execute(f"SELECT COUNT(*) FROM {DB_TABLE}").fetchone() == (250,)
    bad = runner.invoke(app, ["workload", "db", "--db", str(tmp_path / "no/such/dir.db")])
    assert bad.exit_code == 2 and "does not exist" in bad.output
