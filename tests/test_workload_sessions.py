"""SPECweb2005-like sessions: page frequencies match the mix (scipy.stats), the mix
tables are the reference's, and embedded files, application work, connections and the
duration bound behave as documented."""

import math

import numpy as np
import pytest
from conftest import OBJ, P_FLOOR, check_keep_alive
from scipy import stats

from offloadlab.errors import InputError
from offloadlab.workload.page_mixes import MIXES
from offloadlab.workload.sessions import sessions


@pytest.mark.parametrize("workload", list(MIXES))
def test_session_page_frequencies_match_the_mix(workload):
    mix = MIXES[workload]
    n_sessions = math.ceil(2500 / mix.mean_pages)
    s = sessions(OBJ, workload, clients=10, sessions=n_sessions, embedded=0,
                 think="det(0)", seed=9)
    f = s.frame
    assert f["dynamic"].all()
    counts = f["page"].value_counts().reindex(list(mix.pages), fill_value=0).to_numpy()
    expected = counts.sum() * mix.probabilities
    chi2 = np.sum((counts - expected) ** 2 / expected)
    assert stats.chi2.sf(chi2, len(mix.pages) - 1) > P_FLOOR
    # Every session opens with the entry page, which appears nowhere else.
    first = f.groupby("session").head(1)
    assert (first["page"] == mix.entry).all()
    assert (f["page"] == mix.entry).sum() == f["session"].nunique() == 10 * n_sessions
    # Pages per session: geometric with mean 1/p_entry.
    p = mix.p_entry
    per = f.groupby("session").size()
    assert abs(per.mean() - 1 / p) < 4 * math.sqrt((1 - p) / p**2 / len(per))
    mix_table = s.page_mix()
    assert list(mix_table["page"]) == list(mix.pages)
    np.testing.assert_allclose(mix_table["target"], mix.probabilities)


def test_mix_tables_are_the_references():
    # Reference 001 §4.6: 16, 13 and 7 pages, each table summing to 100.00%.
    assert [len(MIXES[w].pages) for w in ("banking", "ecommerce", "support")] == [16, 13, 7]
    for mix in MIXES.values():
        assert sum(mix.percent) == pytest.approx(100.0, abs=0.01)
    assert MIXES["support"].percent[MIXES["support"].pages.index("file_catalog")] == 22.52
    assert MIXES["banking"].mean_pages == pytest.approx(1 / 0.2153)


def test_session_pages_embedded_files_and_app_work():
    s = sessions(OBJ, "support", clients=4, sessions=30, embedded=3, seed=5,
                 think="exp(mean=2s)", app_work={"download": "det(5ms)"})
    f = s.frame
    dyn = f[f["dynamic"]]
    static = f[~f["dynamic"]]
    assert len(static) == 3 * len(dyn)
    assert (static["think_s"] == 0).all() and (static["app_work_s"] == 0).all()
    assert (dyn.loc[dyn["page"] == "download", "app_work_s"] == 0.005).all()
    other = dyn.loc[dyn["page"] != "download", "app_work_s"]
    assert stats.kstest(other, "expon", args=(0, 1e-3)).pvalue > P_FLOOR
    assert stats.kstest(dyn["think_s"], "expon", args=(0, 2.0)).pvalue > P_FLOOR
    # Within a client, each page's request is followed by its 3 embedded files.
    for _, rows in f.groupby("client"):
        np.testing.assert_array_equal(rows["dynamic"].to_numpy(),
                                      np.tile([True, False, False, False], len(rows) // 4))
        assert (rows["page"].to_numpy()[1::4] == rows["page"].to_numpy()[::4]).all()
    d = s.describe()
    assert d["dynamic_share"] == 0.25 and d["pages"] == len(dyn)


def test_session_connections_per_page_per_session_or_per_request():
    kw = dict(clients=3, sessions=5, embedded=2, seed=1)
    page = sessions(OBJ, "banking", **kw).frame
    assert (page.groupby("conn_id")["dynamic"].sum() == 1).all()
    assert page.groupby("conn_id").head(1)["dynamic"].all()
    check_keep_alive(page)
    sess = sessions(OBJ, "banking", keep_alive="session", **kw).frame
    assert sess["conn_id"].nunique() == sess["session"].nunique() == 15
    assert (sess.groupby("conn_id")["session"].nunique() == 1).all()
    check_keep_alive(sess)
    http10 = sessions(OBJ, "banking", keep_alive=False, **kw).frame
    assert http10["conn_id"].nunique() == len(http10) and not http10["keep_alive"].any()
    fixed = sessions(OBJ, "banking", keep_alive=4, **kw).frame
    assert fixed.groupby("conn_id").size().max() == 4


def test_session_embedded_per_page_and_duration_bound():
    s = sessions(OBJ, "support", clients=2, duration_s=60, think="exp(mean=1s)",
                 embedded={"download": 1}, seed=2)
    f = s.frame
    assert (f.groupby("client")["think_s"].sum() < 60).all()
    page_no = f.groupby("client")["dynamic"].cumsum()      # the page each row belongs to
    per_page = f.groupby([f["client"], page_no]).agg(n=("page", "size"),
                                                      page=("page", "first"))
    assert (per_page["page"] == "download").any()
    assert (per_page.loc[per_page["page"] == "download", "n"] == 2).all()
    assert (per_page.loc[per_page["page"] != "download", "n"] == 20).all()


@pytest.mark.parametrize("make, match", [
    (lambda: sessions(OBJ, "shop", clients=2, sessions=1), "workload 'shop'"),
    (lambda: sessions(OBJ, clients=2), "sessions= .*duration_s="),
    (lambda: sessions(OBJ, clients=2, sessions=1, embedded={"cart": 2}),
     "embedded: 'cart' is not a support page"),
    (lambda: sessions(OBJ, clients=2, sessions=1, app_work={"home": "exp(2)"}),
     r"app_work\[home\]"),
    (lambda: sessions(OBJ, clients=2, sessions=1, embedded=-1), "embedded"),
    (lambda: sessions(OBJ, clients=2, sessions=1, keep_alive="pages"), "keep_alive"),
])
def test_bad_session_inputs_name_the_field(make, match):
    with pytest.raises(InputError, match=match):
        make()
