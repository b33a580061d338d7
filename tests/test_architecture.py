"""The house rules, read from the source: imports run one way, rooms do not import in circles,
SQL lives only in the store, no private name crosses a module, runtime code never imports the
testing room, and no function grows past what a reader can hold.

Why a test: these rules keep a newcomer able to find the one room a change belongs to
(``docs/architecture.md``); each of them was broken once before it was written down.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["backends", "voices", "evaluation", "app", "benchmarks"]
"""Lowest first: a package may import its own layer and the ones before it, never a later one."""
RUNTIME = ["backends", "voices", "evaluation", "app"]
STORE = "app/store/"
MAX_FUNCTION_LINES = 80
SCHEMA_FUNCTIONS = {"_schema_v1", "_schema_v2", "_schema_v3", "_schema_v4", "_schema_v5"}
"""Schema definitions are tables written out; they may be long."""


def modules(*tops: str) -> dict[str, Path]:
    out = {}
    for top in tops:
        for p in sorted((ROOT / top).rglob("*.py")):
            rel = p.relative_to(ROOT).with_suffix("")
            name = ".".join(rel.parts)
            out[name.removesuffix(".__init__")] = p
    return out


def imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import in the file, at any depth (lazy ones too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    pkg = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join([*base, mod] if mod else base)
            out.append((node.lineno, mod, [a.name for a in node.names]))
    return out


def layer(module: str) -> int | None:
    top = module.split(".")[0]
    return LAYERS.index(top) if top in LAYERS else None


def test_imports_run_one_way():
    """benchmarks → app → evaluation → voices → backends; runtime never imports tests."""
    bad = []
    for name, path in modules(*LAYERS).items():
        own = layer(name)
        for line, mod, _ in imports(path):
            target = layer(mod)
            rel = f"{path.relative_to(ROOT)}:{line}"
            if target is not None and own is not None and target > own:
                bad.append(f"{rel} imports {mod} (a higher layer)")
            if name.split(".")[0] in RUNTIME and mod.split(".")[0] == "tests":
                bad.append(f"{rel} imports {mod} (the testing room)")
    assert not bad, "\n".join(bad)


def room(module: str) -> str:
    """A room: ``app.listening``, ``backends.vllm_omni``; a loose module is its own room."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_rooms_do_not_import_in_circles():
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules(*RUNTIME).items():
        for _line, mod, _ in imports(path):
            if layer(mod) is None:
                continue
            a, b = room(name), room(mod)
            if "." not in a or "." not in b:
                continue  # a package's own __init__ (e.g. the registry reading ``backends.__path__``)
            if a != b and mod.split(".")[0] in RUNTIME:
                graph[a].add(b)
    cycles = []
    for start in sorted(graph):  # a path from start back to start
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    cycles.append(" → ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert not cycles, "\n".join(sorted(set(cycles)))


SQL = re.compile(
    r"\b(SELECT\s+[\w*\"(]|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\"?\w+\"?\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(TABLE|INDEX|UNIQUE)|PRAGMA\s+\w)"
)
DB_CALLS = re.compile(r"\.(execute|executemany|executescript)\(|read_sql|\.db\[\"|sqlite3\.connect")


def test_sql_only_in_the_store():
    bad = []
    for path in modules(*RUNTIME, "benchmarks").values():
        rel = str(path.relative_to(ROOT))
        if rel.startswith(STORE):
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if SQL.search(line) or DB_CALLS.search(line):
                bad.append(f"{rel}:{i}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_no_private_name_crosses_a_module():
    bad = []
    for _name, path in modules(*LAYERS, "tests").items():
        for line, mod, names in imports(path):
            if layer(mod) is None and not mod.startswith("tests"):
                continue
            for n in names:
                if n.startswith("_") and not n.startswith("__"):
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod}.{n}")
    assert not bad, "\n".join(bad)


def long_functions() -> list[str]:
    out = []
    for _name, path in modules(*RUNTIME).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES and node.name not in SCHEMA_FUNCTIONS:
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_function_past_the_limit():
    """About 80 lines: past that a function is two (schema definitions excepted)."""
    found = long_functions()
    assert not found, "\n".join(found)


@pytest.mark.parametrize("top", RUNTIME)
def test_every_module_says_why_it_exists(top):
    missing = [
        str(p.relative_to(ROOT))
        for p in modules(top).values()
        if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert not missing, missing
