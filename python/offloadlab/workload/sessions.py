"""SPECweb2005-like sessions (reference 001 §4.5-4.6): the page walk over a page mix
(:mod:`~offloadlab.workload.page_mixes`) and the session generator."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from offloadlab import dist
from offloadlab.errors import InputError
from offloadlab.workload import connections as conns
from offloadlab.workload.counts import Count, parse_count
from offloadlab.workload.objects import ObjectTable, pick
from offloadlab.workload.page_mixes import MIXES, PageMix
from offloadlab.workload.site import ROLES
from offloadlab.workload.stream_args import (
    closed_bound,
    distribution,
    optional_positive_int,
    optional_seconds,
    positive_int,
    rngs,
    stream_meta,
)
from offloadlab.workload.stream_format import Stream

# Choices where reference 001 is silent (documented in docs/workload.md).
SESSION_THINK = "exp(mean=10s)"
SESSION_EMBEDDED = 19            # ~5% dynamic requests, reference 001 §7.2 (miss floor)
SESSION_APP_WORK = "exp(mean=1ms)"


def sessions(objects, workload: str | PageMix = "support", *, clients: int,
             sessions: int | None = None, duration_s: float | str | None = None,
             think: str | dist.Dist = SESSION_THINK,
             embedded: int | str | Count | Mapping[str, int | str | Count] | None = None,
             app_work: str | dist.Dist | Mapping[str, str | dist.Dist] = SESSION_APP_WORK,
             keep_alive: bool | str | int | Count = "page", size_class: int | None = None,
             seed: int | np.random.Generator = 1) -> Stream:
    """SPECweb2005-like sessions of a ``workload`` (``"banking"``, ``"ecommerce"``,
    ``"support"`` or a :class:`PageMix`) for ``clients`` simultaneous session threads
    (closed loop), each running ``sessions`` sessions back to back and/or as many as fit
    in ``duration_s`` of think time.

    A page is one dynamic request (``dynamic`` true, ``app_work_s`` drawn from
    ``app_work``, a spec or a {page: spec} mapping; pages not named get the default)
    preceded by a ``think`` time, then its embedded static files with no think time.
    The page walk is described at :class:`PageMix`. ``keep_alive``: ``"page"`` (one
    connection per page, the default), ``"session"``, False (HTTP/1.0) or requests per
    connection as in :func:`~offloadlab.workload.stream.open_loop`. The server emulates
    a dynamic page by spending ``app_work_s`` of CPU before sending its object.

    The objects: from a SPECweb2005-like site (a manifest with ``role`` and ``page``,
    :mod:`~offloadlab.workload.site`), each page requests its own body, the shared
    files, its own files, an item and on download pages a download. From any other
    table, every request's object is drawn by popularity, with ``embedded`` static files
    per page (a count or {page: count}; default :data:`SESSION_EMBEDDED`).
    """
    mix = _mix(workload)
    table = ObjectTable.of(objects, size_class)
    n_clients = positive_int("clients", clients)
    n_sessions = optional_positive_int("sessions", sessions)
    duration = optional_seconds("duration_s", duration_s)
    think_d = distribution(think, "think")
    closed_bound("sessions", n_sessions, duration, think_d)
    site = _site(table, mix, embedded, size_class)
    emb = (_per_page("embedded", SESSION_EMBEDDED if embedded is None else embedded,
                     SESSION_EMBEDDED, mix, parse_count) if site is None
           else [parse_count(int(c) - 1, "embedded") for c in site.counts()])
    work = _per_page("app_work", app_work, SESSION_APP_WORK, mix, distribution)
    group, per_conn = _grouping(keep_alive)
    rng_walk, rng_think, rng_emb, rng_work, rng_conn, rng_obj = rngs(seed, 6)

    pages, sess, thinks, clients_of, offset = [], [], [], [], 0
    for c in range(n_clients):
        p, s, t = _walk(mix, think_d, rng_walk, rng_think, n_sessions, duration)
        pages.append(p)
        sess.append(s + offset)
        offset += int(s.max()) + 1 if len(s) else 0
        thinks.append(t)
        clients_of.append(np.full(len(p), c, dtype=np.int64))
    page = np.concatenate(pages).astype(np.int64)
    page_sess = np.concatenate(sess).astype(np.int64)
    page_think = np.concatenate(thinks)
    page_client = np.concatenate(clients_of)
    if site is None:
        rows = None
        # One draw for every page when they share a count (the default).
        n_emb = (emb[0].sample(rng_emb, len(page)) if len(set(map(str, emb))) == 1
                 else _draw_per_page(emb, page, rng_emb, np.int64))
    else:
        rows = site.requests(page, rng_obj, rng_emb)
        n_emb = site.counts()[page] - 1
    work_s = _draw_per_page(work, page, rng_work, np.float64)

    reps = 1 + n_emb
    first = conns.starts_of(reps)
    client = np.repeat(page_client, reps)
    session = np.repeat(page_sess, reps)
    n = np.bincount(client, minlength=n_clients)
    if group == "page":
        starts = first
    elif group == "session":
        starts = first & np.concatenate([[True], session[1:] != session[:-1]])
    else:
        starts = np.concatenate([conns.client_starts(k, per_conn, rng_conn)
                                 for k in n]).astype(bool)
    cols = {"think_s": np.where(first, np.repeat(page_think, reps), 0.0),
            "session": session,
            "page": pd.Categorical.from_codes(np.repeat(page, reps), list(mix.pages)),
            "dynamic": first, "app_work_s": np.where(first, np.repeat(work_s, reps), 0.0)}
    frame = conns.closed_frame(cols, client, n, starts, table, rng_obj, rows)
    params = {"workload": mix.name, "clients": n_clients, "sessions": n_sessions,
              "duration_s": duration, "think": str(think_d),
              "embedded": {p: str(e) for p, e in zip(mix.pages, emb, strict=True)},
              "app_work": {p: str(w) for p, w in zip(mix.pages, work, strict=True)},
              "keep_alive": group or conns.spec(per_conn), "size_class": table.size_class,
              **table.params}
    return Stream(frame, stream_meta("sessions", seed, params, duration))


def _walk(mix: PageMix, think: dist.Dist, rng_walk, rng_think, n_sessions, duration):
    """One client's pages (codes into mix.pages), session index of each (from 0) and the
    think time before each, for ``n_sessions`` sessions and/or ``duration`` of think."""
    probs = mix.probabilities
    entry = mix.pages.index(mix.entry)
    others = probs.copy()
    others[entry] = 0.0
    cdf = np.cumsum(others / others.sum())
    pages, sess, thinks, done, clock = [], [], [], 0, 0.0
    while True:
        if n_sessions is not None:
            block = n_sessions - done
        else:
            block = int(duration / (think.mean * mix.mean_pages) * 1.2) + 16
        lengths = rng_walk.geometric(mix.p_entry, block)
        p = np.minimum(np.searchsorted(cdf, rng_walk.random(int(lengths.sum())), side="right"),
                       len(probs) - 1)
        p[conns.starts_at(lengths)] = entry
        s = np.repeat(np.arange(done, done + block), lengths)
        t = think.sample(rng_think, len(p))
        keep = len(p)
        if duration is not None:   # the pages whose think times fit before duration
            keep = int(np.searchsorted(clock + np.cumsum(t), duration, side="left"))
            clock += float(t.sum())
        pages.append(p[:keep])
        sess.append(s[:keep])
        thinks.append(t[:keep])
        done += block
        if keep < len(p) or (n_sessions is not None and done >= n_sessions):
            break
    _, dense = np.unique(np.concatenate(sess), return_inverse=True)
    return np.concatenate(pages), dense.astype(np.int64), np.concatenate(thinks)


def _site(table: ObjectTable, mix: PageMix, embedded, size_class) -> Pages | None:
    """The pages of a site's objects table (None for any other table)."""
    if table.site is None:
        return None
    for name, value in (("embedded", embedded), ("size_class", size_class)):
        if value is not None:
            raise InputError(f"{name}={value!r}: a site's pages request the files its "
                             "manifest gives them (columns role and page); leave "
                             f"{name} out")
    return Pages.of(table, mix)


def _mix(workload) -> PageMix:
    if isinstance(workload, PageMix):
        return workload
    mix = MIXES.get(str(workload).strip().lower())
    if mix is None:
        raise InputError(f"workload '{workload}': choose one of {', '.join(MIXES)}")
    return mix


def _grouping(keep_alive) -> tuple[str | None, Count | None]:
    """("page" | "session", None), or (None, requests per connection or None)."""
    if isinstance(keep_alive, str) and keep_alive.strip().lower() in ("page", "session"):
        return keep_alive.strip().lower(), None
    try:
        return None, conns.per_connection(keep_alive)
    except InputError as exc:
        raise InputError(f"{exc}; for sessions also keep_alive='page' (one connection per "
                         "page) or 'session'") from None


def _per_page(what: str, value, default, mix: PageMix, parse) -> list:
    """One parsed value per page of ``mix`` from a value or a {page: value} mapping
    (pages it leaves out get ``default``)."""
    if isinstance(value, Mapping):
        unknown = [p for p in value if p not in mix.pages]
        if unknown:
            raise InputError(f"{what}: '{unknown[0]}' is not a {mix.name} page; its pages are "
                             f"{', '.join(mix.pages)}")
        return [parse(value.get(p, default), f"{what}[{p}]") for p in mix.pages]
    return [parse(value, what)] * len(mix.pages)


def _draw_per_page(dists: list, page: np.ndarray, rng, dtype) -> np.ndarray:
    """A draw for every page from its page type's distribution."""
    out = np.zeros(len(page), dtype=dtype)
    for i, d in enumerate(dists):
        mask = page == i
        out[mask] = d.sample(rng, int(mask.sum()))
    return out


@dataclass(frozen=True)
class Pages:
    """Which rows of an objects table each page type of a mix requests (see the module
    notes), in request order: its dynamic body, its ``fixed`` files (shared, then own),
    one item drawn by ``item_cdf``, and on download pages one download drawn by
    ``download_cdf``."""

    dynamic: np.ndarray               # per page type, the row of its body
    fixed: tuple[np.ndarray, ...]     # per page type, the rows embedded on every visit
    items: np.ndarray
    item_cdf: np.ndarray
    downloads: np.ndarray
    download_cdf: np.ndarray
    fetches_download: np.ndarray      # per page type

    @classmethod
    def of(cls, table: ObjectTable, mix: PageMix) -> Pages:
        """From a site's objects table (``role`` and ``page`` columns)."""
        role, page = table.site
        where = "objects"
        bad = sorted(set(role) - set(ROLES))
        if bad:
            raise InputError(f"{where}: column 'role' has {bad[0]!r}; a site's roles are "
                             f"{', '.join(ROLES)}")
        rows = np.arange(len(role))

        def of_role(r: str, p: str | None = None) -> np.ndarray:
            return rows[(role == r) & ((page == p) if p is not None else True)]

        dynamic = []
        for p in mix.pages:
            body = of_role("dynamic", p)
            if len(body) != 1:
                raise InputError(f"{where}: the site has {len(body)} dynamic bodies for page "
                                 f"'{p}'; build the site for the {mix.name} workload (one "
                                 "body per page type)")
            dynamic.append(body[0])
        items = of_role("item")
        if not len(items):
            raise InputError(f"{where}: the site has no item files; each page embeds one")
        downloads = of_role("download")
        fetches = np.array([p in mix.downloads and len(downloads) > 0 for p in mix.pages])
        shared = of_role("shared")
        return cls(np.array(dynamic), tuple(np.concatenate([shared, of_role("own", p)])
                                            for p in mix.pages),
                   items, table.cdf_of(items), downloads, table.cdf_of(downloads), fetches)

    def counts(self) -> np.ndarray:
        """Requests per page, per page type."""
        return np.array([2 + len(f) for f in self.fixed]) + self.fetches_download

    def requests(self, page: np.ndarray, rng_item, rng_download) -> np.ndarray:
        """The rows requested by pages of types ``page``, page after page."""
        counts = self.counts()
        reps = counts[page]
        out = np.empty(int(reps.sum()), np.int64)
        first = np.cumsum(reps) - reps
        for t, fixed in enumerate(self.fixed):
            at = first[page == t]
            out[at] = self.dynamic[t]
            for k, row in enumerate(fixed):
                out[at + 1 + k] = row
            out[at + 1 + len(fixed)] = self.items[pick(self.item_cdf, rng_item, len(at))]
            if self.fetches_download[t]:
                out[at + 2 + len(fixed)] = self.downloads[pick(self.download_cdf,
                                                               rng_download, len(at))]
        return out
