"""A SPECweb2005-like site (reference 001 §4.5): the files of a page mix's pages, and
which of them each page requests.

A page is its dynamic request and then its embedded files, as SPECweb2005 builds it.
The site's manifest says which page requests what, with two columns:

- ``role`` ``"dynamic"``: the page's own body, sent after the script's work and never
  cached (one per page type, which ``page`` names);
- ``role`` ``"shared"``: embedded in every page (site-wide images, style sheets);
- ``role`` ``"own"``: embedded in every visit of page type ``page``;
- ``role`` ``"item"``: the scaling part (say, the image of the product or file a page
  shows); each page embeds one, drawn by popularity;
- ``role`` ``"download"``: the scaling downloads; each visit of one of the mix's
  download pages ends with one, drawn by popularity.

**Sizes.** Reference 001 gives none [gap]. Pages carry "many images and small static
files" (its §3.3), so every file but a download takes SURGE's lognormal body conditioned
on seed 000's classes 0 and 1 (at most 10 KiB). Downloads are "very large static files"
(its §4.5): SURGE's Pareto tail conditioned on seed 000's class 4 up to 5 MiB, as the
``toe-2009`` preset's class 4. Every download is larger than the server cache's largest
object (1 MiB by default), so downloads bypass the cache, as the reference expects of
Squid's default maximum object size.

**Scaling.** Files are numbered so that the site for n sessions is the first files of
the site for any larger count: the same paths, sizes and content. Item j and download j
belong to session j // per_session, and their Zipf rank is j + 1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from offloadlab.workload.classes import KiB, class_range, size_class
from offloadlab.workload.page_mixes import MIXES, PageMix
from offloadlab.workload.popularity import zipf_probabilities
from offloadlab.workload.presets import SEED000_CLASS4_MAX
from offloadlab.workload.sizes import Surge
from offloadlab.workload.specs import SpecWeb2005Spec

ROLES = ("dynamic", "shared", "own", "item", "download")
# Seed 001's Table 4.4 (reference 001 §3.3): the proxy's hit rate (%) by simultaneous
# sessions and cache size (MB, read as MiB, as the testbed's cache sizes are).
TABLE_4_4 = {5: {1: 94.947, 10: 95.045, 100: 95.058, 1000: 95.065},
             50: {1: 92.71, 10: 94.09, 100: 95.03, 1000: 95.029},
             100: {1: 90.90, 10: 93.10, 100: 94.93, 1000: 95.025}}
# (model, smallest, largest) in bytes; see the module notes.
SMALL_SIZES = (Surge(tail=0.0), 1, 10 * KiB)
DOWNLOAD_SIZES = (Surge(), class_range(4)[0], SEED000_CLASS4_MAX)


def files(spec: SpecWeb2005Spec) -> dict:
    """The site's files, as the fields of the :class:`~offloadlab.workload.fileset.FileSet`
    that :func:`~offloadlab.workload.fileset.generate` builds from them: the manifest's
    extra columns ``role`` and ``page`` say which page requests each file, and
    ``probability`` is its share of all requests."""
    mix = MIXES[spec.workload]
    share = dict(zip(mix.pages, mix.probabilities, strict=True))
    # (role, page, path, visits: pages requesting the role's files, per page)
    fixed = ([("dynamic", p, f"page/{p}", share[p]) for p in mix.pages]
             + [("shared", "", f"shared/{k:03d}", 1.0) for k in range(spec.shared)]
             + [("own", p, f"own/{p}/{k:03d}", share[p])
                for p in mix.pages for k in range(spec.own)])
    per_session = (["item"] * spec.items_per_session
                   + ["download"] * _downloads_per_session(spec))
    scaling = np.array(per_session * spec.sessions)
    role = np.array([f[0] for f in fixed] + scaling.tolist())
    number = np.zeros(len(role), np.int64)       # j: the file's place within its role
    for r in ("item", "download"):
        number[role == r] = np.arange((role == r).sum())
    paths = [f[2] for f in fixed] + [f"{r}/{j:06d}" for r, j in zip(
        role[len(fixed):].tolist(), number[len(fixed):].tolist(), strict=True)]
    probability = np.array([f[3] for f in fixed] + [0.0] * len(scaling))
    sizes = np.zeros(len(role), np.int64)
    # Separate draws per part, in file order, so that a larger site keeps the sizes.
    rngs = (np.random.default_rng(s) for s in np.random.SeedSequence(spec.seed).spawn(3))
    for part, model, rng in zip(("fixed", "item", "download"),
                                (SMALL_SIZES, SMALL_SIZES, DOWNLOAD_SIZES), rngs, strict=True):
        mask = np.isin(role, ("dynamic", "shared", "own")) if part == "fixed" else role == part
        sizes[mask] = _sizes(model, rng, int(mask.sum()))
        if part != "fixed" and mask.any():
            visits = 1.0 if part == "item" else _download_share(mix)
            probability[mask] = visits * zipf_probabilities(int(mask.sum()), spec.item_alpha)
    probability /= requests_per_page(spec)
    ranks = np.empty(len(role), np.int64)
    ranks[np.lexsort((np.arange(len(role)), -probability))] = np.arange(1, len(role) + 1)
    classes = size_class(sizes)
    return {"sizes": sizes, "classes": classes, "set_class": classes.copy(), "ranks": ranks,
            "probability": probability, "paths": tuple(paths),
            "extra": {"role": role.tolist(), "page": [f[1] for f in fixed] + [""] * len(scaling)}}


def predicted_hit_rate(site: pd.DataFrame, capacity: int, largest: int) -> float:
    """The hit rate of the server's LRU cache (``capacity`` bytes, bodies up to
    ``largest``) over a site's requests (its manifest), by Che's approximation
    (:func:`offloadlab.model.cache.lru`): each request picks its file independently with
    the file's ``probability``. Dynamic pages and larger bodies always miss; an entry is
    charged its path's ("/" and the file's) and its body's length."""
    from offloadlab.model import cache  # scipy: only here, not for every stream

    sizes = site["size_bytes"].to_numpy(np.int64)
    stored = (site["role"].to_numpy() != "dynamic") & (sizes <= largest)
    p = site["probability"].to_numpy(float)[stored]
    charges = site["path"].str.len().to_numpy()[stored] + 1 + sizes[stored]
    return float((p * cache.lru(p, charges, capacity).per_object).sum())


def requests_per_page(spec: SpecWeb2005Spec) -> float:
    """Mean requests per page: the dynamic one, the shared and own files, one item, and
    a download on the mix's download pages."""
    download = _download_share(MIXES[spec.workload]) if _downloads_per_session(spec) else 0.0
    return 2 + spec.shared + spec.own + download


def _download_share(mix: PageMix) -> float:
    """The share of pages that end with a download."""
    return float(sum(p for name, p in zip(mix.pages, mix.probabilities, strict=True)
                     if name in mix.downloads))


def _downloads_per_session(spec: SpecWeb2005Spec) -> int:
    """A mix without download pages gets no downloads."""
    return spec.downloads_per_session if MIXES[spec.workload].downloads else 0


def _sizes(model, rng: np.random.Generator, n: int) -> np.ndarray:
    sizes, lo, hi = model
    return np.clip(np.rint(sizes.sample(rng.random(n), lo, hi)), lo, hi).astype(np.int64)
