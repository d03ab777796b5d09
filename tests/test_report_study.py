"""The study report: each figure from synthetic study tables and their edge cases, the
HTML page's offline self-containment, and a real browser (headless Chromium) showing it."""

import base64
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from study_samples import handoff_result, study_tables

from offloadlab.report import study
from offloadlab.report.html import write_report
from offloadlab.results import jsonable
from offloadlab.study import pipeline
from offloadlab.study_tables import COLUMNS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NOTE = "U_engine <b>not</b> measured & ignored"


def drawn(fig: Figure) -> int:
    """Artists carrying data across the figure's axes: lines, collections, patches."""
    return sum(len(ax.lines) + len(ax.collections) + len(ax.patches) for ax in fig.axes)


@pytest.fixture(scope="module")
def tables():
    return study_tables()


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """report.html of the sample, with a note holding markup and one scenario file that
    exists and one that does not."""
    out = tmp_path_factory.mktemp("study")
    t = study_tables()
    t.meta["notes"] = [*t.meta["notes"], NOTE]
    t.meta["more_notes"] = ["class c2, engine: T missed its target"]
    t.meta["scenario_files"] = ["study.toml", "missing.toml"]
    (out / "study.toml").write_text("# the study's scenario\n")
    return write_report(t, out, pipeline.sections(handoff_result()))


class Page(HTMLParser):
    """The img sources, link targets and text of a page."""

    def __init__(self, text: str):
        super().__init__()
        self.srcs, self.hrefs, self.text = [], [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.srcs.append(a["src"])
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])

    def handle_data(self, data):
        self.text.append(data)


@pytest.mark.parametrize("name", list(study.FIGURES))
def test_every_figure_draws_the_sample(tables, name):
    kind = study.FIGURES[name]
    fig = kind.draw(*(getattr(tables, t) for t in kind.tables))
    assert isinstance(fig, Figure)
    assert fig.axes and drawn(fig) > 0
    assert len(fig.legends) + sum(ax.get_legend() is not None for ax in fig.axes) > 0


def test_utilisation_panels_are_per_class_with_model_sim_and_testbed(tables):
    fig = study.utilisation_figure(tables.points)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["class c0", "class c2", "class c3"]
    for ax in panels:
        styles = {line.get_linestyle() for line in ax.lines}
        assert {"-", "--"} <= styles  # model host and engine lines
        # ... and the seed's model beside them, faint.
        assert any(line.get_alpha() == study.SEED["alpha"] for line in ax.lines)
        assert ax.collections  # simulator bands
        # Calibration points are hollow, validation points filled.
        faces = {str(line.get_markerfacecolor()) for line in ax.lines if line.get_marker() == "o"}
        assert "white" in faces and len(faces) >= 2


def test_delay_figure_leaves_out_saturated_points(tables):
    fig = study.delay_figure(tables.points)
    for ax in fig.axes:
        assert ax.get_yscale() == "log"
        for line in ax.lines:
            assert np.isfinite(np.asarray(line.get_ydata(), dtype=float)).all()


def test_error_figure_relative_error_at_testbed_points(tables):
    """The model's U_host at a testbed rate over the measured one, minus 1, in %."""
    p = tables.points
    bed = p[(p["source"] == "testbed") & (p["mode"] == "inline") & (p["class"] == "c2")]
    model = p[(p["source"] == "model") & (p["mode"] == "inline") & (p["class"] == "c2")]
    expect = np.interp(bed["rate"], model["rate"], model["U_host"]) / bed["U_host"] - 1
    fig = study.error_figure(p)
    ax = fig.axes[1]  # U_host row, class c2
    got = np.concatenate([line.get_ydata() for line in ax.lines if line.get_marker() == "o"])
    for e in expect * 100:
        assert np.isclose(got, e).any()


def test_inline_only_single_class(tmp_path):
    t = study_tables(classes=("c2",), modes=("inline",))
    assert t.points.loc[t.points["source"] == "model", "U_engine"].isna().all()
    written = study.write_figures(t, tmp_path)
    assert list(written) == list(study.FIGURES)
    fig = study.utilisation_figure(t.points)
    assert not [line for ax in fig.axes for line in ax.lines if line.get_linestyle() == "--"]


def empty(name: str) -> pd.DataFrame:
    """A study table with its columns and no rows."""
    return pd.DataFrame(columns=list(COLUMNS[name]))


def test_empty_tables_skip_their_figures(tmp_path):
    t = study_tables(classes=("c0",))
    for name in ("latency", "cpu", "saturation"):
        setattr(t, name, empty(name))
    assert study.latency_figure(t.latency) is None
    assert list(study.write_figures(t, tmp_path)) == ["utilisation", "delay", "error"]
    # A study without the handoff experiment says so in its section.
    page = write_report(t, tmp_path / "no-handoff", pipeline.sections(None)).read_text()
    section = page.split("Connection handoff on the testbed</h2>")[1]
    assert "did not run" in section.split("<h2>")[0]
    t.points = empty("points")
    assert study.write_figures(t, tmp_path / "none") == {}
    assert write_report(t, tmp_path / "html").is_file()


def test_missing_and_infinite_values_do_not_break_figures(tmp_path):
    """None in object columns, an all-NaN column, inf measurements: left out, no warning
    (pytest turns RuntimeWarnings into errors)."""
    t = study_tables(classes=("c0", "c3"))
    points = t.points.astype(object)
    points["U_engine"] = None
    points.loc[points["source"] == "testbed", "T"] = np.inf
    t.points = points
    t.latency = t.latency.assign(total_s=np.where(np.arange(len(t.latency)) % 7, t.latency[
        "total_s"], np.nan))
    assert len(study.write_figures(t, tmp_path)) == len(study.FIGURES)


def test_report_is_self_contained(report):
    text = report.read_text(encoding="utf-8")
    page = Page(text)
    assert not re.search(r"https?://", text)
    assert "<script" not in text.lower()
    figures = sorted((report.parent / "figures").glob("*.png"))
    # The study's figures and the handoff section's.
    assert len(page.srcs) == len(figures) == len(study.FIGURES) + 1
    for src in page.srcs:
        head, data = src.split(",", 1)
        assert head == "data:image/png;base64"
        assert base64.b64decode(data).startswith(PNG_MAGIC)
    for href in page.hrefs:
        assert not urlparse(href).scheme, href
        assert (report.parent / unquote(href)).is_file(), href
    assert "missing.toml" in "".join(page.text) and "missing.toml" not in page.hrefs


def test_report_escapes_text_and_orders_sections(report):
    text = report.read_text(encoding="utf-8")
    assert "<b>not</b>" not in text
    assert "U_engine &lt;b&gt;not&lt;/b&gt; measured &amp; ignored" in text
    headings = re.findall(r"<h2>([^<]+)</h2>", text)
    assert headings == ["Bottom line", "Verdicts", "Notes: read these first", "Model accuracy",
                        "Saturation", "Fitted service costs", "Structural cost model",
                        "Connection handoff on the testbed", "More notes", "Figures"]
    # 3 significant digits, no exponents: c0's model saturation 1/250 µs = 4,000/s.
    shown = "".join(Page(text).text)
    assert "4,000" in shown and "e+0" not in shown


def test_the_first_line_counts_the_verdicts_the_testbed_decided(report):
    text = report.read_text(encoding="utf-8")
    first = re.search(r"</h1>\n<p class=\"headline\">([^<]+)</p>\n<h2>Bottom line", text)
    assert first and first[1] == ("The testbed confirmed 3 of 3 verdicts, contradicted 0 and "
                                  "could not decide 0.")
    # Each verdict's measured interval and the pairs it rests on.
    verdicts = " ".join("".join(Page(text).text).split()).split("Verdicts")[1]
    assert re.search(r"delay ×[\d.]+ \(95% ×[\d.]+–×[\d.]+, 1 pair\)", verdicts)


def test_each_accuracy_row_shows_its_outcome_and_why(report):
    text = report.read_text(encoding="utf-8")
    table = text.split("<h2>Model accuracy</h2>")[1].split("<h2>")[0]
    rows = re.findall(r"<tr>(.*?)</tr>", table)[1:]
    outcomes = [re.findall(r'<td class="(met|missed|undecidable)">\1</td>', r) for r in rows]
    assert all(len(o) == 1 for o in outcomes)
    assert {o[0] for o in outcomes} == {"met", "missed", "undecidable"}
    undecidable = next(r for r, o in zip(rows, outcomes, strict=True) if o == ["undecidable"])
    assert "<td>c2</td><td>inline</td><td>U_host</td>" in undecidable
    assert "the testbed&#x27;s floor 6.0% (from replicates) is above the target 5%" in undecidable


def test_the_bottom_line_gives_each_verdict_its_host_cores_and_break_even(report):
    text = " ".join("".join(Page(report.read_text(encoding="utf-8")).text).split())
    line = text.split("Bottom line")[1].split("Command")[0]
    # The sample: c0 through the engine helps at every rate, c3 (the engine saturates
    # first) at none; the mix pays from 120 req/s.
    c0, c3 = line.split("c0 through the engine: ")[1], line.split("c3 through the engine: ")[1]
    assert c0.startswith("helps. At 2,400 req/s send 100% of it; offloading all of it saves "
                         "0.312 host cores; it pays at every rate; the slowest engine that "
                         "still pays there runs at 0.4 of a host core. Testbed: yes.")
    assert c3.startswith("hurts.") and "pays at no rate; no engine pays there" in c3
    mix = line.split("the mix through the engine: ")[1]
    assert mix.startswith("At ") and "send 50% of it; offloading that saves 0.1 host cores; "
    assert ("it pays from 120 req/s on; the slowest engine that still pays there runs at 0.55 "
            "of a host core (0.45–0.8, ±6.0%: the model's capacities off by the error its "
            "saturation runs measured)") in mix


def test_report_shows_the_handoff_experiment_with_its_checks(report):
    text = "".join(Page(report.read_text(encoding="utf-8")).text)
    section = text.split("Connection handoff on the testbed")[1].split("Figures")[0]
    assert "64 closed-loop clients" in section and "7 times slower" in section
    # The sample's medians: naive offload -13 %, P-L +10 % against inline.
    assert "handoff:N-N-FCFS" in section and "handoff:P-L-FCFS" in section
    assert "naive full offload loses to inline: holds" in section
    assert "host-first + load control beats inline and naive offload: holds" in section


def test_the_summary_and_the_report_show_one_handoff_result(tmp_path):
    result = handoff_result()
    t = study_tables(classes=("c0",))
    summary = pipeline.summary(t, result)["handoff"]
    assert summary["summary"] == jsonable(result.summary()["summary"])
    assert [c["claim"] for c in summary["checks"]] == [c.claim for c in result.checks()]
    text = "".join(Page(write_report(t, tmp_path, pipeline.sections(result)).read_text()).text)
    section = text.split("Connection handoff on the testbed")[1].split("Figures")[0]
    # The checks' details quote the medians the summary holds.
    assert all(row["policy"] in section for row in summary["summary"])
    assert all(c["detail"] in section for c in summary["checks"])
    # The experiment's figure, under the name its own folder gives it.
    assert (tmp_path / "figures" / "handoff-testbed.png").is_file()
    assert pipeline.summary(t, None)["handoff"] is None


def test_report_in_a_real_browser(report, tmp_path, chromium):
    """Headless Chromium loads the page offline: every image decodes, every link opens a
    file, and a full-page screenshot is a PNG."""
    browser, driver_path = chromium
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is not installed; run `.venv/bin/pip install -e '.[test]'`")
    options = webdriver.ChromeOptions()
    options.binary_location = str(browser)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000"):
        options.add_argument(arg)
    # Explicit paths: selenium-manager never looks for a driver on the network.
    driver = webdriver.Chrome(service=Service(executable_path=str(driver_path)),
                              options=options)
    try:
        driver.set_page_load_timeout(30)
        driver.get(report.as_uri())
        images = driver.execute_script(
            "return Array.from(document.images, i => "
            "[i.complete, i.naturalWidth, i.naturalHeight]);")
        assert len(images) == len(list((report.parent / "figures").glob("*.png")))
        assert all(done and w > 0 and h > 0 for done, w, h in images), images
        links = driver.execute_script(
            "return Array.from(document.querySelectorAll('a[href]'), a => a.href);")
        assert links
        for link in links:
            url = urlparse(link)
            assert url.scheme == "file" and Path(unquote(url.path)).is_file(), link
        height = driver.execute_script("return document.documentElement.scrollHeight;")
        driver.set_window_size(1280, min(height, 20_000))
        shot = tmp_path / "report.png"
        assert driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 0 and shot.read_bytes().startswith(PNG_MAGIC)
    finally:
        driver.quit()
