"""No module of driftgauge imports another that imports it back, nor does a package a sibling.

The graph is read from the source with `ast`, so an import inside a function or under
TYPE_CHECKING counts too: moving it to the top of its module must never break start-up.
The layer order itself is import-linter's contract in .importlinter (`make lint`); the last
test checks that the contract names every top-level module.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[2] / "service"
# The imports that close a cycle known today, each with who removes it; any other cycle
# fails the test. None is known: break a new cycle, do not list it here.
KNOWN: set[tuple[str, str]] = set()


def _modules() -> dict[str, Path]:
    """Return every module of the package by dotted name (a package by its own name)."""
    out = {}
    for path in sorted((SERVICE / "driftgauge").rglob("*.py")):
        parts = list(path.relative_to(SERVICE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, known: Iterable[str]) -> set[str]:
    """Return the driftgauge modules `name` imports anywhere in its source."""
    modules = set(known)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return {m for m in found if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    """Return each module's imports, less the known cycle-closing ones."""
    modules = _modules()
    return {
        name: {m for m in _imports(name, path, modules) if (name, m) not in KNOWN}
        for name, path in modules.items()
    }


def _cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Return the strongly connected components of more than one node, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            comp = []
            while True:
                top = stack.pop()
                comp.append(top)
                if top == node:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return out


def _sibling_edges(graph: Mapping[str, set[str]], parent: str) -> dict[str, set[str]]:
    """Return which children of `parent` import which others, through any descendant."""
    prefix = parent + "."

    def child(module: str) -> str | None:
        if not module.startswith(prefix):
            return None
        return prefix + module[len(prefix) :].split(".")[0]

    edges: dict[str, set[str]] = defaultdict(set)
    for importer, imported in graph.items():
        a = child(importer)
        for target in imported:
            b = child(target)
            if a and b and a != b:
                edges[a].add(b)
    return edges


def _explain(cycle: list[str], edges: Mapping[str, set[str]]) -> str:
    return "; ".join(f"{a} -> {', '.join(sorted(edges[a] & set(cycle)))}" for a in cycle)


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = _graph()
    found = _cycles(graph)
    assert found == [], "\n".join(_explain(c, graph) for c in found)


def test_no_package_imports_a_sibling_that_imports_it_back() -> None:
    graph = _graph()
    packages = sorted({m.rpartition(".")[0] for m in graph if "." in m})
    problems: list[str] = []
    for parent in packages:
        edges = _sibling_edges(graph, parent)
        problems.extend(_explain(cycle, edges) for cycle in _cycles(edges))
    assert problems == [], "\n".join(problems)


def test_the_graph_sees_lazy_and_relative_imports_and_the_cycles_they_make(tmp_path: Path) -> None:
    # The reader must not miss an import inside a function: that is how today's cycles hid.
    source = tmp_path / "mod.py"
    source.write_text(
        "def f():\n    from driftgauge.pkg import sub, name\nfrom . import other\n",
        encoding="utf-8",
    )
    known = {"driftgauge.pkg", "driftgauge.pkg.sub", "driftgauge.pkg.other"}
    assert _imports("driftgauge.pkg.mod", source, known) == known
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_top_level_module_has_a_layer_in_the_contract() -> None:
    # import-linter checks only the modules it is told about: a new package outside every
    # layer would import anything unchecked.
    text = (SERVICE.parent / ".importlinter").read_text(encoding="utf-8")
    named = set(re.findall(r"\bdriftgauge(?:\.\w+)+", text))
    tops = {".".join(m.split(".")[:2]) for m in _modules() if m != "driftgauge"}
    # config is split across layers by module, so each of its modules needs its own line.
    wanted = {m for m in tops if m != "driftgauge.config"} | {
        m for m in _modules() if m.startswith("driftgauge.config.")
    }
    assert sorted(wanted - named) == []
