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
    from offloadlab import _core, study_tables
    from offloadlab.report import study as report_study
    from offloadlab.testbed import server

    assert tuple(_core.MODES) == server.MODES
    assert server.MODES[0] == "inline" and "handoff" in server.MODES
    assert tuple(m for m in server.MODES if m != "handoff") == study_tables.STUDY_MODES
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
