"""Build the spark-submit artifacts: the wheel and the ``--py-files`` zip (issue 8, runtimes).

Usage (from the project root)::

    python tools/build_dist.py                  # dist/pulsar_analytics-<v>-py3-none-any.whl + zip
    python tools/build_dist.py --zip-only       # dist/pulsar_analytics.zip only (no pip call)
    python tools/build_dist.py --out /tmp/dist

Both artifacts carry the whole ``pulsar_model`` package: Python modules plus the non-Python resources
(``resources/log4j2.properties``, ``wire/proto/*.proto``, ``wire/_generated``) and the table contracts:
``schemas/*.yaml`` live at the repository root, so they are copied into the package as
``pulsar_model/_schemas/`` (the packaged location :func:`pulsar_model.tables.contracts.schemas_dir` looks at
first). The wheel is built from a staging copy of the project with that folder added, so the source
tree is never modified. The zip is deterministic: sorted entries, fixed timestamps, no ``__pycache__``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "pulsar_model"
#: Folder inside the package that receives the repository's ``schemas/*.yaml`` (see contracts.py).
PACKAGED_SCHEMAS = "_schemas"
ZIP_NAME = "pulsar_analytics.zip"
#: 1980-01-01, the earliest timestamp a zip entry can hold: identical inputs give identical zips.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_SKIPPED_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
_SKIPPED_SUFFIXES = (".pyc", ".pyo")
#: What a staging copy for the wheel needs (build metadata + the package + the contracts).
_WHEEL_INPUTS = ("pyproject.toml", "README.md", "LICENSE", PACKAGE, "schemas")


def package_files(root: Path = PROJECT_ROOT) -> Iterator[tuple[Path, str]]:
    """Yield ``(source file, archive name)`` for every file the artifacts carry, in sorted order.

    Archive names are POSIX paths relative to the zip root, e.g. ``pulsar_model/pipeline/cli.py`` and
    ``pulsar_model/_schemas/ledgers.yaml``.
    """
    package_dir = root / PACKAGE
    if not (package_dir / "__init__.py").is_file():
        raise FileNotFoundError(f"{package_dir} is not the pulsar_model package; run from the project root")
    for path in sorted(package_dir.rglob("*")):
        relative = path.relative_to(root)
        if path.is_dir() or _SKIPPED_DIRS.intersection(relative.parts):
            continue
        if relative.parts[1] == PACKAGED_SCHEMAS:
            continue  # a checked-in copy or symlink of schemas/: added from schemas/ below
        if path.suffix in _SKIPPED_SUFFIXES or path.name.startswith("."):
            continue
        yield path, relative.as_posix()
    schemas = sorted((root / "schemas").glob("*.yaml"))
    if not schemas:
        raise FileNotFoundError(f"No table contracts found in {root / 'schemas'}")
    for path in schemas:
        yield path, f"{PACKAGE}/{PACKAGED_SCHEMAS}/{path.name}"


def build_zip(out_dir: Path, root: Path = PROJECT_ROOT) -> Path:
    """Write ``<out_dir>/pulsar_analytics.zip`` for ``spark-submit --py-files``; return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / ZIP_NAME
    partial = out_dir / f".{ZIP_NAME}.partial"
    directories: set[str] = set()
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for source, name in package_files(root):
            # Explicit directory entries: importlib.resources and zipimport see the folders.
            parts = name.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                folder = "/".join(parts[:depth]) + "/"
                if folder not in directories:
                    directories.add(folder)
                    info = zipfile.ZipInfo(folder, date_time=_ZIP_EPOCH)
                    info.external_attr = 0o40755 << 16
                    archive.writestr(info, b"")
            info = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, source.read_bytes())
    partial.replace(target)
    return target


def build_wheel(out_dir: Path, root: Path = PROJECT_ROOT, *, build_isolation: bool = False) -> Path:
    """Build the wheel with ``pip wheel --no-deps`` from a staging copy that carries ``_schemas``.

    ``build_isolation=False`` (default) uses the setuptools of the running interpreter (offline-safe);
    return the wheel's path.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pulsar-dist-") as tmp:
        stage = Path(tmp) / "src"
        stage.mkdir()
        for name in _WHEEL_INPUTS:
            source = root / name
            if source.is_dir():
                shutil.copytree(source, stage / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            elif source.is_file():
                shutil.copy2(source, stage / name)
        shutil.copytree(root / "schemas", stage / PACKAGE / PACKAGED_SCHEMAS, dirs_exist_ok=True)
        built = Path(tmp) / "wheels"
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(built), str(stage)]
        if not build_isolation:
            command.insert(command.index("--no-deps"), "--no-build-isolation")
        subprocess.run(command, check=True)
        wheels = sorted(built.glob("*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(f"pip wheel produced {[w.name for w in wheels]}, expected one wheel")
        target = out_dir / wheels[0].name
        shutil.copy2(wheels[0], target)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", default=str(PROJECT_ROOT / "dist"), help="output folder (default: dist/)")
    parser.add_argument("--zip-only", action="store_true", help="build only the --py-files zip")
    parser.add_argument(
        "--build-isolation",
        action="store_true",
        help="let pip fetch setuptools into an isolated build env (needs PyPI)",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    print(f"built {build_zip(out)}")
    if not args.zip_only:
        print(f"built {build_wheel(out, build_isolation=args.build_isolation)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
