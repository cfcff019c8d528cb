"""Exception hierarchy. Every message names the bad value and says how to fix it."""

from __future__ import annotations

import re


class PulsarAnalyticsError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(PulsarAnalyticsError):
    """A configuration file or option is invalid."""


class NoDataError(PulsarAnalyticsError):
    """The warehouse holds no data for what was asked (a run date without ingested data, no ingest yet)."""


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


class MachineSetupError(PulsarAnalyticsError):
    """The machine lacks something the job needs (e.g. Java 17+)."""


class EntryDecodeError(PulsarAnalyticsError):
    """A stored ledger entry cannot be decoded (docs §4.3, §5.4-5.5, §8.3).

    ``code`` is a stable machine-readable reason used by the ingest quarantine; one of
    ``empty``, ``bad_magic``, ``bad_checksum``, ``truncated``, ``bad_metadata``, ``bad_batch``,
    ``bad_compression``, ``bad_marker`` (see ``pulsar_model.wire.codec.DECODE_ERROR_CODES``).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message

    def __reduce__(self) -> tuple[type[EntryDecodeError], tuple[str, str]]:
        # Keeps the exception picklable across Spark worker boundaries.
        return (type(self), (self.code, self.message))


class EntryEncodeError(PulsarAnalyticsError, ValueError):
    """Arguments given to a stored-entry encoder are invalid (value out of range, missing field)."""


class ParseError(PulsarAnalyticsError, ValueError):
    """A value in an admin export (position, individuallyDeletedMessages, timestamp) cannot be parsed.

    The message names the bad value and the expected form; the ingest parsers turn it into a
    quarantine reason (docs §10.2).
    """


class DeltaBackendUnavailableError(MachineSetupError):
    """The Delta backend asked for cannot run in this session (e.g. the delta-spark jars are missing)."""


class UnsupportedTableFeatureError(PulsarAnalyticsError):
    """A Delta table uses a protocol feature the bridge cannot honour (deletion vectors, column mapping)."""


def failure_summary(exc: BaseException, driver_memory: str | None = None) -> str:
    """One or two lines an operator can act on for ``exc``, without a Java stack trace.

    A JVM error reaches Python as the whole stack trace in the message (py4j); the summary keeps the call
    that failed and the root cause (the last ``Caused by``). A driver ``OutOfMemoryError`` names the
    setting and the fix instead: it is never a bug of the data, and the stage reruns cleanly (a failed
    stage leaves its tables at their previous version).
    """
    text = str(exc)
    memory = f" with spark.driver_memory={driver_memory}" if driver_memory else ""
    oom = re.search(r"java\.lang\.OutOfMemoryError(?:: ([^\n]+))?", text)
    if oom:
        detail = f": {oom.group(1).strip()}" if oom.group(1) else ""
        return (
            f"Spark's driver ran out of memory (java.lang.OutOfMemoryError{detail}){memory}. Give it more, "
            "e.g. --set spark.driver_memory=4g, or spark.driver_memory: auto (half of this machine's memory) "
            "in the config file, and rerun: the failed stage left its tables at their previous version."
        )
    if driver_stopped(exc):
        first = text.splitlines()[0] if text else ""
        return (
            f"Spark's driver JVM stopped during the run{memory} ({type(exc).__name__}: {first}); the "
            "Spark log lines above say why, on a small driver usually java.lang.OutOfMemoryError. Give "
            "it more memory, e.g. --set spark.driver_memory=4g, and rerun: the failed stage left its "
            "tables at their previous version."
        )
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not any(line.startswith("at ") for line in lines):
        return text
    first = lines[0].removeprefix(": ")
    causes = [line for line in lines if line.startswith("Caused by:")]
    root = causes[-1].removeprefix("Caused by:").strip() if causes else lines[1].removeprefix(": ")
    return f"{first} {root} (--log-level debug shows the Java stack trace)"


def driver_stopped(exc: BaseException) -> bool:
    """``exc`` says the Spark driver JVM is gone (py4j lost its connection, or the context was stopped)."""
    text = str(exc)
    return (
        isinstance(exc, ConnectionError)
        or type(exc).__name__ == "Py4JNetworkError"
        or "Cannot call methods on a stopped SparkContext" in text
        or "Answer from Java side is empty" in text
    )


def is_resource_failure(exc: BaseException) -> bool:
    """The run failed for want of driver memory or lost its JVM: an environment problem, not a bug."""
    return "OutOfMemoryError" in str(exc) or driver_stopped(exc)
