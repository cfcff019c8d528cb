"""Random Avro schemas and schema histories for the schema-compatibility property tests (docs §9).

A history starts from a random record schema and evolves it the way users do and the way the broker's
rules are most sensitive to: fields added with and without defaults, removed, renamed (with or without an
alias), retyped (promotions int->long->float->double, string<->bytes, and breaking changes), made
nullable; enums gaining and losing symbols, getting a default, renamed with a short, a full or no alias;
records renamed, moved to another namespace, given aliases or docs; unions gaining and losing branches;
fixed sizes and names; array and map element types; properties, field order, and re-uploads of an earlier
version (verbatim or reformatted). A few schemas carry an invalid default, a name the parser rejects or a
redefined type, which the broker refuses. Everything is drawn from a ``random.Random`` so hypothesis can
replay and shrink the seed.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

Json = Any

PRIMITIVE_TYPES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
RECORD_NAMES = ["Event", "Order", "Item", "Inner", "R"]
ENUM_NAMES = ["Color", "Kind", "E", "F"]
FIXED_NAMES = ["Md5", "Fx", "Id"]
NAMESPACES = [None, "com.acme", "com.other", "a.b"]
FIELD_NAMES = ["a", "b", "c", "d", "id", "name", "value", "s", "x", "y"]
SYMBOLS = ["A", "B", "C", "D", "E", "RED", "BLUE"]
PROMOTIONS = {"int": "long", "long": "float", "float": "double", "string": "bytes", "bytes": "string"}


class _Gen:
    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.defined: dict[str, Json] = {}  # full name -> definition, while building one schema
        self.building: set[str] = set()  # records whose fields are being generated (a reference recurses)

    def chance(self, p: float) -> bool:
        return self.rnd.random() < p

    def full(self, name: str, space: str | None) -> str:
        return name if space is None else f"{space}.{name}"

    def fresh_name(self, pool: list[str], space: str | None) -> str:
        for _ in range(10):
            name = self.rnd.choice(pool)
            if self.full(name, space) not in self.defined:
                return name
        return f"{self.rnd.choice(pool)}{self.rnd.randrange(1000)}"

    def type_(self, depth: int, space: str | None) -> Json:
        kinds = ["prim"] * 6 + (
            ["record", "enum", "fixed", "array", "map", "union", "ref"] if depth < 3 else []
        )
        kind = self.rnd.choice(kinds)
        if kind == "prim":
            prim = self.rnd.choice(PRIMITIVE_TYPES[1:])
            return {"type": prim, "logicalType": "uuid"} if prim == "string" and self.chance(0.05) else prim
        if kind == "record":
            return self.record(depth + 1, space if self.chance(0.7) else self.rnd.choice(NAMESPACES))
        if kind == "enum":
            return self.enum(space if self.chance(0.7) else self.rnd.choice(NAMESPACES))
        if kind == "fixed":
            name = self.fresh_name(FIXED_NAMES, space)
            fixed = {"type": "fixed", "name": name, "size": self.rnd.choice([0, 4, 16])}
            self.defined[self.full(name, space)] = fixed
            return fixed
        if kind == "array":
            return {"type": "array", "items": self.type_(depth + 1, space)}
        if kind == "map":
            return {"type": "map", "values": self.type_(depth + 1, space)}
        if kind == "ref" and self.defined:
            done = sorted(set(self.defined) - self.building)
            # Mostly references to finished types; sometimes a recursive one (a record inside itself).
            full = self.rnd.choice(done if done and self.chance(0.85) else sorted(self.defined))
            short = full.rsplit(".", 1)[-1]
            ns = full.rsplit(".", 1)[0] if "." in full else None
            return short if ns == space and self.chance(0.5) else full
        return self.union(depth + 1, space)

    def union(self, depth: int, space: str | None) -> Json:
        branches: list[Json] = ["null"] if self.chance(0.6) else []
        used = {"null"} if branches else set()
        for _ in range(self.rnd.randint(1, 3)):
            t = self.type_(depth + 1, space)
            key = _branch_key(t, space)
            if key not in used and not isinstance(t, list):
                branches.append(t)
                used.add(key)
        return branches if branches else ["null", "string"]

    def enum(self, space: str | None) -> Json:
        name = self.fresh_name(ENUM_NAMES, space)
        symbols = self.rnd.sample(SYMBOLS, self.rnd.randint(1, 4))
        enum: dict[str, Json] = {"type": "enum", "name": name, "symbols": symbols}
        if space is not None and self.chance(0.2):
            enum["namespace"] = space
        if self.chance(0.3):
            enum["default"] = self.rnd.choice(symbols)
        self.defined[self.full(name, space)] = enum
        return enum

    def record(self, depth: int, space: str | None, name: str | None = None) -> Json:
        name = name or self.fresh_name(RECORD_NAMES, space)
        record: dict[str, Json] = {"type": "record", "name": name}
        if space is not None:
            record["namespace"] = space
        full = self.full(name, space)
        self.defined[full] = record
        self.building.add(full)
        fields = []
        for fname in self.rnd.sample(FIELD_NAMES, self.rnd.randint(1, 4 if depth < 2 else 2)):
            fields.append(self.field(fname, depth, space))
        record["fields"] = fields
        self.building.discard(full)
        return record

    def field(self, name: str, depth: int, space: str | None) -> Json:
        t = self.type_(depth, space)
        field: dict[str, Json] = {"name": name, "type": t}
        if self.chance(0.45):
            value = self.default_for(t, space)
            if value is not _NO_VALUE:
                field["default"] = value
        elif self.chance(0.03):
            field["default"] = self.rnd.choice([None, 1, "x", [], {}])  # possibly invalid
        if self.chance(0.05):
            field["doc"] = "documented"
        if self.chance(0.04):
            field["order"] = self.rnd.choice(["descending", "ignore"])
        return field

    def resolve(self, t: Json, space: str | None) -> tuple[Json, str | None]:
        """A referenced named type's definition (by short or full name), and its namespace."""
        if isinstance(t, str) and t not in PRIMITIVE_TYPES:
            full = t if "." in t else self.full(t, space)
            found = self.defined.get(full) or self.defined.get(t)
            if found is not None:
                ns = found.get("namespace") or (full.rsplit(".", 1)[0] if "." in full else None)
                return found, ns
        return t, space

    def default_for(self, t: Json, space: str | None, depth: int = 0) -> Json:
        t, space = self.resolve(t, space)
        if depth > 3:
            return _NO_VALUE
        if isinstance(t, list):
            if not t:
                return _NO_VALUE
            branch = t[0] if self.chance(0.8) else self.rnd.choice(t)
            return self.default_for(branch, space, depth + 1)
        if isinstance(t, dict):
            kind = t["type"]
            if kind == "record":
                ns = t.get("namespace", space)
                value = {}
                for f in t.get("fields", []):
                    if "default" in f and self.chance(0.5):
                        continue
                    v = self.default_for(f["type"], ns, depth + 1)
                    if v is _NO_VALUE:
                        return _NO_VALUE
                    value[f["name"]] = v
                return value
            if kind == "enum":
                return self.rnd.choice(t["symbols"])
            if kind == "fixed":
                return "\u0001" * t["size"] if self.chance(0.8) else "ab"
            if kind == "array":
                v = self.default_for(t["items"], space, depth + 1)
                return [] if v is _NO_VALUE or self.chance(0.5) else [v]
            if kind == "map":
                v = self.default_for(t["values"], space, depth + 1)
                return {} if v is _NO_VALUE or self.chance(0.5) else {"k": v}
            t = kind
        return {
            "null": None,
            "boolean": self.chance(0.5),
            "int": self.rnd.choice([0, -1, 7]),
            "long": self.rnd.choice([0, 2**40]),
            "float": self.rnd.choice([0.5, 1, "NaN"]),
            "double": self.rnd.choice([0.25, -3, "Infinity"]),
            "bytes": "\u00ff",
            "string": self.rnd.choice(["", "x"]),
        }.get(t, _NO_VALUE)


class _NoValue:
    pass


_NO_VALUE = _NoValue()


def _branch_key(t: Json, space: str | None) -> str:
    if isinstance(t, str):
        return t if t in PRIMITIVE_TYPES or "." in t else f"{space}.{t}"
    if isinstance(t, dict):
        if t["type"] in ("record", "enum", "fixed"):
            ns = t.get("namespace", space)
            return t["name"] if ns is None else f"{ns}.{t['name']}"
        return str(t["type"])
    return "union"


def random_schema(rnd: random.Random) -> Json:
    """A random top-level record schema (JSON)."""
    gen = _Gen(rnd)
    return gen.record(0, rnd.choice(NAMESPACES), rnd.choice(RECORD_NAMES))


# --- evolution -------------------------------------------------------------------------------------------


def _records(node: Json, space: str | None, out: list[tuple[dict[str, Json], str | None]]) -> None:
    """Every record definition inside ``node`` with the namespace it lives in."""
    if isinstance(node, list):
        for t in node:
            _records(t, space, out)
    elif isinstance(node, dict):
        kind = node.get("type")
        if kind == "record":
            ns = node.get("namespace", space)
            out.append((node, ns))
            for f in node.get("fields", []):
                _records(f.get("type"), ns, out)
        elif kind == "array":
            _records(node.get("items"), space, out)
        elif kind == "map":
            _records(node.get("values"), space, out)


def _named(node: Json, kind: str, out: list[dict[str, Json]]) -> None:
    if isinstance(node, list):
        for t in node:
            _named(t, kind, out)
    elif isinstance(node, dict):
        if node.get("type") == kind:
            out.append(node)
        for key in ("items", "values"):
            if key in node:
                _named(node[key], kind, out)
        for f in node.get("fields", []) if node.get("type") == "record" else []:
            _named(f.get("type"), kind, out)


def mutate(rnd: random.Random, schema: Json) -> Json:
    """One random evolution step of ``schema`` (a new JSON value; the input is not changed)."""
    s = copy.deepcopy(schema)
    gen = _Gen(rnd)
    records: list[tuple[dict[str, Json], str | None]] = []
    _records(s, None, records)
    for r, ns in records:
        gen.defined[gen.full(r["name"], ns)] = r
    enums: list[dict[str, Json]] = []
    _named(s, "enum", enums)
    fixeds: list[dict[str, Json]] = []
    _named(s, "fixed", fixeds)
    record, space = rnd.choice(records)
    fields: list[dict[str, Json]] = record["fields"]
    op = rnd.choice(OPS)
    if op == "add_field":
        free = [n for n in FIELD_NAMES if n not in {f["name"] for f in fields}]
        if free:
            fields.insert(rnd.randint(0, len(fields)), gen.field(rnd.choice(free), 2, space))
    elif op == "remove_field" and len(fields) > 1:
        fields.pop(rnd.randrange(len(fields)))
    elif op == "rename_field" and fields:
        f = rnd.choice(fields)
        free = [n for n in FIELD_NAMES if n not in {x["name"] for x in fields}]
        if free:
            old, f["name"] = f["name"], rnd.choice(free)
            if rnd.random() < 0.6:
                f["aliases"] = [old]
    elif op == "promote" and fields:
        f = rnd.choice(fields)
        if isinstance(f["type"], str) and f["type"] in PROMOTIONS:
            f["type"] = PROMOTIONS[f["type"]] if rnd.random() < 0.8 else rnd.choice(PRIMITIVE_TYPES[1:])
            f.pop("default", None) if rnd.random() < 0.8 else None
        else:
            f["type"] = gen.type_(2, space)
            f.pop("default", None)
    elif op == "nullable" and fields:
        f = rnd.choice(fields)
        t = f["type"]
        if isinstance(t, list) and "null" in t and len(t) == 2:
            f["type"] = next(x for x in t if x != "null")
            f.pop("default", None)
        elif not isinstance(t, list) and t != "null":
            f["type"] = ["null", t] if rnd.random() < 0.8 else [t, "null"]
            if rnd.random() < 0.7:
                f["default"] = None
    elif op == "union_branch" and fields:
        f = rnd.choice(fields)
        t = f["type"]
        if isinstance(t, list) and len(t) > 1 and rnd.random() < 0.5:
            t.pop(rnd.randrange(len(t)))
        elif isinstance(t, list):
            extra = gen.type_(2, space)
            if not isinstance(extra, list) and _branch_key(extra, space) not in {
                _branch_key(x, space) for x in t
            }:
                t.insert(rnd.randint(0, len(t)), extra)
    elif op == "enum_symbols" and enums:
        e = rnd.choice(enums)
        syms = e["symbols"]
        choice = rnd.random()
        if choice < 0.35 and len(syms) > 1:
            gone = syms.pop(rnd.randrange(len(syms)))
            if e.get("default") == gone:
                e["default"] = syms[0]
        elif choice < 0.7:
            free = [x for x in SYMBOLS if x not in syms]
            if free:
                syms.insert(rnd.randint(0, len(syms)), rnd.choice(free))
        elif choice < 0.85:
            rnd.shuffle(syms)
        elif "default" in e:
            del e["default"]
        else:
            e["default"] = rnd.choice(syms)
    elif op == "rename_named":
        targets: list[dict[str, Json]] = [r for r, _ in records] + enums + fixeds
        t = rnd.choice(targets)
        pool = {"record": RECORD_NAMES, "enum": ENUM_NAMES, "fixed": FIXED_NAMES}[t["type"]]
        old = t["name"]
        old_ns = t.get("namespace")
        t["name"] = rnd.choice([n for n in pool if n != old] or [old + "2"])
        how = rnd.random()
        if how < 0.35:
            t["aliases"] = [old]  # a short alias: relative to the (new) namespace
        elif how < 0.55:
            t["aliases"] = [old if old_ns is None else f"{old_ns}.{old}"]
    elif op == "namespace":
        targets = [r for r, _ in records] + enums + fixeds
        t = rnd.choice(targets)
        ns = rnd.choice(NAMESPACES)
        if ns is None:
            t.pop("namespace", None)
        else:
            t["namespace"] = ns
    elif op == "doc_alias":
        targets = [r for r, _ in records] + enums + fixeds
        t = rnd.choice(targets)
        if rnd.random() < 0.5:
            t["doc"] = rnd.choice(["now documented", "v2", ""])
        else:
            t["aliases"] = [rnd.choice(RECORD_NAMES + ENUM_NAMES)]
        if fields and rnd.random() < 0.3:
            rnd.choice(fields)["aliases"] = [rnd.choice(FIELD_NAMES)]
    elif op == "fixed" and fixeds:
        x = rnd.choice(fixeds)
        x["size"] = rnd.choice([0, 4, 8, 16])
    elif op == "default" and fields:
        f = rnd.choice(fields)
        if "default" in f and rnd.random() < 0.5:
            del f["default"]
        else:
            value = gen.default_for(f["type"], space)
            if not isinstance(value, _NoValue):
                f["default"] = value
    elif op == "props" and fields:
        f = rnd.choice(fields)
        if rnd.random() < 0.5:
            f["order"] = rnd.choice(["ascending", "descending", "ignore"])
        else:
            record["prop"] = rnd.choice([1, "x", [1], 1.0])
    elif op == "retype_named" and fields:
        f = rnd.choice(fields)
        f["type"] = gen.type_(1, space)
        f.pop("default", None)
    return s


OPS = [
    "add_field",
    "add_field",
    "remove_field",
    "rename_field",
    "promote",
    "promote",
    "nullable",
    "union_branch",
    "enum_symbols",
    "enum_symbols",
    "rename_named",
    "namespace",
    "doc_alias",
    "fixed",
    "default",
    "props",
    "retype_named",
]


def render(rnd: random.Random, schema: Json) -> str:
    """The schema as text, sometimes pretty-printed or with its keys in another order."""
    if rnd.random() < 0.2:
        return json.dumps(_shuffled(rnd, schema), indent=rnd.choice([None, 2]))
    return json.dumps(schema, separators=(",", ":"))


def _shuffled(rnd: random.Random, node: Json) -> Json:
    if isinstance(node, dict):
        keys = list(node)
        rnd.shuffle(keys)
        return {k: _shuffled(rnd, node[k]) for k in keys}
    if isinstance(node, list):
        return [_shuffled(rnd, x) for x in node]
    return node


def random_history(rnd: random.Random, max_versions: int = 5) -> list[str | None]:
    """Schema texts oldest first; None is a deletion marker. Some versions re-upload an earlier one."""
    current = random_schema(rnd)
    texts: list[str | None] = [render(rnd, current)]
    versions: list[Json] = [current]
    for _ in range(rnd.randint(1, max_versions - 1)):
        roll = rnd.random()
        if roll < 0.06:
            texts.append(None)
            continue
        if roll < 0.16:
            current = copy.deepcopy(rnd.choice(versions))
        else:
            for _ in range(rnd.choice([1, 1, 2])):
                current = mutate(rnd, current)
        versions.append(current)
        texts.append(render(rnd, current))
    return texts
