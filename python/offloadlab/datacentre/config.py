"""A data-centre file (TOML) read into :class:`offloadlab.model.tiers.DataCentre`.

Every field has a default, seed 003's layout on its Cluster 3, so an empty file is a
valid data centre. Every problem is reported at once, each naming its field and a fix.
The fields, their units and defaults are listed in docs/datacentre.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from offloadlab import units
from offloadlab.errors import InputError
from offloadlab.inputs import load_toml
from offloadlab.model import protocol_costs, tiers
from offloadlab.workload import fileset, presets


@dataclass(frozen=True)
class Field:
    default: object
    read: Callable[[object], object]
    example: str


def _count(v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError
    return v


def _whole(v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError
    return v


def _number(lo: float, hi: float = math.inf, open_lo: bool = False):
    def read(v):
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ValueError
        if v < lo or v > hi or (open_lo and v == lo):
            raise ValueError
        return float(v)
    return read


def _time(v):
    return units.parse_time(v) if isinstance(v, str) else _number(0)(v)


def _bytes(v):
    return float(units.parse_bytes(v))


def _text(v):
    if not isinstance(v, str) or not v.strip():
        raise ValueError
    return v


def _flag(v):
    if not isinstance(v, bool):
        raise ValueError
    return v


def _choice(*options: str):
    def read(v):
        if v not in options:
            raise ValueError
        return v
    return read


# Seed 003's data centre: 4 proxies, 3 web servers, 1 database (dual CPUs), Cluster 3's
# Myrinet (59 µs, 914 Mbit/s), one SCSI disk per web server. Costs per request at the
# reference clock, page cache and proxy cache sizes are our choices [gap in the paper].
TIER = {
    "nodes": Field(1, _count, "nodes = 3"),
    "cpus": Field(2, _count, "cpus = 2"),
    "speed": Field(1.0, _number(0, open_lo=True), "speed = 1.0 (relative clock)"),
    "request": Field(50e-6, _time, 'request = "50us" (CPU per request, speed 1)'),
    "stall": Field(0.0, _time, 'stall = "20us" (CPU per request no clock shortens)'),
}
SECTIONS = {
    "proxy": {**TIER, "nodes": Field(4, _count, "nodes = 4"),
              "cache": Field(64 * 2**20, _bytes, 'cache = "64MiB"')},
    "web": {**TIER, "nodes": Field(3, _count, "nodes = 3"),
            "request": Field(100e-6, _time, 'request = "100us"'),
            "page_cache": Field(512 * 2**20, _bytes, 'page_cache = "512MiB"'),
            "dynamic_per_kib": Field(20e-6, _time, 'dynamic_per_kib = "20us" (CPU per KiB '
                                                   "of a dynamic page)")},
    "disks": {"count": Field(1, _count, "count = 3"),
              "bandwidth_MBps": Field(58.0, _number(0, open_lo=True), "bandwidth_MBps = 58"),
              "seek": Field(5.5e-3, _time, 'seek = "5.5ms"'),
              "placement": Field("single", _choice(*tiers.PLACEMENTS),
                                 f'placement = "single" ({" | ".join(tiers.PLACEMENTS)})'),
              "seed": Field(0, _whole, "seed = 0")},
    "db": {**{k: f for k, f in TIER.items() if k != "request"},
           "query": Field(500e-6, _time, 'query = "500us" (CPU per query)'),
           "query_disk": Field(2e-3, _time, 'query_disk = "2ms" (disk per query)'),
           "queries": Field(1.0, _number(0), "queries = 1 (per dynamic page)")},
    "network": {"bandwidth_Mbps": Field(914.0, _number(0, open_lo=True), "bandwidth_Mbps = 914"),
                "latency": Field(59e-6, _time, 'latency = "59us" (one way)'),
                "client_nodes": Field(8, _count, "client_nodes = 8"),
                "client_bandwidth_Mbps": Field(500.0, _number(0, open_lo=True),
                                               "client_bandwidth_Mbps = 500"),
                "mss": Field(1448, _count, "mss = 1448"),
                "packet": Field(10e-6, _time, 'packet = "10us" (host CPU per packet)'),
                "byte_costs": Field("datacenter", _choice("datacenter", "micro", "none"),
                                    'byte_costs = "datacenter" (Table 5 row, or "none")'),
                "measured_costs": Field(None, _text, 'measured_costs = "nic/costs.json" '
                                                     "(from offload datacentre nic)"),
                "checksum_offload": Field(False, _flag, "checksum_offload = true"),
                "segmentation_offload": Field(False, _flag, "segmentation_offload = true")},
    "engine": {"fraction": Field(1.0, _number(0, 1), "fraction = 1.0"),
               "hardware": Field(0.0, _number(0, 1), "hardware = 0.5"),
               "slowdown": Field(700 / 132, _number(0, open_lo=True), "slowdown = 5.3")},
    "site": {"name": Field("site", _text, 'name = "shop"'),
             "files": Field("dc-2004-2", _text,
                            'files = "dc-2004-2" (a preset or a folder)'),
             "alpha": Field(None, _number(0), "alpha = 0.9"),
             "clients": Field(64, _whole, "clients = 64"),
             "think": Field(0.0, _time, 'think = "0s"'),
             "dynamic": Field(0.0, _number(0, 1), "dynamic = 0.1 (share of requests)"),
             "memory_below": Field(None, _bytes, 'memory_below = "1MiB"'),
             "memory_budget": Field(None, _bytes, 'memory_budget = "64MiB"'),
             "seed": Field(1, _whole, "seed = 1")},
}
TOP = {"run_requests": Field(640_000, _whole, "run_requests = 640000 (0: warm caches)")}


def load(path: str | Path | None) -> tiers.DataCentre:
    """Read a data-centre file; None gives the defaults."""
    if path is None:
        return from_dict({}, "<defaults>", None)
    return load_toml(path, "the data-centre file", from_dict)


def from_dict(data: dict, source: str = "<data centre>", base_dir: Path | None = None
              ) -> tiers.DataCentre:
    errors: list[str] = []
    known = {*TOP, "proxy", "web", "db", "network", "site"}
    for key in sorted(set(data) - known):
        errors.append(f"unknown field '{key}'; known: {', '.join(sorted(known))}")
    top = _read({k: v for k, v in data.items() if k in TOP}, TOP, "", errors)
    proxy = _read(data.get("proxy", {}), SECTIONS["proxy"], "proxy.", errors)
    web_raw = data.get("web", {})
    web = _read({k: v for k, v in _table(web_raw, "web", errors).items() if k != "disks"},
                SECTIONS["web"], "web.", errors)
    disks = _read(_table(web_raw, "web", errors).get("disks", {}), SECTIONS["disks"],
                  "web.disks.", errors)
    db = _read(data.get("db", {}), SECTIONS["db"], "db.", errors)
    net_raw = _table(data.get("network", {}), "network", errors)
    net = _read({k: v for k, v in net_raw.items() if k != "engine"}, SECTIONS["network"],
                "network.", errors)
    engine = (_read(net_raw["engine"], SECTIONS["engine"], "network.engine.", errors)
              if "engine" in net_raw else None)
    raw_sites = data.get("site", [{}])
    if not isinstance(raw_sites, list) or not raw_sites:
        errors.append('site: give one or more [[site]] tables, e.g. [[site]] files = '
                      '"dc-2004-1"')
        raw_sites = []
    sites = []
    for i, raw in enumerate(raw_sites):
        before = len(errors)
        site = _read(raw, SECTIONS["site"], f"site #{i + 1}.", errors)
        if len(errors) == before:  # its files are only read once its fields are sound
            sites.append(_site(site, base_dir, f"site #{i + 1}", errors))
    if errors:
        raise InputError("\n".join(f"{source}: {e}" for e in errors))
    try:
        packet_s, byte_costs = _costs(net, base_dir)
        network = tiers.Network(
            bandwidth_Bps=net["bandwidth_Mbps"] * 1e6 / 8, latency_s=net["latency"],
            client_nodes=net["client_nodes"],
            client_bandwidth_Bps=net["client_bandwidth_Mbps"] * 1e6 / 8,
            mss=net["mss"], packet_s=packet_s, bytes=byte_costs,
            checksum_offload=net["checksum_offload"],
            segmentation_offload=net["segmentation_offload"],
            engine=protocol_costs.PacketOffload(**engine) if engine else None)
        return tiers.DataCentre(
            sites=tuple(sites), run_requests=top["run_requests"],
            proxy=_tier(proxy), proxy_cache_bytes=proxy["cache"],
            web=_tier(web), page_cache_bytes=web["page_cache"],
            dynamic_s_per_byte=web["dynamic_per_kib"] / 1024,
            disks=tiers.Disks(disks["count"], disks["bandwidth_MBps"] * 1e6, disks["seek"],
                              disks["placement"], disks["seed"]),
            db=_tier(db), queries=db["queries"], query_s=db["query"],
            query_disk_s=db["query_disk"], network=network)
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None


def _costs(net: dict, base_dir: Path | None) -> tuple[float, protocol_costs.ByteCosts]:
    """The per-packet and per-byte costs: as set, or as measured on this machine by
    ``offload datacentre nic`` (its costs.json)."""
    if net["measured_costs"] is None:
        return net["packet"], (protocol_costs.byte_costs(net["byte_costs"])
                               if net["byte_costs"] != "none"
                               else protocol_costs.ByteCosts(0, 0, 0, 0, 0))
    path = Path(net["measured_costs"])
    path = path if path.is_absolute() or base_dir is None else base_dir / path
    try:
        measured = json.loads(path.read_text())
        return (float(measured["packet_s"]),
                protocol_costs.ByteCosts(**{k: float(v) for k, v in
                                            measured["byte_costs"].items()}))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"network.measured_costs = {str(path)!r}: not a costs.json of "
                         f"'offload datacentre nic' ({exc})") from None


def _table(raw: object, where: str, errors: list[str]) -> dict:
    if isinstance(raw, dict):
        return raw
    errors.append(f"{where}: must be a table, e.g. [{where}]")
    return {}


def _read(raw: object, schema: dict[str, Field], where: str, errors: list[str]) -> dict | None:
    """Each field of ``schema`` from ``raw`` (its default when absent)."""
    if not isinstance(raw, dict):
        errors.append(f"{where.rstrip('.')}: must be a table")
        return None
    for key in sorted(set(raw) - set(schema)):
        errors.append(f"{where}{key}: unknown field; known: {', '.join(schema)}")
    values = {}
    for key, f in schema.items():
        if key not in raw:
            values[key] = f.default
            continue
        try:
            values[key] = f.read(raw[key])
        except (ValueError, TypeError, InputError):
            errors.append(f"{where}{key} = {raw[key]!r} is not valid; write e.g. {f.example}")
    return values


def _tier(values: dict) -> tiers.Tier:
    return tiers.Tier(values["nodes"], values["cpus"], values["speed"],
                      values.get("request", 0.0), values["stall"])


def _site(v: dict, base_dir: Path | None, where: str, errors: list[str]
          ) -> tiers.Site | None:
    """The site's files: a file-set preset (seed 003's classes are dc-2004-1 ... -5) or
    a folder holding a file set's manifest."""
    overrides = {} if v["alpha"] is None else {"zipf_alpha": v["alpha"]}
    try:
        if v["files"] in presets.PRESETS:
            spec = presets.preset(v["files"], v["seed"], **overrides)
            if isinstance(spec, list):
                raise InputError(f"files = {v['files']!r} is several sets; pick one")
            generated = fileset.generate(spec)
            sizes, popularity = generated.sizes, generated.probability
        else:
            folder = Path(v["files"])
            if not folder.is_absolute() and base_dir is not None:
                folder = base_dir / folder
            if not folder.is_dir():
                raise InputError(f"files = {v['files']!r} is neither a file-set preset "
                                 f"({', '.join(presets.PRESETS)}) nor a folder holding one")
            manifest = fileset.read_manifest(folder)
            if overrides:
                raise InputError("alpha applies to a preset; a folder keeps its popularity")
            sizes = manifest["size_bytes"].to_numpy()
            popularity = manifest["probability"].to_numpy()
        site = tiers.Site(v["name"], sizes, popularity, v["clients"], v["think"],
                          v["dynamic"])
        if v["memory_below"] is not None or v["memory_budget"] is not None:
            site = tiers.with_memory_fs(site, v["memory_below"], v["memory_budget"])
        return site
    except InputError as exc:
        errors.append(f"{where}: {exc}")
        return None
