"""The typed seam between Rust and Python (offloadlab.documents): a real server's
stats documents and a real load report parse into the dataclasses and back to the same
JSON, so each side knows every key of the other; a missing or ill-typed key is named."""

from __future__ import annotations

import dataclasses
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
def ran(request, served_set):
    """A short run: the final and a live stats document, and the load report."""
    manifest = fileset.read_manifest(served_set)
    requests = stream.poisson(manifest, 200, duration_s=0.3, seed=4)
    with running(ServerOptions(root=served_set, **SERVERS[request.param])) as server:
        result = load.run(server.url, requests, manifest, threads=1)
        live = json.loads(server.control.snapshot())
    return request.param, server.final, live, result.report, len(requests)


def as_json(value):
    """A parsed document back as JSON values, under the documents' keys."""
    if dataclasses.is_dataclass(value):
        return {f.metadata.get("key", f.name): as_json(getattr(value, f.name))
                for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    return value


def test_real_stats_documents_parse_with_every_key_known(ran):
    name, final, live, _, _ = ran
    for doc in (final, live):
        stats = ServerStats.from_json(doc)
        assert as_json(stats) == doc
    stats = ServerStats.from_json(final)
    assert stats.final and not ServerStats.from_json(live).final and stats.requests > 0
    assert stats.has_engine() == (name != "inline")
    assert (stats.placement is not None) == (name == "placement") == (stats.handoff is not None)
    assert (stats.cache is not None) == (name == "cache")


def test_a_real_load_report_parses_with_every_key_known(ran):
    _, _, _, doc, sent = ran
    report = LoadReport.from_json(doc)
    assert as_json(report) == doc
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
