"""The package layout shows the dataflow: imports only point down the layers (README "Layout").

``domain`` (versions, plan-request format, errors) is the ground; ``wire`` (stored-entry format) and
``tables`` (contracts, Delta I/O) stand on it; ``engine`` holds the shared internals of the analytics; the
public analytics at the top of :mod:`pulsar_model` use those; ``ingest``, ``export`` and ``demo`` turn
exports into tables; ``report`` reads the output tables; ``pipeline`` (configuration, session, stages,
command line) is the only area that may import every other. A module may also import its own area.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pulsar_model"

#: area -> the other areas it may import.
ALLOWED: dict[str, set[str]] = {
    "domain": set(),
    "wire": {"domain"},
    "tables": {"domain"},
    "engine": {"domain", "wire"},
    "analytics": {"domain", "wire", "tables", "engine"},
    "ingest": {"domain", "wire", "tables", "engine"},
    "export": {"domain", "wire", "ingest"},
    "demo": {"domain", "wire", "analytics"},
    "report": {"domain", "tables", "engine", "analytics"},
    "pipeline": {"domain", "wire", "tables", "engine", "analytics", "ingest", "export", "demo", "report"},
}
#: Analytics may read table contracts (schemas), never table I/O: a transform is pure and lazy.
ANALYTICS_TABLE_MODULES = {"pulsar_model.tables.contracts"}


def area_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in {"errors", "domain", "DEFAULT_PULSAR_VERSION", "__version__"}:
        return "domain"
    if parts[1] in ALLOWED:
        return parts[1]
    return "analytics"  # positions, readers, backlog, ..., quota/, replication/, plans, history


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "pulsar_model":
                found.update(f"pulsar_model.{alias.name}" for alias in node.names)
            elif node.module.startswith("pulsar_model."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("pulsar_model"))
    return found


def _edges() -> list[tuple[str, str]]:
    edges = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "_generated" in path.parts:
            continue
        module = _module_name(path)
        edges.extend((module, target) for target in sorted(_imports(path)))
    return edges


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for source, target in _edges():
        a, b = area_of(source), area_of(target)
        if a == b or target in {"pulsar_model", "pulsar_model.__version__"}:
            continue
        if b not in ALLOWED[a]:
            wrong.append(f"{source} ({a}) imports {target} ({b})")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_analytics_do_no_table_io() -> None:
    wrong = [
        f"{source} imports {target}"
        for source, target in _edges()
        if area_of(source) == "analytics"
        and area_of(target) == "tables"
        and target not in ANALYTICS_TABLE_MODULES
    ]
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_a_private_module_of_another_package() -> None:
    wrong = []
    for source, target in _edges():
        private = [p for p in target.split(".")[1:] if p.startswith("_") and p != "__version__"]
        if not private:
            continue
        owner = target.split("." + private[0])[0]
        if not source.startswith(owner):
            wrong.append(f"{source} imports {target}")
    assert not wrong, "\n".join(wrong)
