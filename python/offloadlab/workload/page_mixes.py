"""SPECweb2005-like page mixes (reference 001 §4.5-4.6): the banking, ecommerce and
support tables, and :class:`PageMix` for others. The session generator
(:mod:`~offloadlab.workload.sessions`) walks them; a stream's
:meth:`~offloadlab.workload.stream_format.Stream.page_mix` compares its pages with them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from offloadlab.errors import require


@dataclass(frozen=True)
class PageMix:
    """A SPECweb2005-like workload: page types and their long-run shares (percent).

    Sessions start at ``entry`` and never return to it; after every page the session
    ends with probability p_entry (the entry page's share), otherwise the next page is
    drawn from the other pages in proportion to their shares. Session length is then
    geometric with mean 1/p_entry pages, every page of the concatenated walk is an
    entry page with probability p_entry, and the long-run page shares equal the table.

    ``downloads`` are the pages that end with a large download (a SPECweb2005-like site
    gives them one, :mod:`~offloadlab.workload.site`).
    """

    name: str
    pages: tuple[str, ...]
    percent: tuple[float, ...]
    entry: str
    downloads: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        require(len(self.pages) == len(self.percent) and len(set(self.pages)) == len(self.pages),
                f"page mix {self.name}: one share per distinct page")
        require(all(p > 0 and math.isfinite(p) for p in self.percent),
                f"page mix {self.name}: shares must be > 0")
        require(self.entry in self.pages, f"page mix {self.name}: entry page '{self.entry}' "
                                          "is not one of its pages")
        require(set(self.downloads) <= set(self.pages),
                f"page mix {self.name}: download pages must be among its pages")
        require(self.p_entry < 1,
                f"page mix {self.name}: needs a page other than the entry page")

    @property
    def probabilities(self) -> np.ndarray:
        p = np.asarray(self.percent, dtype=float)
        return p / p.sum()

    @property
    def p_entry(self) -> float:
        return float(self.probabilities[self.pages.index(self.entry)])

    @property
    def mean_pages(self) -> float:
        """Mean pages per session, 1/p_entry."""
        return 1.0 / self.p_entry


# Reference 001 §4.6 (the thesis's Tables 4.1-4.3), page names in snake_case.
MIXES: dict[str, PageMix] = {
    "banking": PageMix("banking", (
        "summary", "add_payee", "bill_pay", "bill_pay_status", "check_detail_html",
        "check_image", "change_profile", "login", "logout", "payee_info", "post_check_order",
        "post_fund_transfer", "post_profile", "quick_pay", "request_checks", "req_xfer_form"),
        (15.11, 1.12, 13.89, 2.23, 8.45, 16.89, 1.22, 21.53, 6.16, 0.80, 0.88, 1.24, 0.88,
         6.67, 1.22, 1.71), entry="login"),
    "ecommerce": PageMix("ecommerce", (
        "billing", "browse", "browse_product", "cart", "confirm", "customize1", "customize2",
        "customize3", "index", "login", "product_detail", "search", "shipping"),
        (3.37, 11.75, 10.03, 5.30, 2.53, 16.93, 8.95, 6.16, 13.08, 3.78, 8.02, 6.55, 3.55),
        entry="index"),
    "support": PageMix("support", (
        "catalog", "download", "file", "file_catalog", "home", "product", "search"),
        (11.71, 6.76, 13.51, 22.52, 8.11, 24.78, 12.61), entry="home",
        # Support's users "download files" (reference 001 §4.1); which page fetches the
        # file is not said [gap]: we take the page named for it.
        downloads=("download",)),
}
