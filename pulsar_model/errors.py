"""Exception hierarchy. Every message names the bad value and says how to fix it."""

from __future__ import annotations


class PulsarAnalyticsError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(PulsarAnalyticsError):
    """A configuration file or option is invalid."""


class ContractError(PulsarAnalyticsError):
    """A DataFrame or a table does not match its contract in ``schemas/``."""


class SchemaChangeError(ContractError):
    """A write would change a Delta table's schema without being asked to."""


class ConcurrentWriteError(PulsarAnalyticsError):
    """Another writer committed to the same Delta table since this write read it."""


class TableNotFoundError(PulsarAnalyticsError):
    """A Delta table that was asked for does not exist."""


class UnsafePathError(PulsarAnalyticsError):
    """A table name or path would escape the warehouse root."""


class ExportLayoutError(PulsarAnalyticsError):
    """An export folder does not follow the documented layout."""


class EnvironmentProblem(PulsarAnalyticsError):
    """The machine lacks something the job needs (e.g. Java 17+)."""
