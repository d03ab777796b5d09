"""The house rules that docs/design.md states and a test can hold: the README's layout
table names every module, the demo's time in the README is the one it plans, every
list of modes derives from Rust's, and no module imports back what imports it."""

import ast
import graphlib
import re
from pathlib import Path

import pytest

from offloadlab.study import pipeline, plan

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "offloadlab"
NUMBERS = {"three": 3, "four": 4, "five": 5, "six": 6}


def _readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_layout_table_names_every_module_and_crate():
    table = _readme_section("Layout")
    missing = []
    for path in sorted(PACKAGE.iterdir()):
        package = path.is_dir() and (path / "__init__.py").exists()
        if package and f"python/offloadlab/{path.name}/" not in table:
            missing.append(f"{path.name}/")
        elif (path.suffix == ".py" and not path.name.startswith("_")
              and f"{path.name}`" not in table):
            missing.append(path.name)
    # The driver's parts, one by one; an experiment needs no row of its own (issue 26:
    # adding one touches its module, its CLI module and its docs page).
    for package in ("testbed",):
        for sub in sorted((PACKAGE / package).glob("[!_]*.py")):
            if f"`{sub.name}`" not in table:
                missing.append(f"{package}/{sub.name}")
    for crate in sorted((ROOT / "crates").iterdir()):
        if crate.name not in table:
            missing.append(f"crates/{crate.name}")
    assert not missing, f"README.md's layout table does not name: {', '.join(missing)}"
    # ... and names nothing that is gone.
    modules = {p.name for p in PACKAGE.rglob("*.py")}
    gone = [name for name in re.findall(r"`(\w+\.py)`", table) if name not in modules]
    gone += [path for path in re.findall(r"`((?:python|crates)/[\w./-]+)`", table)
             if not (ROOT / path).exists()]
    assert not gone, f"README.md's layout table names what is not there: {', '.join(gone)}"


def _demo() -> pipeline.Prepared:
    """The demo as `offload demo` prepares it, with empty file sets (the planned time
    does not depend on the files)."""
    config = pipeline.StudyConfig.demo(ROOT)
    loads = tuple(plan.ClassLoad(f"c{c}", ROOT, None, c) for c in config.size_classes())
    the_plan = plan.Plan(loads, config.mode_names(), config.chosen_budget(), None, 0, 1, 1,
                         "demo", {load.name: 1 / len(loads) for load in loads},
                         plan.ClassLoad(plan.MIX, ROOT, None, None))
    return pipeline.Prepared(config, the_plan, 0.0)


def test_the_readme_states_the_demos_planned_time():
    start = _readme_section("Start")
    found = re.search(r"about (\w+) minutes, ([\d.]+) of them under load", start)
    assert found, "README.md's Start section must say 'about N minutes, M of them under load'"
    total, load = NUMBERS[found.group(1)], float(found.group(2))
    planned = _demo().load_seconds() / 60
    assert load == round(planned, 1), f"README says {load} minutes of load; the demo plans " \
                                      f"{planned:.1f}"
    # Start-up, fits, the simulator and the report took 20-40 s on this machine.
    assert planned <= total <= planned + 1, f"about {total} minutes for {planned:.1f} of load"


def test_every_list_of_modes_derives_from_rusts():
    from offloadlab import _core, mode_traits, study_tables
    from offloadlab.report import study as report_study
    from offloadlab.testbed import server

    assert tuple(_core.MODES) == server.MODES
    assert server.MODES[0] == mode_traits.BASELINE == "inline" and "handoff" in server.MODES
    assert mode_traits.modes_where("studied") == study_tables.STUDY_MODES
    assert "handoff" not in study_tables.STUDY_MODES
    # The study's plan and the report's order are that one tuple, not copies of it.
    assert plan.STUDY_MODES is study_tables.STUDY_MODES
    assert report_study.STUDY_MODES is study_tables.STUDY_MODES
    colours = [report_study.MODE_COLORS[m] for m in study_tables.STUDY_MODES]
    assert len(set(colours)) == len(colours), "each mode its own colour"


def _python_imports() -> dict[str, set[str]]:
    """offloadlab's modules and the offloadlab modules each imports anywhere in it (in a
    function too: a lazy import still ties the two modules together)."""
    files = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            found |= {t for t in targets if t in files and t != name}
        graph[name] = found
    return graph


def _rust_uses(src: Path) -> dict[str, set[str]]:
    """A crate's modules and the modules of the same crate each names (``crate::a::b``
    or ``use crate::{a, b}``), tests left out."""
    files = {}
    for path in src.rglob("*.rs"):
        parts = [p for p in path.relative_to(src).with_suffix("").parts
                 if p not in ("mod", "lib", "main")]
        if parts[:1] != ["bin"]:
            files["::".join(parts)] = path
    graph = {}
    for name, path in files.items():
        text = path.read_text().split("#[cfg(test)]")[0]
        paths = re.findall(r"crate::((?:\w+::)*\w+)", text)
        for prefix, items in re.findall(r"crate::((?:\w+::)*)\{([^;]*)\}", text):
            paths += [prefix + item.strip().split("::")[0]
                      for item in re.split(r"[,{}]", items) if item.strip()]
        found = set()
        for p in paths:
            steps = p.split("::")
            found |= {next((m for k in range(len(steps), 0, -1)
                            if (m := "::".join(steps[:k])) in files), name)}
        graph[name] = found - {name, ""}
    return graph


def _packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same imports between offloadlab's packages (the first level under it, e.g.
    offloadlab.report; a top-level module is its own): two packages whose modules
    import each other's are one tangle even where no two modules are."""
    def top(name: str) -> str:
        return ".".join(name.split(".")[:2])

    packages: dict[str, set[str]] = {}
    for name, imported in graph.items():
        packages.setdefault(top(name), set()).update(top(t) for t in imported)
    return {name: imported - {name} for name, imported in packages.items()}


@pytest.mark.parametrize("where", ["python", "python packages",
                                   *sorted(p.name for p in (ROOT / "crates").iterdir())])
def test_no_module_imports_back_what_imports_it(where):
    if where == "python":
        graph = _python_imports()
    elif where == "python packages":
        graph = _packages(_python_imports())
    else:
        graph = _rust_uses(ROOT / "crates" / where / "src")
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as cycle:
        raise AssertionError(f"{where}: import cycle {' -> '.join(cycle.args[1])}") from None


# The testbed driver runs what the experiments and the study plan; the stats schema
# (documents.py) and seed 004's policy shorthand (handoff_policy.py) sit below both, so
# the driver never needs a paper's package, nor online placement the driver.
DRIVER_MUST_NOT_IMPORT = {
    "testbed": {"handoff", "online", "experiments", "study", "report", "calibrate",
                "datacentre", "writeback", "cli"},
    "online": {"testbed", "experiments", "study", "cli"},
}


def test_the_driver_and_the_paper_packages_do_not_import_each_other():
    graph = _packages(_python_imports())
    for package, banned in DRIVER_MUST_NOT_IMPORT.items():
        imported = {name.split(".")[-1] for name in graph[f"offloadlab.{package}"]}
        assert not imported & banned, f"{package} imports {sorted(imported & banned)}"


def test_the_mode_trait_table_is_rusts_and_python_reads_all_of_it():
    from dataclasses import fields

    from offloadlab import _core, mode_traits

    assert list(_core.MODE_TRAITS) == list(_core.MODES) == list(mode_traits.TRAITS)
    read = {f.name for f in fields(mode_traits.ModeTraits)}
    for mode, row in _core.MODE_TRAITS.items():
        assert set(row) == read, f"{mode}: Rust's traits {sorted(row)}, Python's {sorted(read)}"
        assert all(isinstance(v, bool) for v in row.values()), mode
    # Spot checks of what the code did by name before the table (issue 45).
    t = mode_traits.TRAITS
    assert mode_traits.modes_where("answers_in_rounds") == ("engine", "handoff")
    assert mode_traits.modes_where("app_cache") == ("inline", "engine")
    assert mode_traits.modes_where("engine_spins") == ("uring",)
    assert t["handoff"].places_connections and not t["handoff"].studied


def _strings(node: ast.AST) -> list[str] | None:
    """The strings of a string literal, or of a tuple, list, set or frozenset/set/tuple
    call of string literals; None for anything else."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in ("frozenset", "set", "tuple") and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else None
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts:
        found = [_strings(e) for e in node.elts]
        if all(f is not None and len(f) == 1 for f in found):
            return [f[0] for f in found]
    return None


def _mode_name_tests(tree: ast.AST, modes: set[str], sides: set[str]) -> list[tuple[int, str]]:
    """Where ``tree`` decides by a mode's name: a comparison (==, !=, in, not in) with a
    literal mode name, and a literal set of mode names. A name that is also a queue side
    or thread role ("engine") counts only against an operand that says "mode"."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, operand in enumerate(operands):
                named = set(_strings(operand) or ()) & modes
                if not named:
                    continue
                others = " ".join(ast.unparse(o) for j, o in enumerate(operands) if j != i)
                if named - sides or "mode" in others.lower():
                    found.setdefault(node.lineno, ast.unparse(node))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Call)):
            names = _strings(node)
            if names and set(names) <= modes:
                found.setdefault(node.lineno, ast.unparse(node))
    return sorted(found.items())


def test_no_module_decides_by_a_modes_name():
    """Behaviour comes from the mode trait table (offloadlab.mode_traits), never from a
    mode's name: no module under python/offloadlab compares a mode with a name or keeps
    a set of names. The CLI's help text may name modes (it is no comparison), and a mode
    may be chosen by name (mode="engine")."""
    from offloadlab import _core
    from offloadlab.calibrate import fit

    modes = set(_core.MODES)
    sides = set(fit.SIDES)  # the queues, and the server's thread roles
    bad = [f"{path.relative_to(ROOT)}:{line}: {text}"
           for path in sorted(PACKAGE.rglob("*.py"))
           for line, text in _mode_name_tests(ast.parse(path.read_text()), modes, sides)]
    assert not bad, "decided by a mode's name; read the mode trait table instead:\n" + \
        "\n".join(bad)


def test_the_mode_name_check_sees_what_it_must():
    modes, sides = {"inline", "engine", "uring", "handoff"}, {"host", "engine"}
    caught = """
mode == "inline"
self.mode in ("inline", "engine")
frame["mode"] != "engine"
m != "handoff"
ROUNDS = frozenset({"engine"})
"""
    allowed = """
t.role == "engine"
side == "engine"
options(mode="engine")
mode = "engine" if setup == "C" else "inline"
ROLES = ("host", "engine", "shared")
"""
    assert len(_mode_name_tests(ast.parse(caught), modes, sides)) == 5
    assert _mode_name_tests(ast.parse(allowed), modes, sides) == []


def test_a_test_without_the_testbed_fixture_cannot_start_the_server_or_load():
    """The tiers hold by themselves (docs/design.md): conftest fails a test that starts
    the testbed in-process without asking for the `testbed` fixture."""
    from offloadlab import _core

    for start in (_core.serve, _core.load, _core.load_cli):
        with pytest.raises(pytest.fail.Exception, match="without the `testbed` fixture"):
            start()


def test_fixtures_give_their_tests_the_tier_markers(request, chromium):
    # chromium is an external program: this test is `external`, not `testbed`.
    assert request.node.get_closest_marker("external") is not None
    assert request.node.get_closest_marker("testbed") is None
