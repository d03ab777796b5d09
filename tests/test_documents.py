"""The typed seam between Rust and Python (offloadlab.documents): a real server's
stats documents and a real load report parse into the dataclasses and back to the same
JSON, so each side knows every key of the other; a missing or ill-typed key is named."""

from __future__ import annotations

import json

import pytest
from document_samples import stats_document

from offloadlab.documents import DocumentError, LoadReport, ServerStats
from offloadlab.testbed import load
from offloadlab.testbed.server import ServerOptions, running
from offloadlab.workload import fileset, stream

# Between them these fill every optional section: handoff and placement, the cache.
SERVERS = {"inline": dict(mode="inline"),
           "placement": dict(mode="handoff", handoff="P-N-FCFS", placement=(10_000,)),
           "cache": dict(mode="engine", app_offload="cache")}


@pytest.fixture(scope="module", params=list(SERVERS))
def ran(request, served_set, tmp_path_factory, testbed):
    """A short run: the final stats document as the server returned it (read) and as it
    wrote it to its stats file, a live one, and the load report."""
    manifest = fileset.read_manifest(served_set)
    requests = stream.poisson(manifest, 200, duration_s=0.3, seed=4)
    path = tmp_path_factory.mktemp("stats") / "stats.json"
    options = ServerOptions(root=served_set, stats_path=path, **SERVERS[request.param])
    with running(options) as server:
        result = load.run(server.url, requests, manifest, threads=1)
        live = json.loads(server.control.snapshot())
    written = json.loads(path.read_text())
    return request.param, server.final, written, live, result.report, len(requests)


def test_real_stats_documents_parse_with_every_key_known(ran):
    name, stats, written, live, _, _ = ran
    for doc in (written, live):
        assert ServerStats.from_json(doc).to_json() == doc
    # What the server returned, read once, is the document it wrote.
    assert stats.to_json() == written
    assert stats.final and not ServerStats.from_json(live).final and stats.requests > 0
    assert stats.has_engine() == (name != "inline")
    assert (stats.placement is not None) == (name == "placement") == (stats.handoff is not None)
    assert (stats.cache is not None) == (name == "cache")


def test_a_real_load_report_parses_with_every_key_known(ran):
    _, _, _, _, doc, sent = ran
    report = LoadReport.from_json(doc)
    assert report.to_json() == doc
    assert report.completed == sent and report.failed == 0
    assert report.total.count == sum(c.total.count for c in report.classes) == sent


def test_a_missing_key_is_named_with_its_path():
    doc = stats_document()
    del doc["per_request"]["engine_cpu_s"]
    with pytest.raises(DocumentError, match=r"ServerStats\.per_request: no key 'engine_cpu_s'"):
        ServerStats.from_json(doc)
    with pytest.raises(DocumentError, match="no key 'placement'"):
        ServerStats.from_json({k: v for k, v in stats_document().items() if k != "placement"})


def test_an_ill_typed_key_is_named_with_its_path():
    doc = stats_document()
    doc["threads"][0]["cpu_s"] = "0.5"
    with pytest.raises(DocumentError, match=r"ServerStats\.threads\[0\]\.cpu_s: '0\.5' is not"):
        ServerStats.from_json(doc)
    # A bool is not a count, though Python counts it as an int.
    with pytest.raises(DocumentError, match=r"ServerStats\.requests: True is not int"):
        ServerStats.from_json(stats_document(requests=True))
    # An integral number may stand for a float; null only where the Rust side has an Option.
    assert ServerStats.from_json(stats_document(elapsed_s=2)).elapsed_s == 2
    with pytest.raises(DocumentError, match=r"ServerStats\.elapsed_s: None is not float"):
        ServerStats.from_json(stats_document(elapsed_s=None))
