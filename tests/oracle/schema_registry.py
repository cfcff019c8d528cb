"""Oracle for docs §9: Pulsar's registration path re-stated in plain Python around the real Avro Java library.

Everything Avro decides (parsing, ``Schema.equals``, the ``SchemaValidatorBuilder`` strategies with
``validateLatest``/``validateAll``) is run by Apache Avro 1.12.1 in the SparkSession's JVM through py4j
(``spark._jvm.org.apache.avro``); only the broker's own control flow is written here, from
``SchemaRegistryServiceImpl.putSchemaIfAbsent`` / ``getSchemaVersionBySchemaData`` /
``checkCompatibilityWithLatest`` / ``checkCompatibilityWithAll`` and ``AvroSchemaBasedCompatibilityCheck``
(apache/pulsar 4.x, docs §9.2, §9.8). It shares no code with ``pulsar_model``.

Pulsar parses with its ``CompatibleNameValidator`` (Avro's UTF validator plus ``$``): schemas without a
``$`` use Avro's own ``UTF_VALIDATOR`` (the same answers, no callback), the others a py4j callback that
implements the same rule.
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass
from typing import Any, ClassVar

from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import SparkSession

TRANSITIVE = ("BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE")
AVRO_CHECKED = ("AVRO", "JSON")
AVRO_PARSED = ("AVRO", "JSON", "PROTOBUF")


def _letter(c: str) -> bool:
    return ord(c) <= 0xFFFF and unicodedata.category(c) in ("Lu", "Ll", "Lt", "Lm", "Lo")


class _CompatibleNameValidator:
    """Pulsar's ``StructSchemaDataValidator.CompatibleNameValidator`` as a py4j callback."""

    def __init__(self, jvm: Any) -> None:
        self.jvm = jvm

    def validate(self, name: str | None) -> Any:
        nv = self.jvm.org.apache.avro.NameValidator
        if name is None:
            return nv.Result("Null name")
        if name == "":
            return nv.Result("Empty name")
        if not (_letter(name[0]) or name[0] in "_$"):
            return nv.Result("Illegal initial character: " + name)
        for c in name[1:]:
            digit = ord(c) <= 0xFFFF and unicodedata.category(c) == "Nd"
            if not (_letter(c) or digit or c in "_$"):
                return nv.Result("Illegal character in: " + name)
        return nv.OK

    class Java:
        implements: ClassVar[list[str]] = ["org.apache.avro.NameValidator"]


@dataclass(frozen=True)
class Outcome:
    """What ``putSchemaIfAbsent`` does: ``accepted``, and ``path`` = ``first`` | ``identical:<i>`` |
    ``always`` | ``type`` | ``hash`` | ``validator:latest`` | ``validator:all`` | ``never`` | ``error``."""

    accepted: bool
    path: str
    identical_index: int | None = None
    detail: str = ""


class JavaAvro:
    """The Avro library of the session's JVM."""

    def __init__(self, spark: SparkSession) -> None:
        self.jvm = spark._jvm  # type: ignore[attr-defined]
        self.avro = self.jvm.org.apache.avro
        self._callback: _CompatibleNameValidator | None = None
        self._parsed: dict[tuple[str, bool], Any] = {}
        self._spark = spark

    def _validator(self, text: str) -> Any:
        if "$" not in text:
            return self.avro.NameValidator.UTF_VALIDATOR
        if self._callback is None:
            ensure_callback_server_started(self._spark.sparkContext._gateway)  # type: ignore[attr-defined]
            self._callback = _CompatibleNameValidator(self.jvm)
        return self._callback

    def parse(self, text: str, validate_defaults: bool) -> Any:
        """``new Schema.Parser(COMPATIBLE_NAME_VALIDATOR)`` with ``setValidateDefaults``; raises on error.

        Parsed schemas are kept per (text, flag): the registry parses the same stored versions again on
        every registration, with the same result."""
        key = (text, validate_defaults)
        if key not in self._parsed:
            try:
                parser = self.avro.Schema.Parser(self._validator(text))
                parser.setValidateDefaults(validate_defaults)
                self._parsed[key] = parser.parse(text)
            except Exception as e:
                self._parsed[key] = e
        result = self._parsed[key]
        if isinstance(result, Exception):
            raise result
        return result

    def try_parse(self, text: str, validate_defaults: bool) -> Any | None:
        try:
            return self.parse(text, validate_defaults)
        except Exception:
            return None

    def equals(self, a: Any, b: Any) -> bool:
        return bool(a.equals(b))

    def can_read(self, writer: Any, reader: Any) -> bool | str:
        """``ValidateCanRead``: True, or ``"incompatible"`` / ``"error"`` (any other exception)."""
        validator = self.avro.SchemaValidatorBuilder().canReadStrategy().validateLatest()
        return self._run(validator, reader, [writer])

    def _run(self, validator: Any, to_validate: Any, existing: list[Any]) -> bool | str:
        java_list = self.jvm.java.util.LinkedList()
        for s in existing:
            java_list.add(s)
        try:
            validator.validate(to_validate, java_list)
            return True
        except Exception as e:
            java = getattr(e, "java_exception", None)
            name = java.getClass().getName() if java is not None else type(e).__name__
            return "incompatible" if name == "org.apache.avro.SchemaValidationException" else "error"

    def validator(self, strategy: str) -> Any | None:
        """``AvroSchemaBasedCompatibilityCheck.createSchemaValidator``; None for Never (and Always)."""
        builder = self.avro.SchemaValidatorBuilder()
        pick = {
            "BACKWARD": (builder.canReadStrategy, True),
            "BACKWARD_TRANSITIVE": (builder.canReadStrategy, False),
            "FORWARD": (builder.canBeReadStrategy, True),
            "FORWARD_TRANSITIVE": (builder.canBeReadStrategy, False),
            "FULL": (builder.mutualReadStrategy, True),
            "FULL_TRANSITIVE": (builder.mutualReadStrategy, False),
        }.get(strategy)
        if pick is None:
            return None
        b = pick[0]()
        return b.validateLatest() if pick[1] else b.validateAll()


def _java_error(e: Exception) -> str:
    """The Java exception behind a py4j error: class and message."""
    java = getattr(e, "java_exception", None)
    return str(java.toString())[:160] if java is not None else f"{type(e).__name__}: {e}"[:160]


def _sha(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def _avro_check(java: JavaAvro, existing: list[str], new: str, strategy: str) -> Outcome:
    """``AvroSchemaBasedCompatibilityCheck.checkCompatible(Iterable, to, strategy)``."""
    kind = "validator:all" if strategy in TRANSITIVE else "validator:latest"
    try:
        from_list = [java.parse(text, False) for text in existing]
        from_list.reverse()  # LinkedList.addFirst: newest first
        to = java.parse(new, False)
    except Exception as e:
        return Outcome(False, "error", detail=f"parse: {_java_error(e)}")
    if strategy == "ALWAYS_COMPATIBLE":
        return Outcome(True, "always")
    validator = java.validator(strategy)
    if validator is None:
        return Outcome(False, "never")
    result = java._run(validator, to, from_list)
    return Outcome(result is True, kind, detail="" if result is True else str(result))


def _default_check(strategy: str) -> Outcome:
    """``SchemaCompatibilityCheck.DEFAULT``: only ALWAYS_INCOMPATIBLE refuses."""
    if strategy == "ALWAYS_INCOMPATIBLE":
        return Outcome(False, "never")
    return Outcome(True, "default")


def put_schema(
    java: JavaAvro, strategy: str, history: list[tuple[str, str | None]], new: tuple[str, str]
) -> Outcome:
    """Register ``new`` = (type, text) on a topic whose versions are ``history`` (oldest first, a None text
    is a deletion), under ``strategy``; what the 4.x broker answers."""
    new_type, new_text = new
    # SchemaRegistryServiceWithSchemaDataValidator -> StructSchemaDataValidator
    if new_type in AVRO_CHECKED:
        parsed = java.try_parse(new_text, False)
        if parsed is None or (new_type == "AVRO" and str(parsed.getType().toString()) == "UNION"):
            return Outcome(False, "invalid")
    # trimDeletedSchemaAndGetList
    last_delete = max((i for i, (_, text) in enumerate(history) if text is None), default=-1)
    live = [(t, text) for t, text in history[last_delete + 1 :] if text is not None]
    if not live:
        return Outcome(True, "first")
    # getSchemaVersionBySchemaData
    try:
        if new_type in AVRO_PARSED:
            new_schema = java.parse(new_text, True)
            for i, (t, text) in enumerate(live):
                if t in AVRO_PARSED:
                    if java.equals(new_schema, java.parse(text, True)) and t == new_type:
                        return Outcome(True, f"identical:{i}", identical_index=i)
                elif _sha(text) == _sha(new_text) and t == new_type:
                    return Outcome(True, f"identical:{i}", identical_index=i)
        else:
            for i, (t, text) in enumerate(live):
                if _sha(text) == _sha(new_text) and t == new_type:
                    return Outcome(True, f"identical:{i}", identical_index=i)
    except Exception as e:
        return Outcome(False, "error", detail=f"identity: {_java_error(e)}")
    if strategy in TRANSITIVE:
        # checkCompatibilityWithAll
        if any(t != new_type for t, _ in live):
            return Outcome(False, "type")
        if new_type in AVRO_CHECKED:
            return _avro_check(java, [text for _, text in live], new_text, strategy)
        return _default_check(strategy)
    # checkCompatibilityWithLatest
    if strategy == "ALWAYS_COMPATIBLE":
        return Outcome(True, "always")
    latest_type, latest_text = live[-1]
    if latest_type != new_type:
        return Outcome(False, "type")
    if _sha(latest_text) == _sha(new_text):
        return Outcome(True, "hash")
    if new_type in AVRO_CHECKED:
        return _avro_check(java, [latest_text], new_text, strategy)
    return _default_check(strategy)
