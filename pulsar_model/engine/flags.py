"""Version flags for the SQL builders and the Column code: one version's constants, or each row's own.

A transform's ``pulsar_version`` argument becomes a :class:`SqlFlags` (:func:`sql_flags`):

* a version string: every row has that version; each flag is the SQL literal ``true``/``false``, and the
  builders fold it in Python (:meth:`SqlFlags.pick`), so the plan holds only that version's branch;
* ``None``: each row's version is the ``pulsar_version`` column of the transform's input (per row); the
  transform computes a ``flags`` struct from it (:func:`with_flags`, the release rules of
  :data:`pulsar_model.domain.versions.FLAGS` as pure SQL) and binds the builders to where that struct sits
  in its frame (:meth:`SqlFlags.at`); every version-dependent branch becomes ``IF(flag, a, b)``.

The same definitions serve the Python engines through :func:`pulsar_model.domain.versions.behaviour`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pulsar_model import DEFAULT_PULSAR_VERSION
from pulsar_model.domain.versions import FLAGS, PulsarVersion, flags_sql, parsed_version_sql

__all__ = [
    "FLAGS_COLUMN",
    "VERSION_COLUMN",
    "SqlFlags",
    "sql_flags",
    "with_flags",
]

#: The input column a per-row call reads the broker version from (``managed_ledgers.pulsar_version``).
VERSION_COLUMN = "pulsar_version"
#: Where :func:`with_flags` puts the flags struct.
FLAGS_COLUMN = "_pa_flags"
_PARSED = "_pa_version_parsed"


@dataclass(frozen=True)
class SqlFlags:
    """The flags of one call: constants of one version (``values``) or fields of a struct (``base``)."""

    values: Mapping[str, bool] | None = None
    base: str | None = None

    @property
    def per_row(self) -> bool:
        """True when the flags are read from each row's flags struct."""
        return self.values is None

    def at(self, base: str) -> SqlFlags:
        """These flags read from the struct SQL ``base`` (unchanged for constants)."""
        return self if self.values is not None else SqlFlags(None, base)

    def constant(self, name: str) -> bool | None:
        """The flag's value when it is a constant, else None."""
        if name not in FLAGS:
            raise KeyError(f"unknown version flag {name!r}")
        return None if self.values is None else self.values[name]

    def __call__(self, name: str) -> str:
        """The flag as SQL: ``true``/``false``, or the struct field."""
        value = self.constant(name)
        if value is not None:
            return "true" if value else "false"
        if self.base is None:
            raise ValueError(f"per-row flag {name!r} used before SqlFlags.at(...) bound it to a column")
        return f"({self.base}).`{name}`"

    def pick(self, name: str, if_true: str, if_false: str) -> str:
        """``IF(flag, if_true, if_false)``, folded to one side for constants."""
        value = self.constant(name)
        if value is not None:
            return if_true if value else if_false
        return f"IF(coalesce({self(name)}, false), {if_true}, {if_false})"

    def all(self, *names: str) -> str:
        """SQL of ``flag1 AND flag2 ...`` (a name prefixed ``!`` is negated), folded for constants."""
        parts = []
        for raw in names:
            negated, name = raw.startswith("!"), raw.lstrip("!")
            value = self.constant(name)
            if value is not None:
                if value == negated:
                    return "false"
                continue
            parts.append(
                f"NOT coalesce({self(name)}, false)" if negated else f"coalesce({self(name)}, false)"
            )
        return "(" + " AND ".join(parts) + ")" if parts else "true"

    def column(self, name: str) -> Column:
        """The flag as a Column (a literal for constants)."""
        value = self.constant(name)
        if value is not None:
            return F.lit(value)
        return F.coalesce(F.expr(self(name)), F.lit(False))


def sql_flags(pulsar_version: str | PulsarVersion | None) -> SqlFlags:
    """The :class:`SqlFlags` of a ``pulsar_version`` argument: constants of that version (validated, raises
    ``ConfigError`` when unknown), or per row for ``None`` (bind with :meth:`SqlFlags.at`)."""
    if pulsar_version is None:
        return SqlFlags()
    version = PulsarVersion.parse(pulsar_version)
    return SqlFlags({name: rule.holds(version) for name, rule in FLAGS.items()})


def with_flags(
    df: DataFrame, version: str = VERSION_COLUMN, out: str = FLAGS_COLUMN, drop_version: bool = False
) -> DataFrame:
    """``df`` plus ``out``: the flags struct of its ``version`` column. A null version is the default
    version (:data:`~pulsar_model.DEFAULT_PULSAR_VERSION`, as for the argument); a text that is not
    ``MAJOR.MINOR.PATCH`` of a modelled line gives a null struct, whose flags the builders read as false
    (versions are validated where they enter the program: configuration, export manifest). Two
    projections: one parse per row."""
    text = f"coalesce(`{version}`, '{DEFAULT_PULSAR_VERSION}')"
    parsed = df.select("*", F.expr(parsed_version_sql(text)).alias(_PARSED))
    keep = [F.col(f"`{c}`") for c in df.columns if not (drop_version and c == version)]
    return parsed.select(*keep, F.expr(flags_sql(f"`{_PARSED}`")).alias(out))
