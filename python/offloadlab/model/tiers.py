"""Seed 003's multi-tier data centre as a closed queueing network, solved by MVA.

Clients of each *site* (a class) think, then send a request to one of the proxies:

- a static object found in the proxy's LRU cache is answered there;
- a miss, or a dynamic page, goes to one of the web servers. A static file is read
  from the memory file system if placed there, from the page cache on a hit, and
  from its disk otherwise. A dynamic page burns CPU in proportion to its size and
  sends ``queries`` queries to the database.

Stations, per node of each tier: the CPUs (one multi-server station), the NIC's link
(bytes over bandwidth), the NIC's processor when per-packet work is offloaded, and on
web servers the disks. The database server has a CPU and a disk. One delay station
holds the wire latency of every message. Requests are spread evenly over a tier's
nodes, so each node gets 1/n of the tier's demand.

Costs per request:

- CPU: ``request_s / speed + stall_s``, then per packet and per byte of every message
  sent or received (:mod:`offloadlab.model.protocol_costs`);
- a disk read: ``seek_s + size / bandwidth``. Striped disks act as one disk with the
  summed bandwidth; the other placements give each disk its own files (and load).

Caches (by Che's approximation, :func:`offloadlab.model.cache.lru`): the proxies see the
static requests of every site, weighted by each site's throughput, so the hit ratios and
the network are solved together by a fixed point. The page cache sees the proxies'
misses of files not on the memory file system, in the memory those files leave free.
A run of finite length adds each file's first, compulsory miss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from offloadlab.errors import InputError
from offloadlab.model import cache, mva
from offloadlab.model.protocol_costs import ByteCosts, PacketOffload, packets

PLACEMENTS = ("single", "random", "popularity", "size", "striped")
# A request's head, and the answer's head, are one small packet each.
_REQUEST_BYTES = 300
# Most fixed-point rounds for the proxies' hit ratios; they settle in a few.
_ROUNDS = 50


@dataclass(frozen=True)
class Site:
    """One class of clients and the files they ask for. ``in_memory`` marks files on
    the memory file system (None: none)."""

    name: str
    sizes: np.ndarray
    popularity: np.ndarray
    clients: int
    think_s: float = 0.0
    dynamic: float = 0.0
    in_memory: np.ndarray | None = None

    def __post_init__(self):
        p = np.asarray(self.popularity, float)
        s = np.asarray(self.sizes, float)
        if p.shape != s.shape or p.ndim != 1 or len(p) == 0:
            raise InputError(f"site {self.name}: give one size and one popularity per file")
        if not ((s > 0).all() and (p >= 0).all() and p.sum() > 0):
            raise InputError(f"site {self.name}: sizes must be > 0 and popularity >= 0")
        if not 0 <= self.dynamic <= 1:
            raise InputError(f"site {self.name}: dynamic={self.dynamic}: give a share 0-1")
        if self.clients < 0 or self.think_s < 0:
            raise InputError(f"site {self.name}: clients and think must be >= 0")
        object.__setattr__(self, "sizes", s)
        object.__setattr__(self, "popularity", p / p.sum())
        memory = np.zeros(len(s), bool) if self.in_memory is None else np.asarray(
            self.in_memory, bool)
        if memory.shape != s.shape:
            raise InputError(f"site {self.name}: in_memory needs one flag per file")
        object.__setattr__(self, "in_memory", memory)


@dataclass(frozen=True)
class Tier:
    """``nodes`` alike, each with ``cpus`` of relative clock ``speed``. ``request_s``
    is CPU per request at speed 1; ``stall_s`` is CPU time per request that no clock
    shortens (memory and bus waits)."""

    nodes: int = 1
    cpus: int = 1
    speed: float = 1.0
    request_s: float = 0.0
    stall_s: float = 0.0

    def __post_init__(self):
        if self.nodes < 1 or self.cpus < 1 or not self.speed > 0:
            raise InputError("tier: nodes and cpus must be >= 1 and speed > 0")
        if self.request_s < 0 or self.stall_s < 0:
            raise InputError("tier: request and stall costs must be >= 0")

    def cpu(self, cycles_s: float) -> float:
        """CPU seconds for ``cycles_s`` of clock-bound work at speed 1, plus the stall."""
        return cycles_s / self.speed + self.stall_s


@dataclass(frozen=True)
class Disks:
    count: int = 1
    bandwidth_Bps: float = 58e6
    seek_s: float = 5.5e-3
    placement: str = "single"
    seed: int = 0

    def __post_init__(self):
        if self.placement not in PLACEMENTS:
            raise InputError(f"placement {self.placement!r}: use one of "
                             f"{', '.join(PLACEMENTS)}")
        if self.count < 1 or not self.bandwidth_Bps > 0 or self.seek_s < 0:
            raise InputError("disks: count >= 1, bandwidth > 0 and seek >= 0")

    def assign(self, sizes: np.ndarray, popularity: np.ndarray) -> np.ndarray:
        """The disk of each file (all 0 for single and striped): random; by popularity
        or size, ascending, round robin (seed 003 Table 4)."""
        n = len(sizes)
        if self.placement in ("single", "striped"):
            return np.zeros(n, int)
        if self.placement == "random":
            return np.random.default_rng(self.seed).integers(0, self.count, n)
        key = popularity if self.placement == "popularity" else sizes
        disk = np.empty(n, int)
        disk[np.argsort(key, kind="stable")] = np.arange(n) % self.count
        return disk

    @property
    def stations(self) -> int:
        return 1 if self.placement in ("single", "striped") else self.count

    def read_s(self, sizes: np.ndarray) -> np.ndarray:
        bandwidth = self.bandwidth_Bps * (self.count if self.placement == "striped" else 1)
        return self.seek_s + sizes / bandwidth


@dataclass(frozen=True)
class Network:
    """Each node's network path (``bandwidth_Bps``: its NIC and I/O bus, which both
    directions share, as a PCI bus does), the one-way ``latency_s`` of a message, host
    CPU per packet (at speed 1) and per byte, and which offloads the NICs do. The
    clients run on ``client_nodes`` machines of their own, each with a path of
    ``client_bandwidth_Bps`` (seed 003 ran them on Cluster 2)."""

    bandwidth_Bps: float = 1e9 / 8
    latency_s: float = 30e-6
    client_nodes: int = 8
    client_bandwidth_Bps: float = 500e6 / 8
    mss: int = 1448
    packet_s: float = 5e-6
    bytes: ByteCosts = field(default_factory=lambda: ByteCosts(0, 0, 0, 0, 0))
    checksum_offload: bool = False
    segmentation_offload: bool = False
    engine: PacketOffload | None = None

    def __post_init__(self):
        if not (self.bandwidth_Bps > 0 and self.client_bandwidth_Bps > 0) \
                or self.latency_s < 0 or self.mss < 1 or self.packet_s < 0 \
                or self.client_nodes < 1:
            raise InputError("network: bandwidths > 0, latency >= 0, mss >= 1, packet >= 0, "
                             "client nodes >= 1")

    def send(self, size: float) -> tuple[float, float]:
        """(host CPU at speed 1 per packet term, per-byte CPU) to send ``size`` bytes;
        the split lets the caller scale or offload the packet term."""
        n = packets(size, self.mss, self.segmentation_offload)
        return n * self.packet_s, size * self.bytes.send(self.checksum_offload)

    def receive(self, size: float) -> tuple[float, float]:
        n = packets(size, self.mss)  # receive offload (LRO/GRO) is not modelled
        return n * self.packet_s, size * self.bytes.receive(self.checksum_offload)


@dataclass(frozen=True)
class DataCentre:
    sites: tuple[Site, ...]
    proxy: Tier = Tier(nodes=4, cpus=2)
    web: Tier = Tier(nodes=3, cpus=2)
    db: Tier = Tier(nodes=1, cpus=2)
    proxy_cache_bytes: float = 0.0
    page_cache_bytes: float = 0.0
    disks: Disks = Disks()
    # Dynamic pages: CPU seconds per byte of page (at speed 1) and database queries.
    dynamic_s_per_byte: float = 0.0
    queries: float = 1.0
    query_s: float = 0.0
    query_disk_s: float = 0.0
    network: Network = Network()
    # Requests per run, for compulsory misses (0: steady state, caches already warm).
    run_requests: int = 0
    # The page cache's hit ratio set by hand, as seed 003's Fig. 9 did by its choice of
    # files (None: Che's approximation).
    page_hit: float | None = None

    def __post_init__(self):
        if not self.sites:
            raise InputError("a data centre needs at least one site")
        if len({s.name for s in self.sites}) != len(self.sites):
            raise InputError("sites need distinct names")
        if self.page_hit is not None and not 0 <= self.page_hit <= 1:
            raise InputError(f"page_hit={self.page_hit}: give a share from 0 to 1")


@dataclass(frozen=True)
class Solved:
    """The network built and its MVA solution, with what the caches did per site."""

    net: mva.Network
    solution: mva.Solution
    proxy_hit: np.ndarray        # per site: share of its requests the proxies answer
    page_hit: np.ndarray         # per site: share of the web tier's file reads from memory
    bytes_per_request: np.ndarray

    @property
    def throughput(self) -> np.ndarray:
        return self.solution.throughput

    @property
    def response(self) -> np.ndarray:
        return self.solution.response

    @property
    def bottleneck(self) -> str:
        """The busiest queueing station (a delay station never limits throughput)."""
        busy = np.where(self.net.delay, -1.0, self.solution.utilisation)
        return self.net.stations[int(np.argmax(busy))]

    def stations(self) -> list[dict]:
        """One row per station: demand per site, utilisation, mean queue."""
        rows = []
        for k, name in enumerate(self.net.stations):
            row = {"station": name, "servers": int(self.net.servers[k]),
                   "utilisation": float(self.solution.utilisation[k]),
                   "queue": float(self.solution.queue[:, k].sum())}
            row.update({f"demand_{c}": float(self.net.demands[i, k])
                        for i, c in enumerate(self.net.classes)})
            rows.append(row)
        return rows


def solve(dc: DataCentre, exact_states: int = mva.MAX_STATES) -> Solved:
    """Build the network and solve it: exact MVA when the populations allow it,
    Schweitzer's approximation otherwise."""
    weights = np.array([s.clients / (s.think_s + 1e-3) for s in dc.sites], float)
    for _ in range(_ROUNDS):
        proxy_hit = _proxy_hits(dc, weights)
        net, page_hit, size = _network(dc, proxy_hit)
        states = math.prod(int(n) + 1 for n in net.population)
        sol = mva.exact(net) if states <= exact_states else mva.approximate(net)
        new = sol.throughput / max(sol.throughput.sum(), 1e-300)
        if len(dc.sites) == 1 or np.abs(new - weights / weights.sum()).max() < 1e-6:
            break
        weights = new
    site_hit = np.array([(s.popularity * (1 - s.dynamic) * h).sum()
                         for s, h in zip(dc.sites, proxy_hit, strict=True)])
    return Solved(net, sol, site_hit, page_hit, size)


def _proxy_hits(dc: DataCentre, weights: np.ndarray) -> list[np.ndarray]:
    """Per site, each file's hit probability in the proxies' caches: Che over the
    static requests of all sites, each site weighted by its share of requests."""
    share = weights / weights.sum()
    p = np.concatenate([w * (1 - s.dynamic) * s.popularity for w, s in zip(share, dc.sites,
                                                                           strict=True)])
    sizes = np.concatenate([s.sizes for s in dc.sites])
    if p.sum() == 0:
        return [np.zeros(len(s.sizes)) for s in dc.sites]
    hit = cache.lru(p, sizes, dc.proxy_cache_bytes).per_object
    hit = hit * (1 - _cold(p / p.sum(), dc.run_requests))
    return np.split(hit, np.cumsum([len(s.sizes) for s in dc.sites])[:-1])


def _cold(p: np.ndarray, requests: int) -> np.ndarray:
    """The share of a file's requests in a run of ``requests`` that are its first."""
    if requests <= 0:
        return np.zeros_like(p)
    expected = requests * p
    with np.errstate(divide="ignore", invalid="ignore"):
        first = -np.expm1(requests * np.log1p(-np.minimum(p, 1 - 1e-15)))
        return np.where(expected > 0, np.minimum(first / expected, 1.0), 0.0)


def _network(dc: DataCentre, proxy_hit: list[np.ndarray]
             ) -> tuple[mva.Network, np.ndarray, np.ndarray]:
    """Per-site demands at every station, given the proxies' hit probabilities; with
    each site's page-cache hit ratio and mean object size."""
    net = dc.network
    misses = [s.popularity * (1 - s.dynamic) * (1 - h) for s, h in zip(dc.sites, proxy_hit,
                                                                         strict=True)]
    page = _page_hits(dc, [m * ~s.in_memory for s, m in zip(dc.sites, misses, strict=True)])
    rows, page_hit, mean_size = [], [], []
    for site, miss, cached in zip(dc.sites, misses, page, strict=True):
        s, p = site.sizes, site.popularity
        to_web = miss + p * site.dynamic  # per request, by file
        from_disk = miss * ~site.in_memory * (1 - cached)
        page_hit.append(1 - from_disk.sum() / miss.sum() if miss.sum() > 0 else 1.0)
        mean_size.append(float((p * s).sum()))
        row: dict[str, float] = {}
        # Proxy: each request in and its answer out; a miss also forwarded and received.
        pkt, byte = _messages(net, s, answered=p, forwarded=to_web)
        _node(row, "proxy", dc.proxy, 1.0, pkt, byte, net)
        row["client link"] = float((p * s).sum()) / net.client_bandwidth_Bps \
            / net.client_nodes
        row["proxy link"] = float((p * s).sum() + (to_web * s).sum()) / net.bandwidth_Bps \
            / dc.proxy.nodes
        # Web: the forwarded requests in, their answers out, dynamic pages' own work.
        pkt, byte = _messages(net, s, answered=to_web, forwarded=np.zeros_like(s))
        _node(row, "web", dc.web, float(to_web.sum()), pkt, byte, net,
              extra_cycles=float((p * site.dynamic * s).sum()) * dc.dynamic_s_per_byte)
        row["web link"] = float((to_web * s).sum()) / net.bandwidth_Bps / dc.web.nodes
        disk = dc.disks.assign(s, p)
        read_s = dc.disks.read_s(s)
        for d in range(dc.disks.stations):
            on = disk == d
            row[f"web disk {d + 1}"] = float((from_disk[on] * read_s[on]).sum()) / dc.web.nodes
        queries = site.dynamic * dc.queries
        row["db cpu"] = queries * dc.db.cpu(dc.query_s) / dc.db.nodes
        row["db disk"] = queries * dc.query_disk_s / dc.db.nodes
        # Wire latency: request and answer, and again for a trip to the web tier.
        row["latency"] = 2 * net.latency_s * (1 + float(to_web.sum()))
        rows.append(row)
    names = list(rows[0])
    nodes = {"proxy": dc.proxy.nodes, "web": dc.web.nodes, "db": dc.db.nodes,
             "client": dc.network.client_nodes}
    cpus = {"proxy": dc.proxy.cpus, "web": dc.web.cpus, "db": dc.db.cpus}
    columns, stations, servers, delay = [], [], [], []
    for name in names:  # each per-node station once per node of its tier
        tier, part = name.split(" ", 1) if " " in name else (name, "")
        count = nodes.get(tier, 1)
        for j in range(count):
            columns.append([row[name] for row in rows])
            stations.append(f"{tier} {j + 1} {part}" if count > 1 else name)
            servers.append(cpus[tier] if part == "cpu" else 1)
            delay.append(name == "latency")
    network = mva.Network.of(np.array(columns).T, [s.clients for s in dc.sites],
                             think=[s.think_s for s in dc.sites], delay=delay,
                             stations=stations, classes=[s.name for s in dc.sites],
                             servers=servers)
    return network, np.array(page_hit), np.array(mean_size)


def _messages(net: Network, sizes: np.ndarray, answered: np.ndarray, forwarded: np.ndarray
              ) -> tuple[float, float]:
    """A node's packet and byte CPU (speed 1) per request: for each ``answered`` request
    (by file) it receives the request and sends the object; for each ``forwarded`` one
    it sends the request on and receives the object."""
    ask_tx, ask_tx_b = net.send(_REQUEST_BYTES)
    ask_rx, ask_rx_b = net.receive(_REQUEST_BYTES)
    obj_tx, obj_tx_b = net.send(sizes)
    obj_rx, obj_rx_b = net.receive(sizes)
    pkt = (answered * (ask_rx + obj_tx)).sum() + (forwarded * (ask_tx + obj_rx)).sum()
    byte = (answered * (ask_rx_b + obj_tx_b)).sum() + (forwarded * (ask_tx_b + obj_rx_b)).sum()
    return float(pkt), float(byte)


def _node(row: dict, tier_name: str, tier: Tier, requests: float, packet_s: float,
          byte_s: float, net: Network, extra_cycles: float = 0.0) -> None:
    """A node's CPU (request cost, packets, bytes) and, with packet offload, its NIC."""
    host_packets = net.engine.host(packet_s) if net.engine else packet_s
    cycles = requests * tier.request_s + extra_cycles + host_packets
    row[f"{tier_name} cpu"] = (cycles / tier.speed + requests * tier.stall_s + byte_s
                               ) / tier.nodes
    if net.engine:
        row[f"{tier_name} nic"] = net.engine.nic(packet_s) / tier.nodes


def _page_hits(dc: DataCentre, reads: list[np.ndarray]) -> list[np.ndarray]:
    """Per site, each file's hit probability in a web server's page cache: Che over
    the reads that reach it, in the memory the memory file system leaves."""
    memory = sum(float((s.sizes * s.in_memory).sum()) for s in dc.sites)
    free = dc.page_cache_bytes - memory
    if free < 0:
        raise InputError(f"the memory file system holds {memory:,.0f} bytes, more than "
                         f"the page cache's {dc.page_cache_bytes:,.0f}; put fewer files "
                         "there or give the web servers more memory")
    if dc.page_hit is not None:
        return [np.full(len(s.sizes), dc.page_hit) for s in dc.sites]
    p = np.concatenate(reads)
    sizes = np.concatenate([s.sizes for s in dc.sites])
    if p.sum() == 0:
        return [np.ones(len(s.sizes)) for s in dc.sites]
    hit = cache.lru(p, sizes, free).per_object * (1 - _cold(p / p.sum(), dc.run_requests))
    return np.split(hit, np.cumsum([len(s.sizes) for s in dc.sites])[:-1])


def with_memory_fs(site: Site, below_bytes: float | None = None,
                   budget_bytes: float | None = None) -> Site:
    """``site`` with its files on the memory file system chosen by :func:`memory_set`."""
    return replace(site, in_memory=memory_set(site.sizes, site.popularity, below_bytes,
                                              budget_bytes))


def memory_set(sizes, popularity, below_bytes: float | None = None,
               budget_bytes: float | None = None) -> np.ndarray:
    """Seed 003's hybrid placement, which files go to memory: those under
    ``below_bytes``, or the most popular while they fit in ``budget_bytes`` (the scan
    stops at the first that does not). The model and the testbed server both use it."""
    if (below_bytes is None) == (budget_bytes is None):
        raise InputError("memory file system: give a size threshold or a memory budget")
    sizes = np.asarray(sizes, float)
    if below_bytes is not None:
        return sizes < below_bytes
    order = np.argsort(-np.asarray(popularity, float), kind="stable")
    fits = np.cumsum(sizes[order]) <= budget_bytes
    memory = np.zeros(len(sizes), bool)
    memory[order[fits]] = True
    return memory
