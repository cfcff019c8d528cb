"""Apache Avro's Java schema rules as the broker's schema registry runs them, in plain Python (docs §9.5-9.8).

The broker decides AVRO and JSON schema compatibility with the Java library (Apache Avro 1.12.1 here):
``Schema.Parser`` builds the schemas, ``Schema.equals`` decides whether a new version is a re-upload, and
``SchemaValidatorBuilder``'s strategies call ``ResolvingGrammarGenerator`` on a (writer, reader) pair and
reject the pair when ``Symbol.hasErrors`` finds an error symbol in the grammar. This module re-states those
rules so that the verdicts can be computed inside Spark's Python workers, with no JVM call:

* :func:`parse_schema` - ``Schema.Parser`` with a name validator (Pulsar's ``CompatibleNameValidator``,
  which also allows ``$``) and ``validateDefaults`` on or off (docs §9.5);
* :func:`schemas_equal` - ``Schema.equals``: names, types, symbols, sizes, fields (name, type, default,
  order, properties) and properties; docs, aliases and enum defaults are ignored (docs §9.6);
* :func:`can_read` - ``Resolver.resolve(applyAliases(writer, reader), reader)`` turned into the errors
  ``Symbol.hasErrors`` would find, and the runtime exceptions the same calls throw (docs §9.7).

Everything is deterministic and pure; schemas are immutable once parsed. Errors carry a readable path
(``Event.items[].id``) so a verdict can say which field or type made it incompatible.
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
from collections.abc import Callable, Iterator
from typing import Final

from pulsar_model.errors import PulsarAnalyticsError

__all__ = [
    "COMPATIBLE_NAMES",
    "UTF_NAMES",
    "AvroSchemaError",
    "ReadResult",
    "Schema",
    "can_read",
    "parse_schema",
    "schemas_equal",
]


class AvroSchemaError(PulsarAnalyticsError):
    """What the Java library throws for a schema or a pair of schemas (a parse error, an invalid default,
    a name it rejects). The broker turns every one of them into a refused registration (docs §9.5)."""


# --- JSON values as Jackson sees them ------------------------------------------------------------------


class _Missing:
    """An absent JSON member (Jackson's ``get`` returns null), as opposed to a JSON ``null`` value."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()

Json = object  # a value of json.loads: None, bool, int, float, str, list, dict


def _reject_constant(token: str) -> object:
    # Jackson rejects NaN/Infinity literals unless ALLOW_NON_NUMERIC_NUMBERS is on (it is not).
    raise ValueError(f"Non-standard token '{token}'")


_COMMENT_RE: Final = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.DOTALL)
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def _blank_comments(text: str) -> str:
    """``//`` and ``/* */`` comments outside strings turned into spaces of the same length (Avro enables
    Jackson's ALLOW_COMMENTS), so positions in the result are positions in ``text``."""
    return _COMMENT_RE.sub(
        lambda m: m.group(0) if m.group(0).startswith('"') else " " * len(m.group(0)), text
    )


def load_json(text: str) -> Json:
    """Parse a schema text like ``Schema.Parser``: one JSON value (comments allowed before and inside it,
    NaN/Infinity literals not), and nothing but whitespace after it (a trailing comment is "dangling
    content" too)."""
    blanked = _blank_comments(text)
    start = len(blanked) - len(blanked.lstrip(" \t\n\r"))
    try:
        value, end = _DECODER.raw_decode(blanked, start)
    except ValueError as e:
        raise AvroSchemaError(f"Invalid JSON: {e}") from None
    rest = text[end:]
    if any(ord(c) > 0x20 for c in rest):  # Java's String.trim() keeps nothing above U+0020
        raise AvroSchemaError(f"dangling content after end of schema: {rest.strip()[:100]}")
    return value


def _is_text(v: Json) -> bool:
    return isinstance(v, str)


def _is_number(v: Json) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _is_integral(v: Json) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _text(v: Json) -> str | None:
    """Jackson ``textValue()``: the string of a text node, else null."""
    return v if isinstance(v, str) else None


def _member(node: Json, key: str) -> Json:
    """Jackson ``node.get(key)``: the member of an object node, MISSING otherwise (also for non-objects)."""
    if isinstance(node, dict):
        return node.get(key, MISSING)
    return MISSING


def json_equal(a: Json, b: Json) -> bool:
    """Jackson ``JsonNode.equals``: node kinds must match (1 != 1.0 != true), doubles compare like
    ``Double.compare`` (NaN equals NaN, -0.0 differs from 0.0), objects ignore member order."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, float) and isinstance(b, float)):
            return False
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return False


def _props_equal(a: dict[str, Json], b: dict[str, Json]) -> bool:
    return json_equal(a, b)


def _double_value(v: Json) -> float:
    """Jackson ``doubleValue()``: numbers as doubles, every other node 0.0."""
    if _is_number(v):
        try:
            return float(v)  # type: ignore[arg-type]
        except OverflowError:
            return math.inf if v > 0 else -math.inf  # type: ignore[operator]
    return 0.0


_JAVA_DOUBLE_RE: Final = re.compile(
    r"([+-]?)(?:(NaN)|(Infinity)|(?:(0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)"
    r"|((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?))[fFdD]?)"
)


def _java_parse_double(text: str) -> float:
    """``Double.parseDouble``: Java's syntax (NaN, Infinity, hex, an f/d suffix; surrounding control
    characters and spaces trimmed); anything else throws ``NumberFormatException``."""
    start, end = 0, len(text)
    while start < end and ord(text[start]) <= 0x20:
        start += 1
    while end > start and ord(text[end - 1]) <= 0x20:
        end -= 1
    m = _JAVA_DOUBLE_RE.fullmatch(text, start, end)
    if m is None:
        raise AvroSchemaError(f'NumberFormatException: For input string: "{text}"')
    sign = -1.0 if m.group(1) == "-" else 1.0
    if m.group(2):
        return math.nan
    if m.group(3):
        return sign * math.inf
    if m.group(4):
        return sign * float.fromhex(m.group(4))
    return sign * float(m.group(5))


# --- names ----------------------------------------------------------------------------------------------

NameValidator = Callable[[str | None], str | None]


def _java_letter(c: str) -> bool:
    # Java Strings are UTF-16: a character outside the BMP is two surrogates, neither a letter nor a digit.
    return ord(c) <= 0xFFFF and unicodedata.category(c) in ("Lu", "Ll", "Lt", "Lm", "Lo")


def _java_digit(c: str) -> bool:
    return ord(c) <= 0xFFFF and unicodedata.category(c) == "Nd"


def _make_validator(extra: str) -> NameValidator:
    def validate(name: str | None) -> str | None:
        if name is None:
            return "Null name"
        if name == "":
            return "Empty name"
        if not (_java_letter(name[0]) or name[0] == "_" or name[0] in extra):
            return f"Illegal initial character: {name}"
        for c in name[1:]:
            if not (_java_letter(c) or _java_digit(c) or c == "_" or c in extra):
                return f"Illegal character in: {name}"
        return None

    return validate


#: Avro's ``NameValidator.UTF_VALIDATOR``: letters, digits (not first) and ``_``. The Java library also
#: applies it, whatever the parser was given, when ``Schema.applyAliases`` rebuilds a writer schema.
UTF_NAMES: Final = "utf"
#: Pulsar's ``StructSchemaDataValidator.CompatibleNameValidator``: as UTF_VALIDATOR, plus ``$`` anywhere.
COMPATIBLE_NAMES: Final = "compatible"
_VALIDATORS: Final[dict[str, NameValidator]] = {
    UTF_NAMES: _make_validator(""),
    COMPATIBLE_NAMES: _make_validator("$"),
}


def _check_name(validator: NameValidator, name: str | None) -> str:
    error = validator(name)
    if error is not None:
        raise AvroSchemaError(error)
    assert name is not None
    return name


class Name:
    """A full name: ``name`` (validated), ``space`` (None for the null namespace) and ``full``."""

    __slots__ = ("full", "name", "space")

    def __init__(self, name: str, space: str | None, validator: NameValidator) -> None:
        dot = name.rfind(".")
        if dot < 0:
            short = _check_name(validator, name)
        else:  # a dotted name carries its own namespace
            space = name[:dot]
            short = _check_name(validator, name[dot + 1 :])
        self.name = short
        self.space = None if space == "" else space
        self.full = short if self.space is None else f"{self.space}.{short}"


# --- schemas --------------------------------------------------------------------------------------------

PRIMITIVES: Final = ("string", "bytes", "int", "long", "float", "double", "boolean", "null")
_SCHEMA_RESERVED: Final = frozenset(
    ("doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases")
)
_ENUM_RESERVED: Final = _SCHEMA_RESERVED | {"default"}
_FIELD_RESERVED: Final = frozenset(("default", "doc", "name", "order", "type", "aliases"))
_ORDERS: Final = ("ASCENDING", "DESCENDING", "IGNORE")
#: ``SystemLimitException``'s default maximum byte length (a fixed size above it is refused).
_MAX_BYTES_LENGTH: Final = 2**31 - 1 - 8


class Schema:
    """One node of a parsed schema. ``type`` is Avro's type name (``record``, ``enum``, ..., ``null``)."""

    __slots__ = ("props", "type")

    def __init__(self, type_: str, props: dict[str, Json] | None = None) -> None:
        self.type = type_
        self.props: dict[str, Json] = props if props is not None else {}

    @property
    def full_name(self) -> str:
        """``Schema.getFullName()``: the full name of a named type, else the type name."""
        return self.type

    @property
    def short_name(self) -> str | None:
        """``Schema.getName()`` of a named type."""
        return self.type

    def __repr__(self) -> str:
        return f"<{self.type} {self.full_name}>"


class Named(Schema):
    __slots__ = ("aliases", "doc", "name")

    def __init__(self, type_: str, name: Name, doc: str | None) -> None:
        super().__init__(type_)
        if name.full in PRIMITIVES:
            raise AvroSchemaError(f"Schemas may not be named after primitives: {name.full}")
        self.name = name
        self.doc = doc
        self.aliases: dict[str, Name] = {}  # full name -> Name, insertion ordered (a LinkedHashSet)

    @property
    def full_name(self) -> str:
        return self.name.full

    @property
    def short_name(self) -> str | None:
        return self.name.name

    def add_alias(self, alias: str, validator: NameValidator) -> None:
        a = Name(alias, self.name.space, validator)
        self.aliases.setdefault(a.full, a)


class Field:
    """A record field: ``default`` is MISSING when the field has none (a JSON null default is None)."""

    __slots__ = ("aliases", "default", "doc", "name", "order", "pos", "props", "schema")

    def __init__(
        self,
        name: str,
        schema: Schema,
        doc: str | None,
        default: Json,
        order: str,
        validator: NameValidator,
        validate_default: bool,
    ) -> None:
        self.name = _check_name(validator, name)
        self.schema = schema
        self.doc = doc
        if validate_default:
            _validate_default(name, schema, default)
        self.default = default
        self.order = order
        self.props: dict[str, Json] = {}
        self.aliases: list[str] = []
        self.pos = -1


class Record(Named):
    __slots__ = ("field_map", "fields", "is_error", "unresolved")

    def __init__(self, name: Name, doc: str | None, is_error: bool, unresolved: str | None = None) -> None:
        super().__init__("record", name, doc)
        self.is_error = is_error
        self.fields: list[Field] | None = None
        self.field_map: dict[str, Field] = {}
        self.unresolved = unresolved  # the referenced full name of a not-yet-defined type

    def set_fields(self, fields: list[Field]) -> None:
        names: dict[str, Field] = {}
        for i, f in enumerate(fields):
            if f.name in names:
                raise AvroSchemaError(f"Duplicate field {f.name} in record {self.name.full}")
            names[f.name] = f
            f.pos = i
        self.fields = list(fields)
        self.field_map = names

    def get_fields(self) -> list[Field]:
        if self.fields is None:
            raise AvroSchemaError("Schema fields not set yet")
        return self.fields


class Enum(Named):
    __slots__ = ("default", "symbols")

    def __init__(
        self, name: Name, doc: str | None, symbols: list[str | None], default: str | None, v: NameValidator
    ) -> None:
        super().__init__("enum", name, doc)
        seen: set[str] = set()
        for s in symbols:
            checked = _check_name(v, s)
            if checked in seen:
                raise AvroSchemaError(f"Duplicate enum symbol: {checked}")
            seen.add(checked)
        self.symbols: list[str] = [s for s in symbols if s is not None]
        if default is not None and default not in seen:
            raise AvroSchemaError(
                f"The Enum Default: {default} is not in the enum symbol set: {self.symbols}"
            )
        self.default = default


class Fixed(Named):
    __slots__ = ("size",)

    def __init__(self, name: Name, doc: str | None, size: int) -> None:
        super().__init__("fixed", name, doc)
        if size < 0:
            raise AvroSchemaError(f"Malformed data. Length is negative: {size}")
        if size > _MAX_BYTES_LENGTH:
            raise AvroSchemaError(f"Bytes length {size} exceeds maximum allowed")
        self.size = size


class Array(Schema):
    __slots__ = ("items",)

    def __init__(self, items: Schema) -> None:
        super().__init__("array")
        self.items = items


class Map(Schema):
    __slots__ = ("values",)

    def __init__(self, values: Schema) -> None:
        super().__init__("map")
        self.values = values


class Union(Schema):
    __slots__ = ("types",)

    def __init__(self, types: list[Schema]) -> None:
        super().__init__("union")
        _check_union(types)
        self.types = types

    @property
    def full_name(self) -> str:
        return "union[" + ", ".join(str(t.short_name) for t in self.types) + "]"


def _check_union(types: list[Schema]) -> None:
    names: set[str] = set()
    for t in types:
        if t.type == "union":
            raise AvroSchemaError("Nested union")
        if t.full_name in names:
            raise AvroSchemaError(f"Duplicate in union:{t.full_name}")
        names.add(t.full_name)


# --- default values (Schema.isValidDefault, used when validateDefaults is on) ---------------------------


def _is_valid_default(schema: Schema, value: Json, fieldless: frozenset[int] = frozenset()) -> bool:
    """``Schema.isValidDefault``. A record in ``fieldless`` is one whose copy has no fields yet (Avro's
    resolving copy validates a field while its enclosing records are still being built): checking an
    object default against it throws, as ``getFields()`` does."""
    if value is MISSING:
        return False
    t = schema.type
    if t in ("string", "bytes", "enum", "fixed"):
        return _is_text(value)
    if t == "int":
        return _is_integral(value) and -(2**31) <= value < 2**31  # type: ignore[operator]
    if t == "long":
        return _is_integral(value) and -(2**63) <= value < 2**63  # type: ignore[operator]
    if t in ("float", "double"):
        return _is_number(value)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "null":
        return value is None
    if isinstance(schema, Array):
        return isinstance(value, list) and all(_is_valid_default(schema.items, v, fieldless) for v in value)
    if isinstance(schema, Map):
        return isinstance(value, dict) and all(
            _is_valid_default(schema.values, v, fieldless) for v in value.values()
        )
    if isinstance(schema, Union):
        return any(_is_valid_value(s, value, fieldless) for s in schema.types)
    if isinstance(schema, Record):
        if not isinstance(value, dict):
            return False
        if id(schema) in fieldless:
            raise AvroSchemaError("Schema fields not set yet")
        return all(
            _is_valid_value(f.schema, value.get(f.name, f.default), fieldless) for f in schema.get_fields()
        )
    return False


def _is_valid_value(schema: Schema, value: Json, fieldless: frozenset[int]) -> bool:
    if value is MISSING:
        return False
    if isinstance(schema, Union):
        return any(_is_valid_default(s, value, fieldless) for s in schema.types)
    return _is_valid_default(schema, value, fieldless)


def _validate_default(
    field_name: str, schema: Schema, default: Json, fieldless: frozenset[int] = frozenset()
) -> None:
    if default is not MISSING and not _is_valid_default(schema, default, fieldless):
        shown = json.dumps(default, allow_nan=True)
        raise AvroSchemaError(f"Invalid default for field {field_name}: {shown} not a {schema.type}")


# --- parsing (Schema.Parser, ParseContext, SchemaResolver) ----------------------------------------------


class _Context:
    def __init__(self, validator: NameValidator, validate_defaults: bool) -> None:
        self.validator = validator
        self.validate_defaults = validate_defaults
        self.named: dict[str, Named] = {}
        self.placeholders = 0

    def find(self, name: str, space: str | None) -> Schema:
        if name in PRIMITIVES:
            return Schema(name)
        full = f"{space}.{name}" if space is not None and "." not in name else name
        found = self.named.get(full) or self.named.get(name)
        if found is not None:
            return found
        # Avro 1.12 allows a reference before the definition: a placeholder resolved at the end.
        self.placeholders += 1
        ph_name = Name(f"UnresolvedSchema_{self.placeholders}", "org.apache.avro.compiler", self.validator)
        ph = Record(ph_name, "unresolved schema", False, unresolved=full)
        ph.set_fields([])
        return ph

    def put(self, schema: Named) -> None:
        parts = schema.name.full.split(".")
        for i, part in enumerate(parts):
            error = self.validator(part)
            if error is not None:
                kind = "Name" if i == len(parts) - 1 else "Namespace part"
                raise AvroSchemaError(f'{kind} "{part}" is invalid: {error}')
        known = self.named.get(schema.name.full)
        if known is None:
            self.named[schema.name.full] = schema
        elif not schemas_equal(known, schema):
            raise AvroSchemaError(f"Can't redefine: {schema.name.full}")


def _required_text(node: Json, key: str, error: str) -> str:
    value = _text(_member(node, key))
    if value is None:
        raise AvroSchemaError(f"{error}: {json.dumps(node, allow_nan=True)[:200]}")
    return value


def _optional_text(node: Json, key: str) -> str | None:
    return _text(_member(node, key))


def _props(node: dict[str, Json], reserved: frozenset[str]) -> dict[str, Json]:
    return {k: v for k, v in node.items() if k not in reserved}


def _alias_texts(node: Json) -> list[str] | None:
    aliases = _member(node, "aliases")
    if aliases is MISSING:
        return None
    if not isinstance(aliases, list):
        raise AvroSchemaError("aliases not an array")
    out: list[str] = []
    for a in aliases:
        if not isinstance(a, str):
            raise AvroSchemaError(f"alias not a string: {a!r}")
        if a not in out:
            out.append(a)
    return out


def _parse_name(node: Json, space: str | None, ctx: _Context) -> Name:
    own = _optional_text(node, "namespace")
    return Name(
        _required_text(node, "name", "No name in schema"), own if own is not None else space, ctx.validator
    )


def _parse(node: Json, ctx: _Context, space: str | None) -> Schema:
    if isinstance(node, str):
        return ctx.find(node, space)
    if isinstance(node, dict):
        type_ = _required_text(node, "type", "No type")
        if type_ in PRIMITIVES:
            return Schema(type_, _props(node, _SCHEMA_RESERVED))
        if type_ in ("record", "error"):
            return _parse_record(node, ctx, space, type_ == "error")
        if type_ == "enum":
            return _parse_enum(node, ctx, space)
        if type_ == "array":
            items = node.get("items", MISSING)
            if items is MISSING:
                raise AvroSchemaError("Array has no items type")
            array = Array(_parse(items, ctx, space))
            array.props = _props(node, _SCHEMA_RESERVED)
            return array
        if type_ == "map":
            values = node.get("values", MISSING)
            if values is MISSING:
                raise AvroSchemaError("Map has no values type")
            map_ = Map(_parse(values, ctx, space))
            map_.props = _props(node, _SCHEMA_RESERVED)
            return map_
        if type_ == "fixed":
            return _parse_fixed(node, ctx, space)
        # {"type": "Name"}: a reference to a named type, its other attributes ignored (Avro <= 1.12.1).
        return ctx.find(type_, space)
    if isinstance(node, list):
        return Union([_parse(t, ctx, space) for t in node])
    raise AvroSchemaError(f"Schema not yet supported: {json.dumps(node, allow_nan=True)[:200]}")


def _add_aliases(schema: Named, node: Json, ctx: _Context) -> None:
    for alias in _alias_texts(node) or []:
        schema.add_alias(alias, ctx.validator)


def _parse_record(node: dict[str, Json], ctx: _Context, space: str | None, is_error: bool) -> Record:
    name = _parse_name(node, space, ctx)
    record = Record(name, _optional_text(node, "doc"), is_error)
    fields_node = node.get("fields", MISSING)
    if not isinstance(fields_node, list):
        raise AvroSchemaError(f"Record has no fields: {name.full}")
    record.set_fields([_parse_field(f, ctx, name.space) for f in fields_node])
    record.props = _props(node, _SCHEMA_RESERVED)
    _add_aliases(record, node, ctx)
    ctx.put(record)
    return record


def _parse_field(node: Json, ctx: _Context, space: str | None) -> Field:
    name = _required_text(node, "name", "No field name")
    doc = _optional_text(node, "doc")
    type_node = _member(node, "type")
    if type_node is MISSING:
        raise AvroSchemaError(f"No field type: {name}")
    schema = _parse(type_node, ctx, space)
    order = "ASCENDING"
    order_node = _member(node, "order")
    if order_node is not MISSING:
        text = _text(order_node)
        if text is None or text.upper() not in _ORDERS:
            raise AvroSchemaError(f"Invalid field order: {order_node!r}")
        order = text.upper()
    default = _member(node, "default")
    if default is not MISSING and schema.type in ("float", "double") and isinstance(default, str):
        default = _java_parse_double(default)
    field = Field(name, schema, doc, default, order, ctx.validator, ctx.validate_defaults)
    assert isinstance(node, dict)
    field.props = _props(node, _FIELD_RESERVED)
    field.aliases = _alias_texts(node) or []
    return field


def _parse_enum(node: dict[str, Json], ctx: _Context, space: str | None) -> Enum:
    name = _parse_name(node, space, ctx)
    symbols = node.get("symbols", MISSING)
    if not isinstance(symbols, list):
        raise AvroSchemaError(f"Enum has no symbols: {name.full}")
    enum = Enum(
        name,
        _optional_text(node, "doc"),
        [_text(s) for s in symbols],
        _text(node.get("default")),
        ctx.validator,
    )
    enum.props = _props(node, _ENUM_RESERVED)
    _add_aliases(enum, node, ctx)
    ctx.put(enum)
    return enum


def _parse_fixed(node: dict[str, Json], ctx: _Context, space: str | None) -> Fixed:
    name = _parse_name(node, space, ctx)
    size = node.get("size", MISSING)
    if not (_is_integral(size) and -(2**31) <= size < 2**31):  # type: ignore[operator]
        raise AvroSchemaError(f"Invalid or no size: {name.full}")
    assert isinstance(size, int)
    fixed = Fixed(name, _optional_text(node, "doc"), size)
    fixed.props = _props(node, _SCHEMA_RESERVED)
    _add_aliases(fixed, node, ctx)
    ctx.put(fixed)
    return fixed


def _children(s: Schema) -> Iterator[Schema]:
    if isinstance(s, Record):
        yield from (f.schema for f in s.get_fields())
    elif isinstance(s, Array):
        yield s.items
    elif isinstance(s, Map):
        yield s.values
    elif isinstance(s, Union):
        yield from s.types


def _resolve_placeholders(main: Schema, ctx: _Context) -> Schema:
    """Replace forward-reference placeholders by the named types, re-checking what Avro's resolving copy
    (``SchemaResolver.ResolvingVisitor`` driven by ``Schemas.visit``) re-checks: union branches, and every
    field default against its resolved type when defaults are validated.

    The copy is replayed step by step because it decides which defaults fail: a record's copy gets its
    fields (and its defaults are validated) after its children, while the copies of the records above it
    have none yet, so an object default that reaches such a record throws. A placeholder starts a nested
    traversal of its target when the target has no copy yet, and that traversal can finish records an
    outer traversal started."""
    if isinstance(main, Record) and main.unresolved is not None:
        raise AvroSchemaError(f"Unknown schema: {main.unresolved}")
    via_placeholder: set[tuple[int, int]] = set()  # (parent id, child slot) that held a placeholder

    def target(parent: Schema, slot: int, s: Schema) -> Schema:
        if isinstance(s, Record) and s.unresolved is not None:
            found = ctx.named.get(s.unresolved)
            if found is None:
                raise AvroSchemaError(f"Undefined schema: {s.unresolved}")
            via_placeholder.add((id(parent), slot))
            return found
        return s

    seen: set[int] = set()
    pending: list[Schema] = [*ctx.named.values(), main]
    while pending:
        s = pending.pop()
        if id(s) in seen:
            continue
        seen.add(id(s))
        if isinstance(s, Record):
            for i, f in enumerate(s.get_fields()):
                f.schema = target(s, i, f.schema)
        elif isinstance(s, Array):
            s.items = target(s, 0, s.items)
        elif isinstance(s, Map):
            s.values = target(s, 0, s.values)
        elif isinstance(s, Union):
            s.types = [target(s, i, t) for i, t in enumerate(s.types)]
        pending.extend(_children(s))

    copied: set[int] = set()  # schemas with a copy (records: from the moment the fieldless copy exists)
    fieldless: set[int] = set()  # records whose copy has no fields yet

    def finish(s: Schema) -> None:
        if isinstance(s, Record):
            if id(s) in fieldless:
                if ctx.validate_defaults:
                    building = frozenset(fieldless)
                    for f in s.get_fields():
                        _validate_default(f.name, f.schema, f.default, building)
                fieldless.discard(id(s))
        elif isinstance(s, Union):
            _check_union(s.types)
        copied.add(id(s))

    def visit(start: Schema) -> None:
        visited: set[int] = set()
        stack: list[tuple[Schema, bool, bool]] = [(start, False, False)]  # (schema, after?, placeholder?)
        while stack:
            s, after, placeholder = stack.pop()
            if after:
                finish(s)
            elif placeholder:
                if id(s) not in copied:
                    visit(s)
            elif id(s) in visited or not isinstance(s, Record | Array | Map | Union):
                if not isinstance(s, Record | Array | Map | Union):
                    copied.add(id(s))
            else:
                visited.add(id(s))
                if isinstance(s, Record) and id(s) not in copied:
                    copied.add(id(s))
                    fieldless.add(id(s))
                stack.append((s, True, False))
                # Java pushes the fields last-first (the first field is visited first) and the union
                # branches first-first (the last branch is visited first).
                children = list(_children(s))
                order = range(len(children) - 1, -1, -1) if isinstance(s, Record) else range(len(children))
                for i in order:
                    stack.append((children[i], False, (id(s), i) in via_placeholder))

    for root in ctx.named.values():
        visit(root)
    if not isinstance(main, Named):
        visit(main)
    if isinstance(main, Named):
        return ctx.named.get(main.full_name, main)
    return main


@functools.lru_cache(maxsize=4096)
def parse_schema(text: str, *, validate_defaults: bool = False, names: str = COMPATIBLE_NAMES) -> Schema:
    """``new Schema.Parser(validator).setValidateDefaults(validate_defaults).parse(text)`` (docs §9.5).

    ``names`` is :data:`COMPATIBLE_NAMES` (Pulsar's parsers) or :data:`UTF_NAMES` (Avro's default). Raises
    :class:`AvroSchemaError` for whatever the Java parser throws on. The result is shared (cached): never
    mutate it.
    """
    ctx = _Context(_VALIDATORS[names], validate_defaults)
    try:
        return _resolve_placeholders(_parse(load_json(text), ctx, None), ctx)
    except RecursionError:
        # A default that refers to itself through a recursive record: Java overflows its stack too.
        raise AvroSchemaError("StackOverflowError while validating a default value") from None


# --- equality (Schema.equals) ---------------------------------------------------------------------------


def schemas_equal(a: Schema, b: Schema) -> bool:
    """``Schema.equals`` of Avro 1.12.1 (docs §9.6): docs, aliases and an enum's default do not count."""
    return _equal(a, b, set())


def _equal(a: Schema, b: Schema, seen: set[tuple[int, int]]) -> bool:
    if a is b:
        return True
    if a.type != b.type:
        return False
    if isinstance(a, Record) and isinstance(b, Record):
        if a.name.full != b.name.full or not _props_equal(a.props, b.props):
            return False
        pair = (id(a), id(b))
        if pair in seen:
            return True  # a recursive record compared within itself
        seen.add(pair)
        fa, fb = a.fields, b.fields
        if fa is None or fb is None:
            return fa is None and fb is None
        return len(fa) == len(fb) and all(_field_equal(x, y, seen) for x, y in zip(fa, fb, strict=True))
    if isinstance(a, Enum) and isinstance(b, Enum):
        return a.name.full == b.name.full and a.symbols == b.symbols and _props_equal(a.props, b.props)
    if isinstance(a, Fixed) and isinstance(b, Fixed):
        return a.name.full == b.name.full and a.size == b.size and _props_equal(a.props, b.props)
    if isinstance(a, Array) and isinstance(b, Array):
        return _equal(a.items, b.items, seen) and _props_equal(a.props, b.props)
    if isinstance(a, Map) and isinstance(b, Map):
        return _equal(a.values, b.values, seen) and _props_equal(a.props, b.props)
    if isinstance(a, Union) and isinstance(b, Union):
        return len(a.types) == len(b.types) and all(
            _equal(x, y, seen) for x, y in zip(a.types, b.types, strict=True)
        )
    return _props_equal(a.props, b.props)


def _field_equal(a: Field, b: Field, seen: set[tuple[int, int]]) -> bool:
    return (
        a.name == b.name
        and _equal(a.schema, b.schema, seen)
        and _default_equal(a.default, b.default)
        and a.order == b.order
        and _props_equal(a.props, b.props)
    )


def _default_equal(a: Json, b: Json) -> bool:
    if a is MISSING or b is MISSING:
        return a is MISSING and b is MISSING
    if math.isnan(_double_value(a)):
        return math.isnan(_double_value(b))
    return json_equal(a, b)


# --- Schema.applyAliases --------------------------------------------------------------------------------


def _apply_aliases(writer: Schema, reader: Schema) -> Schema:
    """The writer schema renamed by the reader's aliases (record/enum/fixed names, record fields)."""
    if schemas_equal(writer, reader):
        return writer
    aliases: dict[str, Name] = {}
    field_aliases: dict[str, dict[str, str]] = {}
    _collect_aliases(reader, set(), aliases, field_aliases)
    if not aliases and not field_aliases:
        return writer
    return _rewrite(writer, {}, aliases, field_aliases)


def _collect_aliases(
    s: Schema, seen: set[int], aliases: dict[str, Name], field_aliases: dict[str, dict[str, str]]
) -> None:
    if isinstance(s, Named):
        for alias in s.aliases.values():
            aliases[alias.full] = s.name
    if isinstance(s, Record):
        if id(s) in seen:
            return
        seen.add(id(s))
        for f in s.get_fields():
            for a in f.aliases:
                field_aliases.setdefault(s.name.full, {})[a] = f.name
            _collect_aliases(f.schema, seen, aliases, field_aliases)
        if s.aliases and s.name.full in field_aliases:
            for alias in s.aliases.values():
                field_aliases[alias.full] = field_aliases[s.name.full]
    elif isinstance(s, Array):
        _collect_aliases(s.items, seen, aliases, field_aliases)
    elif isinstance(s, Map):
        _collect_aliases(s.values, seen, aliases, field_aliases)
    elif isinstance(s, Union):
        for t in s.types:
            _collect_aliases(t, seen, aliases, field_aliases)


_UTF: Final = _VALIDATORS[UTF_NAMES]


def _rewrite(
    s: Schema, seen: dict[int, Schema], aliases: dict[str, Name], field_aliases: dict[str, dict[str, str]]
) -> Schema:
    # Outside a parse the Java library validates names with UTF_VALIDATOR and defaults always.
    result: Schema = s
    if isinstance(s, Record):
        if id(s) in seen:
            return seen[id(s)]
        name = aliases.get(s.name.full, s.name)
        record = Record(Name(name.full, None, _UTF), s.doc, s.is_error)
        seen[id(s)] = record
        renames = field_aliases.get(name.full, {})
        fields = []
        for f in s.get_fields():
            schema = _rewrite(f.schema, seen, aliases, field_aliases)
            new = Field(renames.get(f.name, f.name), schema, f.doc, f.default, f.order, _UTF, True)
            new.props = dict(f.props)
            fields.append(new)
        record.set_fields(fields)
        result = record
    elif isinstance(s, Enum):
        if s.name.full in aliases:
            result = Enum(
                Name(aliases[s.name.full].full, None, _UTF), s.doc, list(s.symbols), s.default, _UTF
            )
    elif isinstance(s, Array):
        items = _rewrite(s.items, seen, aliases, field_aliases)
        if not schemas_equal(items, s.items):
            result = Array(items)
    elif isinstance(s, Map):
        values = _rewrite(s.values, seen, aliases, field_aliases)
        if not schemas_equal(values, s.values):
            result = Map(values)
    elif isinstance(s, Union):
        result = Union([_rewrite(t, seen, aliases, field_aliases) for t in s.types])
    elif isinstance(s, Fixed) and s.name.full in aliases:
        result = Fixed(Name(aliases[s.name.full].full, None, _UTF), s.doc, s.size)
    if result is not s and not schemas_equal(result, s):
        result.props = dict(s.props)
    return result


# --- default values as the resolver encodes them (ResolvingGrammarGenerator.encode, GenericData) ---------


def _zigzag(n: int, bits: int) -> bytes:
    n &= (1 << bits) - 1
    if n >= 1 << (bits - 1):
        n -= 1 << bits
    z = ((n << 1) ^ (n >> (bits - 1))) & ((1 << bits) - 1)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _java_int(v: Json, bits: int) -> int:
    """``JsonNode.intValue()`` / ``longValue()``: integers wrap, doubles cast (saturating, NaN -> 0)."""
    if isinstance(v, float):
        if math.isnan(v):
            return 0
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        return lo if v <= lo else hi if v >= hi else int(v)
    assert isinstance(v, int)
    return v


def _latin1(text: str) -> bytes:
    return text.encode("latin-1", "replace")


def _json_size(v: Json) -> int:
    return len(v) if isinstance(v, list | dict) else 0


def _json_elements(v: Json) -> list[Json]:
    if isinstance(v, list):
        return list(v)
    if isinstance(v, dict):
        return list(v.values())
    return []


def _encode(out: bytearray, s: Schema, n: Json) -> None:
    """Avro binary of JSON default ``n`` for ``s``, raising where the Java encoder throws."""
    t = s.type
    if isinstance(s, Record):
        for f in s.get_fields():
            v = _member(n, f.name)
            if v is MISSING:
                v = f.default
            if v is MISSING:
                raise AvroSchemaError(f"No default value for: {f.name}")
            _encode(out, f.schema, v)
    elif isinstance(s, Enum):
        symbol = _text(n)
        if symbol not in s.symbols:
            raise AvroSchemaError(f"enum value '{symbol}' is not in the enum symbol set: {s.symbols}")
        out += _zigzag(s.symbols.index(symbol), 32)
    elif isinstance(s, Array | Map):
        count = _json_size(n)
        if count > 0:
            out += _zigzag(count, 64)
        if isinstance(s, Array):
            for item in _json_elements(n):
                _encode(out, s.items, item)
        elif isinstance(n, dict):
            for key, value in n.items():
                _write_bytes(out, key.encode("utf-8", "replace"))
                _encode(out, s.values, value)
        out.append(0)
    elif isinstance(s, Union):
        for i, branch in enumerate(s.types):
            if _json_fits(branch.type, n):
                out += _zigzag(i, 32)
                _encode(out, branch, n)
                return
        raise AvroSchemaError(f"Not compatible default value for union: {n!r}")
    elif isinstance(s, Fixed):
        if not _is_text(n):
            raise AvroSchemaError(f"Non-string default value for fixed: {n!r}")
        assert isinstance(n, str)
        out += _latin1(n)[: s.size].ljust(s.size, b"\0")
    elif t in ("string", "bytes"):
        if not _is_text(n):
            raise AvroSchemaError(f"Non-string default value for {t}: {n!r}")
        assert isinstance(n, str)
        _write_bytes(out, n.encode("utf-8", "replace") if t == "string" else _latin1(n))
    elif t in ("int", "long", "float", "double"):
        if not _is_number(n):
            raise AvroSchemaError(f"Non-numeric default value for {t}: {n!r}")
        if t in ("int", "long"):
            bits = 32 if t == "int" else 64
            out += _zigzag(_java_int(n, bits), bits)
        else:  # only the width matters when the default is read back
            out += bytes(4 if t == "float" else 8)
    elif t == "boolean":
        if not isinstance(n, bool):
            raise AvroSchemaError(f"Non-boolean default for boolean: {n!r}")
        out.append(1 if n else 0)
    elif t == "null" and n is not None:
        raise AvroSchemaError(f"Non-null default value for null type: {n!r}")


def _write_bytes(out: bytearray, data: bytes) -> None:
    out += _zigzag(len(data), 32)
    out += data


def _json_fits(t: str, n: Json) -> bool:
    """``ResolvingGrammarGenerator.isCompatible``: which union branch a default is encoded with."""
    if t in ("record", "enum", "array", "map", "union"):
        return True
    if t in ("fixed", "string", "bytes"):
        return _is_text(n)
    if t in ("int", "long", "float", "double"):
        return _is_number(n)
    if t == "boolean":
        return isinstance(n, bool)
    return n is None


class _Reader:
    """Reads Avro binary back like ``GenericDatumReader`` over a ``BinaryDecoder`` (writer == reader)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise AvroSchemaError("EOFException while decoding a default value")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self, max_bytes: int) -> int:
        shift, z = 0, 0
        for _ in range(max_bytes):
            b = self.byte()
            z |= (b & 0x7F) << shift
            if b < 0x80:
                return (z >> 1) ^ -(z & 1)
            shift += 7
        raise AvroSchemaError("Invalid int encoding")

    def take(self, n: int) -> None:
        if n < 0:
            raise AvroSchemaError(f"Malformed data. Length is negative: {n}")
        if self.pos + n > len(self.data):
            raise AvroSchemaError("EOFException while decoding a default value")
        self.pos += n

    def block_count(self) -> int:
        count = self.varint(10)
        if count < 0:
            self.varint(10)  # a negative count is followed by the block's byte size
            count = -count
        if count > _MAX_BYTES_LENGTH:
            raise AvroSchemaError(f"Collection length {count} exceeds maximum allowed")
        return count

    def read(self, s: Schema) -> None:
        if isinstance(s, Record):
            for f in s.get_fields():
                self.read(f.schema)
        elif isinstance(s, Enum):
            i = self.varint(5)
            if not 0 <= i < len(s.symbols):
                raise AvroSchemaError(f"Enumeration out of range: {i}")
        elif isinstance(s, Array | Map):
            count = self.block_count()
            while count > 0:
                element = s.items if isinstance(s, Array) else s.values
                if isinstance(s, Map) or _width(element) != 0:
                    for _ in range(count):
                        if isinstance(s, Map):
                            self.take(self.varint(5))
                        self.read(element)
                count = self.block_count()
        elif isinstance(s, Union):
            i = self.varint(5)
            if not 0 <= i < len(s.types):
                raise AvroSchemaError(f"Union index out of range: {i}")
            self.read(s.types[i])
        elif isinstance(s, Fixed):
            self.take(s.size)
        elif s.type in ("string", "bytes"):
            self.take(self.varint(5))
        elif s.type == "int":
            self.varint(5)
        elif s.type == "long":
            self.varint(10)
        elif s.type == "float":
            self.take(4)
        elif s.type == "double":
            self.take(8)
        elif s.type == "boolean":
            self.take(1)


def _width(s: Schema, seen: frozenset[int] = frozenset()) -> int | None:
    """0 when a value of ``s`` always encodes to no bytes (null, empty records), else None."""
    if s.type == "null":
        return 0
    if isinstance(s, Fixed) and s.size == 0:
        return 0
    if isinstance(s, Record) and id(s) not in seen:
        inner = seen | {id(s)}
        return 0 if all(_width(f.schema, inner) == 0 for f in s.get_fields()) else None
    return None


def _check_default_value(f: Field) -> None:
    """``GenericData.getDefaultValue``: a null default of a null(-first) type is taken as is; any other
    default is encoded and decoded again, and whatever throws there makes resolution throw."""
    if f.default is None and (
        f.schema.type == "null" or (isinstance(f.schema, Union) and f.schema.types[0].type == "null")
    ):
        return
    out = bytearray()
    _encode(out, f.schema, f.default)
    _Reader(bytes(out)).read(f.schema)


# --- resolution (Resolver, ResolvingGrammarGenerator, Symbol.hasErrors) ----------------------------------

INCOMPATIBLE_SCHEMA_TYPES: Final = "incompatible_schema_types"
NAMES_DONT_MATCH: Final = "names_dont_match"
SIZES_DONT_MATCH: Final = "sizes_dont_match"
MISSING_REQUIRED_FIELD: Final = "missing_required_field"
NO_MATCHING_BRANCH: Final = "no_matching_branch"


class _Action:
    __slots__ = ("r", "w")

    def __init__(self, w: Schema, r: Schema | None) -> None:
        self.w = w
        self.r = r


class _Plain(_Action):
    """DoNothing, Promote, Skip and EnumAdjust: their grammar never holds an error symbol."""


class _Error(_Action):
    __slots__ = ("kind",)

    def __init__(self, w: Schema, r: Schema, kind: str) -> None:
        super().__init__(w, r)
        self.kind = kind


class _Container(_Action):
    __slots__ = ("element",)

    def __init__(self, w: Schema, r: Schema, element: _Action) -> None:
        super().__init__(w, r)
        self.element = element


class _Skip(_Plain):
    """A writer field the reader does not have: its value is skipped (``Resolver.Skip``)."""


class _RecordAdjust(_Action):
    __slots__ = ("defaults", "fields")

    def __init__(self, w: Schema, r: Schema) -> None:
        super().__init__(w, r)
        self.fields: list[tuple[str, _Action]] = []  # (field name, action) per writer field
        self.defaults: list[Field] = []  # reader fields filled from their defaults


class _WriterUnion(_Action):
    __slots__ = ("actions", "equivalent")

    def __init__(self, w: Union, r: Schema, equivalent: bool, actions: list[_Action]) -> None:
        super().__init__(w, r)
        self.equivalent = equivalent
        self.actions = actions


class _ReaderUnion(_Action):
    __slots__ = ("actual", "branch")

    def __init__(self, w: Schema, r: Union, branch: int, actual: _Action) -> None:
        super().__init__(w, r)
        self.branch = branch
        self.actual = actual


_PROMOTIONS: Final = {
    "long": ("int",),
    "float": ("int", "long"),
    "double": ("int", "long", "float"),
    "bytes": ("string",),
    "string": ("bytes",),
}
_BRANCH_PROMOTIONS: Final = {
    "int": ("long", "double", "float"),
    "long": ("double", "float"),
    "float": ("double",),
    "string": ("bytes",),
    "bytes": ("string",),
}

_Seen = dict[tuple[int, int], _Action]


def _resolve(w: Schema, r: Schema, seen: _Seen) -> _Action:
    if isinstance(w, Union):
        return _resolve_writer_union(w, r, seen)
    if w.type == r.type:
        if isinstance(w, Fixed) and isinstance(r, Fixed):
            if w.name.name != r.name.name:
                return _Error(w, r, NAMES_DONT_MATCH)
            return _Error(w, r, SIZES_DONT_MATCH) if w.size != r.size else _Plain(w, r)
        if isinstance(w, Array) and isinstance(r, Array):
            return _Container(w, r, _resolve(w.items, r.items, seen))
        if isinstance(w, Map) and isinstance(r, Map):
            return _Container(w, r, _resolve(w.values, r.values, seen))
        if isinstance(w, Enum) and isinstance(r, Enum):
            # Only the short names count; symbols the reader lacks fail when such a value is read.
            return _Error(w, r, NAMES_DONT_MATCH) if w.name.name != r.name.name else _Plain(w, r)
        if isinstance(w, Record) and isinstance(r, Record):
            return _resolve_record(w, r, seen)
        return _Plain(w, r)
    if isinstance(r, Union):
        return _resolve_reader_union(w, r, seen)
    if w.type in _PROMOTIONS.get(r.type, ()):
        return _Plain(w, r)
    return _Error(w, r, INCOMPATIBLE_SCHEMA_TYPES)


def _resolve_record(w: Record, r: Record, seen: _Seen) -> _Action:
    # Record names are not compared (Avro keeps its historical behaviour), only the fields.
    key = (id(w), id(r))
    cached = seen.get(key)
    if cached is not None:
        return cached
    result = _RecordAdjust(w, r)
    seen[key] = result  # before the fields: a recursive record resolves to this action
    for wf in w.get_fields():
        rf = r.field_map.get(wf.name)
        if rf is not None:
            result.fields.append((rf.name, _resolve(wf.schema, rf.schema, seen)))
        else:
            result.fields.append((wf.name, _Skip(wf.schema, None)))
    for rf in r.get_fields():
        if rf.name in w.field_map:
            continue
        if rf.default is MISSING:
            error = _Error(w, r, MISSING_REQUIRED_FIELD)
            seen[key] = error
            return error
        _check_default_value(rf)
        result.defaults.append(rf)
    return result


def _match_error(action: _Action) -> bool:
    """``ReaderUnion.hasMatchError``: the record action itself or one of its direct field actions failed."""
    if isinstance(action, _Error):
        return True
    assert isinstance(action, _RecordAdjust)
    return any(isinstance(a, _Error) for _, a in action.fields)


def _first_matching_branch(w: Schema, r: Union, seen: _Seen) -> int:
    structure_match = -1
    for j, b in enumerate(r.types):
        if w.type != b.type:
            continue
        if isinstance(w, Named) and isinstance(b, Named):
            if w.name.full == b.name.full:
                return j
            # A record branch matching by structure (resolved, and cached, even when not chosen): the
            # first one, or a later one with the same short name.
            if (
                isinstance(w, Record)
                and isinstance(b, Record)
                and not _match_error(_resolve_record(w, b, seen))
                and (structure_match < 0 or w.name.name == b.name.name)
            ):
                structure_match = j
        else:
            return j
    if structure_match >= 0:
        return structure_match
    for j, b in enumerate(r.types):
        if b.type in _BRANCH_PROMOTIONS.get(w.type, ()):
            return j
    return -1


def _resolve_reader_union(w: Schema, r: Union, seen: _Seen) -> _Action:
    i = _first_matching_branch(w, r, seen)
    if i < 0:
        return _Error(w, r, NO_MATCHING_BRANCH)
    return _ReaderUnion(w, r, i, _resolve(w, r.types[i], seen))


def _resolve_writer_union(w: Union, r: Schema, seen: _Seen) -> _Action:
    equivalent = _union_equiv(w, r, {})
    if equivalent:
        assert isinstance(r, Union)
        actions = [_resolve(wt, rt, seen) for wt, rt in zip(w.types, r.types, strict=True)]
    else:
        actions = [_resolve(wt, r, seen) for wt in w.types]
    return _WriterUnion(w, r, equivalent, actions)


def _union_equiv(w: Schema, r: Schema, seen: dict[tuple[int, int], bool]) -> bool:
    if w.type != r.type:
        return False
    if isinstance(w, Named) and isinstance(r, Named) and w.name.name != r.name.name:
        return False
    if isinstance(w, Array) and isinstance(r, Array):
        return _union_equiv(w.items, r.items, seen)
    if isinstance(w, Map) and isinstance(r, Map):
        return _union_equiv(w.values, r.values, seen)
    if isinstance(w, Fixed) and isinstance(r, Fixed):
        return w.size == r.size
    if isinstance(w, Enum) and isinstance(r, Enum):
        return w.symbols == r.symbols
    if isinstance(w, Union) and isinstance(r, Union):
        return len(w.types) == len(r.types) and all(
            _union_equiv(a, b, seen) for a, b in zip(w.types, r.types, strict=True)
        )
    if isinstance(w, Record) and isinstance(r, Record):
        key = (id(w), id(r))
        if key not in seen:
            seen[key] = True  # optimistic for recursive records
            wf, rf = w.get_fields(), r.get_fields()
            if len(wf) != len(rf):
                seen[key] = False
            else:
                for a, b in zip(wf, rf, strict=True):
                    if a.name != b.name or not _union_equiv(a.schema, b.schema, seen):
                        seen[key] = False
                        break
        return seen[key]
    return True


def _describe(s: Schema) -> str:
    return f"{s.type} {s.full_name}" if isinstance(s, Named) else s.type


def _error_texts(e: _Error, path: str) -> list[str]:
    w, r = e.w, e.r
    assert r is not None
    if e.kind == MISSING_REQUIRED_FIELD:
        assert isinstance(w, Record) and isinstance(r, Record)
        return [
            f"{e.kind} at {path}.{f.name}: the reader's field has no default and the writer has no such field"
            for f in r.get_fields()
            if f.name not in w.field_map and f.default is MISSING
        ]
    if e.kind == NAMES_DONT_MATCH:
        return [
            f"{e.kind} at {path}: writer {_describe(w)} is read as {_describe(r)} (names differ, no alias)"
        ]
    if e.kind == SIZES_DONT_MATCH:
        assert isinstance(w, Fixed) and isinstance(r, Fixed)
        return [f"{e.kind} at {path}: writer {_describe(w)} has size {w.size}, reader size {r.size}"]
    if e.kind == NO_MATCHING_BRANCH:
        return [f"{e.kind} at {path}: no branch of the reader's {r.full_name} reads writer {_describe(w)}"]
    return [f"{e.kind} at {path}: writer {_describe(w)} cannot be read as {_describe(r)}"]


def _errors(action: _Action, path: str, visited: set[int], out: list[str]) -> None:
    """The error symbols ``Symbol.hasErrors`` reaches in the grammar generated from ``action``."""
    if isinstance(action, _Error):
        out.extend(_error_texts(action, path))
    elif isinstance(action, _ReaderUnion):
        _errors(action.actual, path, visited, out)
    elif isinstance(action, _Container):
        _errors(action.element, path + ("[]" if action.w.type == "array" else "{}"), visited, out)
    elif isinstance(action, _WriterUnion):
        if action.equivalent:
            return  # the same union on both sides: the grammar is the reader's own, without resolution
        assert isinstance(action.w, Union)
        for branch, a in zip(action.w.types, action.actions, strict=True):
            _errors(a, f"{path}<{branch.full_name}>", visited, out)
    elif isinstance(action, _RecordAdjust):
        if id(action) in visited:
            return
        visited.add(id(action))
        for name, a in action.fields:
            _errors(a, f"{path}.{name}", visited, out)


def _grammar_overflows(root: _Action) -> bool:
    """Would building the resolving grammar overflow Java's stack? A record's grammar is a sequence that
    holds the sequences of its record-typed fields inline (a union, array or map puts its branches behind
    another symbol). ``Symbol.flattenedSize`` follows those inline sequences without a guard, so a record
    that reaches itself through record-typed fields only (a type no finite value has) makes it recurse
    forever. Unions, arrays and maps in the cycle stop it."""
    direct: dict[tuple[str, int], list[tuple[str, int]]] = {}
    pending: list[_Action | Schema] = [root]
    visited: set[int] = set()
    while pending:
        node = pending.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, _RecordAdjust):
            edges = direct.setdefault(("a", id(node)), [])
            for _, a in node.fields:
                pending.append(a.w if isinstance(a, _Skip) else a)
                if isinstance(a, _RecordAdjust):
                    edges.append(("a", id(a)))
            for f in node.defaults:
                pending.append(f.schema)
                if isinstance(f.schema, Record):
                    edges.append(("s", id(f.schema)))
        elif isinstance(node, _ReaderUnion):
            pending.append(node.actual)
        elif isinstance(node, _Container):
            pending.append(node.element)
        elif isinstance(node, _WriterUnion):
            if node.equivalent:
                assert node.r is not None
                pending.append(node.r)
            else:
                pending.extend(node.actions)
        elif isinstance(node, Record):
            edges = direct.setdefault(("s", id(node)), [])
            for f in node.get_fields():
                pending.append(f.schema)
                if isinstance(f.schema, Record):
                    edges.append(("s", id(f.schema)))
        elif isinstance(node, Schema):
            pending.extend(_children(node))
    state: dict[tuple[str, int], int] = {}  # 1 = on the current path, 2 = finished

    def cyclic(n: tuple[str, int]) -> bool:
        state[n] = 1
        for m in direct.get(n, []):
            if state.get(m) == 1 or (m not in state and cyclic(m)):
                return True
        state[n] = 2
        return False

    return any(n not in state and cyclic(n) for n in list(direct))


class ReadResult:
    """Whether ``reader`` reads data written with ``writer`` (``ok``) and, when not, why (``reasons``)."""

    __slots__ = ("ok", "reasons")

    def __init__(self, ok: bool, reasons: tuple[str, ...]) -> None:
        self.ok = ok
        self.reasons = reasons

    def __repr__(self) -> str:
        return f"ReadResult(ok={self.ok}, reasons={self.reasons})"


def _root_path(s: Schema) -> str:
    return s.name.name if isinstance(s, Named) else s.type


def can_read(writer: Schema, reader: Schema) -> ReadResult:
    """Avro's ``ValidateMutualRead.canRead(writer, reader)`` (docs §9.7): resolve the aliased writer
    against the reader and look for error symbols; an exception the Java calls throw (a default that
    cannot be encoded, a name the alias rewrite rejects, ...) is a failure too (``avro_error``)."""
    try:
        action = _resolve(_apply_aliases(writer, reader), reader, {})
    except AvroSchemaError as e:
        return ReadResult(False, (f"avro_error: {e}",))
    except RecursionError:
        return ReadResult(False, ("avro_error: StackOverflowError on a recursive default value",))
    if _grammar_overflows(action):
        return ReadResult(
            False, ("avro_error: StackOverflowError: a record contains itself through record fields",)
        )
    errors: list[str] = []
    _errors(action, _root_path(reader), set(), errors)
    return ReadResult(not errors, tuple(dict.fromkeys(errors)))
