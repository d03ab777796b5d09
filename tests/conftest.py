"""Shared helpers: the test tiers, build scenarios from spec strings, locate the bundled
examples, and the objects table and checks the request-stream tests share."""

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import settings

from offloadlab import _core, scenario

EXAMPLES = Path(__file__).resolve().parents[1] / "python" / "offloadlab" / "examples"

# Test tiers (docs/design.md). A test's markers follow from the fixtures it uses, so
# nobody has to remember them: `testbed` tests put real load on the machine and run one
# at a time after the rest (`pytest -m testbed`); `external` tests need a program or a
# privilege beyond Python and Rust. Everything else runs on every core (`pytest -n auto
# -m "not testbed"`).
TIER_OF_FIXTURE = {"testbed": "testbed", "postgres_url": "external", "squid_binary": "external",
                   "chromium": "external", "as_root": "external", "nginx_binary": "external"}
# The calls that start the testbed's server or load generator in this process.
_REAL_LOAD = ("serve", "load", "load_cli")
_current: pytest.Item | None = None


def pytest_collection_modifyitems(items):
    for item in items:
        for marker in sorted({TIER_OF_FIXTURE[f] for f in item.fixturenames
                              if f in TIER_OF_FIXTURE}):
            item.add_marker(marker)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    global _current
    _current = item  # before its fixtures are made: a module fixture may start a server


def _guarded(name):
    call = getattr(_core, name)

    def guard(*args, **kwargs):
        if _current is not None and _current.get_closest_marker("testbed") is None:
            pytest.fail(f"{_current.nodeid} starts the testbed ({name}) without the "
                        "`testbed` fixture: add it to the test or to the fixture that "
                        "starts the server, so the test runs in the serial tier",
                        pytrace=False)
        return call(*args, **kwargs)
    return guard


for _name in _REAL_LOAD:
    setattr(_core, _name, _guarded(_name))


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """No test reads or writes the user's cache (the floors a study stores there)."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def testbed():
    """Marks a test (or a fixture's users) as real load on this machine."""


def _server_binary(name: str) -> Path:
    """A server's binary on PATH or in /usr/sbin (Debian's, which PATH may lack); fails
    with the apt-get line when it is missing."""
    sbin = f"/usr/sbin/{name}"
    found = shutil.which(name) or (sbin if os.access(sbin, os.X_OK) else None)
    if found is None:
        pytest.fail(f"{name} is not installed; apt-get install {name} (.ci/run does)")
    return Path(found)


@pytest.fixture(scope="session")
def squid_binary() -> Path:
    """Squid's binary (seed 001's proxy); .ci/run installs it."""
    return _server_binary("squid")


@pytest.fixture(scope="session")
def nginx_binary() -> Path:
    """nginx's binary (a user's server under test in the study); .ci/run installs it."""
    return _server_binary("nginx")


@pytest.fixture(scope="session")
def chromium() -> tuple[Path, Path]:
    """Headless Chromium and its driver, from Debian's packages (.ci/run installs them)."""
    paths = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found; run `apt-get install chromium "
                    "chromium-driver` (CI installs them)")
    return paths


@pytest.fixture(scope="session")
def as_root():
    """Root with ip and ethtool, for tests that make network namespaces."""
    if os.geteuid() != 0:
        pytest.fail("this test makes network namespaces and needs root")
    missing = [tool for tool in ("ip", "ethtool") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found; apt-get install iproute2 ethtool "
                    "(.ci/run does)")

# derandomize and no example database: every run, here or in CI, tests the same examples.
settings.register_profile("offloadlab", derandomize=True, database=None, deadline=None,
                          max_examples=50, print_blob=True)
settings.load_profile("offloadlab")

# Example (b) of reference 000 section 2.10: a class-3-like "large file" class.
LARGE = dict(app="exp(mean=1ms)", host_proto="lognormal(mean=9ms, sigma=1)",
             host_overhead="exp(mean=2.33ms)", engine_overhead="exp(mean=0.5ms)",
             engine_proto="lognormal(mean=2.5ms, sigma=1)")
# Example (c): a class-0-like "small file" class.
SMALL = dict(app="exp(mean=1ms)", host_proto="lognormal(mean=0.2ms, sigma=0.5)",
             host_overhead="exp(mean=0.6ms)", engine_overhead="exp(mean=0.1ms)",
             engine_proto="lognormal(mean=0.15ms, sigma=0.5)")


@pytest.fixture(scope="session")
def served_set(tmp_path_factory) -> Path:
    """A small file set on disk for tests that serve it: 20 files up to 100 kB."""
    from offloadlab.workload import fileset
    from offloadlab.workload.specs import FileSetSpec

    root = tmp_path_factory.mktemp("served")
    spec = FileSetSpec(name="small", n_files=20, max_bytes=100_000, seed=3)
    fileset.materialise(fileset.generate(spec), root)
    return root


def klass(name="c", rate=50.0, offload=1.0, base=None, **costs):
    """One [[class]] table as a dict; ``costs`` override the spec strings of ``base``."""
    return {"name": name, "rate": rate, **(base or LARGE), **costs, "offload": offload}


def make_scenario(classes, base_dir=None, **options):
    """A Scenario from a list of class dicts (see :func:`klass`) and option overrides."""
    data = {"name": "test", "class": list(classes)}
    if options:
        data["options"] = options
    return scenario.from_dict(data, "test.toml", base_dir)


def one_class(rate=50.0, offload=1.0, base=None, options=None, **costs):
    """A one-class scenario from spec strings."""
    return make_scenario([klass("c", rate, offload, base, **costs)], **(options or {}))


def example(name):
    return scenario.load(EXAMPLES / f"{name}.toml")


@pytest.fixture
def examples_dir():
    return EXAMPLES


# Fixed seeds make every statistical test deterministic; a p-value floor of 0.001 means a
# correct generator fails one of them for one seed in a thousand, a wrong one almost always.
P_FLOOR = 1e-3


def objects_table(n=40, alpha=1.0):
    """n objects, Zipf(alpha) popularity, sizes spread over seed 000's five classes."""
    sizes = np.array([300, 4_000, 40_000, 400_000, 3_000_000])[np.arange(n) % 5] + np.arange(n)
    weights = 1.0 / np.arange(1, n + 1) ** alpha
    return pd.DataFrame({"path": [f"c{i % 5}/f{i:03d}.bin" for i in range(n)],
                         "size_bytes": sizes.astype(np.int64), "probability": weights,
                         "class": np.arange(n) % 5})


OBJ = objects_table()


def check_keep_alive(frame):
    """keep_alive is false exactly on the last request of each connection."""
    last = frame.groupby("conn_id").tail(1).index
    assert not frame.loc[last, "keep_alive"].any()
    assert frame.drop(last)["keep_alive"].all()


@pytest.fixture(scope="session")
def postgres_url():
    """A private PostgreSQL server from the distribution's packages (.ci/run installs
    them), listening on loopback only, stopped and removed at the end. As root it runs
    as the packages' ``postgres`` user, since PostgreSQL refuses to run as root."""
    import os
    import shutil
    import socket
    import subprocess
    import tempfile

    initdb = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not initdb:
        pytest.fail("PostgreSQL is not installed; apt-get install postgresql (.ci/run does)")
    bin_dir = initdb[-1].parent
    data = Path(tempfile.mkdtemp(prefix="offload-pg-"))
    as_user = []
    if os.geteuid() == 0:
        shutil.chown(data, "postgres", "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:  # a free port; the server binds it a moment later
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def pg(*args, timeout=60):
        done = subprocess.run([*as_user, *args], capture_output=True, text=True,
                              timeout=timeout)
        assert done.returncode == 0, f"{args[0]}: {done.stderr}"

    pg(str(bin_dir / "initdb"), "-D", str(data / "db"), "-A", "trust", "-U", "postgres",
       "--no-sync", "-E", "UTF8")
    options = (f"-c listen_addresses=127.0.0.1 -c port={port} -c fsync=off "
               f"-c unix_socket_directories={data}")
    pg(str(bin_dir / "pg_ctl"), "-D", str(data / "db"), "-o", options, "-l",
       str(data / "log"), "-w", "-t", "30", "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        pg(str(bin_dir / "pg_ctl"), "-D", str(data / "db"), "-m", "immediate", "-w", "stop")
        shutil.rmtree(data, ignore_errors=True)
