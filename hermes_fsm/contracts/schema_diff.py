"""Classify changes between two JSON Schemas as breaking, widening or cosmetic.

A change is *breaking* (major bump) when some instance valid under the old schema may
be invalid under the new one; *widening* (minor) when it only relaxes constraints;
*cosmetic* (patch) when only annotations (``title``, ``description``, ``examples``,
``default``, ...) change.  When it is unclear whether a change narrows (a changed
``pattern``, an unsupported keyword such as ``not`` or ``if``), it counts as breaking.

Paths are JSON Pointers (RFC 6901) into the schema as if every local ``$ref`` were
inlined, e.g. ``/properties/tool_calls/items/properties/tool_name/maxLength``; the
root is ``""``.  Union branches are addressed by index (``/properties/note/anyOf/1``):
a removed branch by its old index, everything else by its new one.  Requiredness
changes point at the property (``/properties/name``).

Judgement calls: adding an optional property is a widening even when the old object
had no ``additionalProperties`` (strictly, an old instance could carry that key with
another type), unless the old ``additionalProperties`` was a schema the new property
narrows.  ``anyOf`` and ``oneOf`` are both treated as "any branch".  Keywords not
modelled here (``not``, ``if``/``then``, ``patternProperties``, ...) are compared
verbatim and any difference counts as breaking.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import unquote

Bump = Literal["major", "minor", "patch"]
_RANK = {"none": 0, "patch": 1, "minor": 2, "major": 3}
_ANNOTATIONS = frozenset({
    "title", "description", "examples", "default", "$comment", "deprecated", "readOnly",
    "writeOnly", "discriminator", "$schema", "$id", "contentMediaType", "contentEncoding"})
_HANDLED = frozenset({
    "type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minLength", "maxLength", "minItems", "maxItems", "minProperties",
    "maxProperties", "uniqueItems", "pattern", "format", "properties", "required",
    "additionalProperties", "items", "prefixItems", "allOf", "$ref", "$defs", "definitions"})
_LIMITS = (("minimum", "exclusiveMinimum", False), ("maximum", "exclusiveMaximum", True),
           ("minLength", None, False), ("maxLength", None, True), ("minItems", None, False),
           ("maxItems", None, True), ("minProperties", None, False),
           ("maxProperties", None, True))
_FLAGS = {"pattern": "pattern", "format": "format", "multipleOf": "multiple_of",
          "uniqueItems": "unique_items"}
_MISSING = object()
_ANYTHING: Mapping[str, Any] = MappingProxyType({})  # shared: its id is a stable cycle key
_Union = tuple[str | None, list[Any], dict[str, Any]]  # keyword, branches, other keywords
_VERSION = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")


@dataclass(frozen=True)
class SchemaChange:
    """One difference between two schemas and the version bump it needs."""

    path: str  # JSON Pointer into the ref-inlined schema; "" is the root
    kind: str  # machine name, e.g. "property_removed", "bound_tightened"
    breaking: bool  # True exactly when bump == "major"
    detail: str  # human sentence: what changed, old -> new
    bump: Bump


def _change(bump: Bump, path: str, kind: str, detail: str) -> SchemaChange:
    return SchemaChange(path=path, kind=kind, breaking=bump == "major", detail=detail, bump=bump)


def _show(value: Any) -> str:
    text = "absent" if value is _MISSING else json.dumps(value, sort_keys=True, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


def _canon(value: Any) -> str:
    """A key under which JSON-equal values are equal (1 == 1.0, but true != 1)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value, sort_keys=True, default=repr)


def _join(path: str, *parts: str | int) -> str:
    for part in parts:
        path += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return path


def _types(schema: Any) -> frozenset[str] | None:
    """The JSON types a schema allows ("number" includes "integer"), None if unrestricted."""
    value = schema.get("type") if isinstance(schema, Mapping) else None
    if value is None:
        return None
    types = frozenset([value] if isinstance(value, str) else value)
    if types >= _EVERY_TYPE:  # every JSON type listed: as unrestricted as no type at all
        return None
    return types | {"integer"} if "number" in types else types


_EVERY_TYPE = frozenset(["string", "number", "boolean", "object", "array", "null"])


def _limit(schema: Mapping[str, Any], word: str, exclusive: str | None,
           upper: bool) -> tuple[Any, bool, str] | None:
    """The tightest bound as (value, exclusive, keyword); understands draft-4 booleans."""
    found = []
    flag = schema.get(exclusive) if exclusive else None
    if word in schema:
        found.append((schema[word], flag is True, word))
    if exclusive and flag is not None and not isinstance(flag, bool):
        found.append((flag, True, exclusive))
    if upper:  # smaller (or equal but exclusive) is tighter
        return min(found, key=lambda b: (b[0], not b[1]), default=None)
    return max(found, key=lambda b: (b[0], b[1]), default=None)


def _compare_limit(old: tuple[Any, bool, str] | None, new: tuple[Any, bool, str] | None,
                   upper: bool, path: str) -> list[SchemaChange]:
    if old is None or new is None:
        if old is new:
            return []
        bound = new or old
        assert bound is not None
        value, _, word = bound
        verb = "added" if new else "removed"
        return [_change("major" if new else "minor", _join(path, word), f"bound_{verb}",
                        f"{word} {_show(value)} {verb}")]
    sign = -1 if upper else 1
    before, after = (sign * old[0], old[1]), (sign * new[0], new[1])
    if before == after:
        return []
    shown = f"{old[2]} {_show(old[0])} -> {'' if old[2] == new[2] else new[2] + ' '}" \
            f"{_show(new[0])}"
    if after > before:
        return [_change("major", _join(path, new[2]), "bound_tightened", shown)]
    return [_change("minor", _join(path, new[2]), "bound_loosened", shown)]


def _values(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The allowed values by canonical key (enum and const intersected), None if any."""
    values = {_canon(v): v for v in schema["enum"]} if "enum" in schema else None
    if "const" in schema:
        key = _canon(schema["const"])
        values = {key: schema["const"]} if values is None or key in values else {}
    return values


class _Differ:
    def __init__(self, old_root: Mapping[str, Any], new_root: Mapping[str, Any]) -> None:
        self.roots = (old_root, new_root)
        self.active: dict[tuple[int, int], int] = {}  # pairs being compared -> stack depth
        self.cut = 0  # shallowest active pair that a recursive reference fell back on
        self.memo: dict[tuple[int, int, bool], tuple[str, list[SchemaChange]]] = {}
        # id(change) -> (pair, path below it, kind, detail): the same change reached again
        # through a shared definition is reported once; ``alive`` keeps those ids unique
        self.origin: dict[int, tuple[object, ...]] = {}
        self.alive: list[SchemaChange] = []

    def resolve(self, node: Any, side: int, path: str) -> tuple[Any, int]:
        """Follow local $refs and single-entry allOf; return (schema, identity key).

        The key is the id of ``node`` (always part of the schema tree), or for a bare
        ``{"$ref": ...}`` the id of its target, so that meeting the same definition
        again, even through "#", yields the same key.
        """
        node = _ANYTHING if node is True else node
        key, seen = id(node), list[str]()
        bare = isinstance(node, Mapping) and node.keys() - {"$defs", "definitions"} == {"$ref"}
        while isinstance(node, Mapping):
            rest = {k: v for k, v in node.items() if k != "$ref"}
            if "$ref" in node:
                ref = node["$ref"]
                if not isinstance(ref, str) or not ref.startswith("#"):
                    raise ValueError(f"unsupported $ref {ref!r} at {path or '/'}: "
                                     "only local references ('#/...') are supported")
                if ref in seen:
                    raise ValueError(f"$ref cycle {' -> '.join([*seen, ref])} at {path or '/'}")
                seen.append(ref)
                target: Any = self.roots[side]
                for part in ref[1:].split("/")[1:]:
                    part = unquote(part).replace("~1", "/").replace("~0", "~")
                    try:
                        target = target[int(part) if isinstance(target, list) else part]
                    except (KeyError, IndexError, ValueError, TypeError):
                        raise ValueError(f"unresolvable $ref {ref!r} at {path or '/'}") from None
                key = id(target) if bare and len(seen) == 1 else key
            elif isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1:
                target = rest.pop("allOf")[0]
            else:
                break
            node = (rest if target else False) if isinstance(target, bool) else {**target, **rest}
        return node, key

    def compare(self, old: Any, new: Any, path: str, notes: bool = True) -> list[SchemaChange]:
        """Changes from ``old`` to ``new``; ``notes=False`` skips top-level annotations."""
        raw = (old, new)
        old, old_key = self.resolve(old, 0, path)
        new, new_key = self.resolve(new, 1, path)
        for side, node in (("old", old), ("new", new)):
            if not isinstance(node, Mapping) and node is not False:
                raise ValueError(f"{side} schema at {path or '/'} must be an object or a "
                                 f"boolean, got {type(node).__name__}")
        if old is False or new is False:
            if old is new:
                return []
            if new is False:
                return [_change("major", path, "schema_forbidden", "now rejects every value")]
            return [_change("minor", path, "schema_allowed", "no longer rejects every value")]
        pair = (old_key, new_key)
        if pair in self.active:  # recursive reference already being compared: assume fine
            self.cut = min(self.cut, self.active[pair])
            return []
        if (hit := self.memo.get((*pair, notes))) is not None:
            copies = [replace(c, path=path + c.path[len(hit[0]):]) for c in hit[1]]
            for copy, c in zip(copies, hit[1], strict=True):
                self.origin[id(copy)] = self.origin[id(c)]
            self.alive += copies
            return copies
        depth = self.active[pair] = len(self.active)
        outer_cut, self.cut = self.cut, depth
        try:
            if {"anyOf", "oneOf"} & (old.keys() | new.keys()):
                result = self.compare_union(_split(old, raw[0]), _split(new, raw[1]), path, notes)
            else:
                result = self.compare_keywords(old, new, path, notes)
        finally:
            del self.active[pair]
        if self.cut >= depth:  # memoize unless it assumed something about an enclosing pair
            self.memo[(*pair, notes)] = (path, result)
            for c in result:
                self.origin.setdefault(id(c), (pair, c.path[len(path):], c.kind, c.detail))
        self.cut = min(outer_cut, self.cut)
        return result

    def overlap(self, old: Any, new: Any, path: str) -> bool:
        """Whether two schemas share a JSON type (or either allows every type)."""
        old_types = _types(self.resolve(old, 0, path)[0])
        new_types = _types(self.resolve(new, 1, path)[0])
        return old_types is None or new_types is None or bool(old_types & new_types)

    def compare_union(self, old: _Union, new: _Union, path: str,
                      notes: bool) -> list[SchemaChange]:
        """Pair each old branch with a new branch that accepts it, else report it removed.

        The partner (same ``$ref``, else the same index if that holds an overlapping type
        and is not another old branch's ``$ref``) is tried first; if it is not a
        widening, the smallest widening among all new branches wins, and failing that
        the partner's own changes are reported.
        """
        (old_word, old_branches, old_rest), (new_word, new_branches, new_rest) = old, new
        changes = self.compare_keywords(old_rest, new_rest, path, notes)
        matched: set[int] = set()
        old_refs = {_ref(branch) for branch in old_branches} - {None}
        for i, branch in enumerate(old_branches):
            def trial(j: int, branch: Any = branch) -> list[SchemaChange]:
                where = _join(path, new_word, j) if new_word else path
                return self.compare(branch, new_branches[j], where, bool(old_word and new_word))

            ref, size = _ref(branch), len(new_branches)
            partner = min((j for j in range(size) if ref and _ref(new_branches[j]) == ref),
                          key=lambda j: (j in matched, j != i), default=None)
            if partner is None and i < size and _ref(new_branches[i]) not in old_refs and \
                    self.overlap(branch, new_branches[i], path):
                partner = i  # same position, not another old member: likely the same branch
            found = {partner: trial(partner)} if partner is not None else {}
            choice = partner
            if partner is None or any(c.breaking for c in found[partner]):
                found.update({j: trial(j) for j in range(size) if j not in found})
                fine = [j for j, got in found.items() if not any(c.breaking for c in got)]
                choice = min(fine, key=lambda j: (len(found[j]), j in matched, j), default=partner)
            if choice is None:
                changes.append(_change("major", _join(path, old_word, i) if old_word else path,
                                       "branch_removed", f"branch {_show(branch)} no longer "
                                       "accepted"))
            else:
                changes += found[choice]
                matched.add(choice)
        changes += [_change("minor", _join(path, new_word, j) if new_word else path,
                            "branch_added", f"branch {_show(branch)} now accepted")
                    for j, branch in enumerate(new_branches) if j not in matched]
        return changes

    def compare_keywords(self, old: Mapping[str, Any], new: Mapping[str, Any], path: str,
                         notes: bool = True) -> list[SchemaChange]:
        changes: list[SchemaChange] = []
        for word in sorted(old.keys() | new.keys()):
            before, after = old.get(word, _MISSING), new.get(word, _MISSING)
            if word in _HANDLED or _canon(before) == _canon(after):
                continue
            shown = f"{word} {_show(before)} -> {_show(after)}"
            if word not in _ANNOTATIONS:
                changes.append(_change("major", _join(path, word), "keyword_changed",
                                       f"unsupported keyword {shown} (assumed breaking)"))
            elif notes:
                changes.append(_change("patch", _join(path, word),
                                       word.lstrip("$") + "_changed", shown))
        changes += self.compare_type(old, new, path) + self.compare_values(old, new, path)
        for word, exclusive, upper in _LIMITS:
            changes += _compare_limit(_limit(old, word, exclusive, upper),
                                      _limit(new, word, exclusive, upper), upper, path)
        for word, name in _FLAGS.items():
            before, after = old.get(word, _MISSING), new.get(word, _MISSING)
            if (before in (_MISSING, None, False) and after in (_MISSING, None, False)) or \
                    before == after:
                continue
            where, shown = _join(path, word), f"{word} {_show(before)} -> {_show(after)}"
            if after in (_MISSING, None, False):
                changes.append(_change("minor", where, f"{name}_removed", shown))
            elif before in (_MISSING, None, False):
                changes.append(_change("major", where, f"{name}_added", shown))
            elif word == "multipleOf" and Fraction(str(before)) % Fraction(str(after)) == 0:
                changes.append(_change("minor", where, f"{name}_loosened", shown))
            else:
                changes.append(_change("major", where, f"{name}_changed", shown))
        if {"properties", "required", "additionalProperties"} & (old.keys() | new.keys()):
            changes += self.compare_object(old, new, path)
        for word in ("prefixItems", "allOf"):  # positional; a missing entry accepts anything
            old_list, new_list = old.get(word, []), new.get(word, [])
            fill_old = old.get("items", True) if word == "prefixItems" else True
            fill_new = new.get("items", True) if word == "prefixItems" else True
            for i in range(max(len(old_list), len(new_list))):
                changes += self.compare(old_list[i] if i < len(old_list) else fill_old,
                                        new_list[i] if i < len(new_list) else fill_new,
                                        _join(path, word, i))
        if isinstance(old.get("items"), list) or isinstance(new.get("items"), list):
            if _canon(old.get("items")) != _canon(new.get("items")):  # draft-4 tuple form
                changes.append(_change("major", _join(path, "items"), "keyword_changed",
                                       "tuple-form items changed (assumed breaking)"))
        elif "items" in old or "items" in new:
            changes += self.compare(old.get("items", True), new.get("items", True),
                                    _join(path, "items"))
        return changes

    def compare_type(self, old: Mapping[str, Any], new: Mapping[str, Any],
                     path: str) -> list[SchemaChange]:
        before, after = _types(old), _types(new)
        if before == after:
            return []
        where = _join(path, "type")
        shown = f"type {_show(old.get('type', _MISSING))} -> {_show(new.get('type', _MISSING))}"
        lost = before is None or bool(after is not None and before - after)
        gained = after is None or bool(before is not None and after - before)
        if lost:
            return [_change("major", where, "type_changed" if gained else "type_narrowed", shown)]
        return [_change("minor", where, "type_widened", shown)]

    def compare_values(self, old: Mapping[str, Any], new: Mapping[str, Any],
                       path: str) -> list[SchemaChange]:
        before, after = _values(old), _values(new)
        if (before is None and after is None) or (
                before is not None and after is not None and before.keys() == after.keys()):
            return []
        word = "const" if "const" in new or ("enum" not in new and "const" in old) else "enum"
        where = _join(path, word)
        if before is None:
            return [_change("major", where, f"{word}_added", f"{word} {_show(new[word])} added")]
        if after is None:
            return [_change("minor", where, f"{word}_removed",
                            f"{word} {_show(old[word])} removed")]
        lost = [before[k] for k in before if k not in after]
        gained = [after[k] for k in after if k not in before]
        if not lost:
            return [_change("minor", where, "enum_widened", f"values added: {_show(gained)}")]
        kind = "const_changed" if "const" in old and "const" in new else "enum_narrowed"
        return [_change("major", where, kind, f"values removed: {_show(lost)}"
                        + (f", added: {_show(gained)}" if gained else ""))]

    def compare_object(self, old: Mapping[str, Any], new: Mapping[str, Any],
                       path: str) -> list[SchemaChange]:
        changes: list[SchemaChange] = []
        old_props, new_props = old.get("properties", {}), new.get("properties", {})
        old_req, new_req = set(old.get("required", [])), set(new.get("required", []))
        old_extra = old.get("additionalProperties", True)
        new_extra = new.get("additionalProperties", True)
        added = new_props.keys() - old_props.keys()
        for name in old_props:
            here = _join(path, "properties", name)
            if name in new_props:
                changes += self.compare(old_props[name], new_props[name], here)
                continue
            bump: Bump
            if new_extra is False:
                bump, why = "major", "while additionalProperties is false"
            elif any(c.breaking for c in self.compare(old_props[name], new_extra, here)):
                bump, why = "major", "and additionalProperties rejects some old values"
            else:
                bump, why = "minor", "(still allowed as an additional property)"
            changes.append(_change(bump, here, "property_removed",
                                   f"property '{name}' removed {why}"))
        for name in sorted(added):
            here = _join(path, "properties", name)
            if name in new_req - old_req:
                changes.append(_change("major", here, "required_property_added",
                                       f"new required property '{name}'"))
            elif isinstance(old_extra, Mapping) and any(
                    c.breaking for c in self.compare(old_extra, new_props[name], here)):
                changes.append(_change("major", here, "property_added", f"property '{name}' "
                                       "added, narrower than the old additionalProperties"))
            else:
                changes.append(_change("minor", here, "property_added",
                                       f"optional property '{name}' added"))
        changes += [_change("major", _join(path, "properties", name), "required_added",
                            f"property '{name}' is now required")
                    for name in sorted(new_req - old_req - added)]
        changes += [_change("minor", _join(path, "properties", name), "required_removed",
                            f"property '{name}' is no longer required")
                    for name in sorted(old_req - new_req)]
        here, shown = _join(path, "additionalProperties"), \
            f"additionalProperties {_show(old_extra)} -> {_show(new_extra)}"
        if new_extra is False and old_extra is not False:
            changes.append(_change("major", here, "additional_properties_forbidden", shown))
        elif old_extra is False and new_extra is not False:
            changes.append(_change("minor", here, "additional_properties_allowed", shown))
        elif old_extra is not False:
            changes += self.compare(old_extra, new_extra, here)
        return changes


def _split(node: Mapping[str, Any], raw: Any) -> _Union:
    """(union keyword, branches, other keywords); a plain schema is its own single branch
    (kept unresolved, so a ``$ref`` can be paired with the same ``$ref``)."""
    word = "anyOf" if "anyOf" in node else "oneOf" if "oneOf" in node else None
    if word is None:
        return None, [raw], {k: v for k, v in node.items() if k in _ANNOTATIONS}
    if not isinstance(node[word], list):
        raise ValueError(f"{word} must be a list, got {type(node[word]).__name__}")
    return word, list(node[word]), {k: v for k, v in node.items() if k != word}


def _ref(node: Any) -> Any:
    return node.get("$ref") if isinstance(node, Mapping) else None


def diff_schemas(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[SchemaChange]:
    """List every change from ``old`` to ``new``, each classified major/minor/patch.

    Local ``$ref``s ("#/$defs/Name", "#/definitions/Name", "#") are resolved against
    each schema's own root; a recursive reference is compared once, and a change inside
    a definition used in several places is reported once, where first reached.  Raises
    ``TypeError`` for a non-mapping schema and ``ValueError`` for a remote,
    unresolvable or content-free looping ``$ref`` or a malformed sub-schema.
    """
    for side, schema in (("old", old), ("new", new)):
        if not isinstance(schema, Mapping):
            raise TypeError(f"{side} schema must be a mapping, got {type(schema).__name__}")
    differ, seen, changes = _Differ(old, new), set(), []
    for change in differ.compare(old, new, ""):
        origin = differ.origin.get(id(change))
        if origin is None or origin not in seen:
            changes.append(change)
            seen.add(origin)
    return changes


def required_bump(changes: Sequence[SchemaChange]) -> Literal["none", "patch", "minor", "major"]:
    """The largest bump any change needs, or "none" when there are no changes."""
    best: Literal["none", "patch", "minor", "major"] = "none"
    for change in changes:
        if _RANK[change.bump] > _RANK[best]:
            best = change.bump
    return best


def parse_version(text: str) -> tuple[int, int, int]:
    """Parse a strict ``MAJOR.MINOR.PATCH`` version (no prefix, suffix or leading zeros)."""
    if not isinstance(text, str):
        raise TypeError(f"version must be a string, got {type(text).__name__}")
    match = _VERSION.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid version {text!r}: expected MAJOR.MINOR.PATCH with "
                         "non-negative integers and no leading zeros, e.g. '1.2.0'")
    return int(match[1]), int(match[2]), int(match[3])


def bump_problem(old_version: str, new_version: str,
                 changes: Sequence[SchemaChange]) -> str | None:
    """None when ``new_version`` is an adequate bump over ``old_version`` for ``changes``.

    Otherwise a message naming the needed bump, e.g. "breaking change (property 'x'
    removed while additionalProperties is false at /properties/x) needs a major version
    bump: 1.2.0 -> 2.0.0 (got 1.3.0)".  A version going backwards is a problem; any
    change, even a cosmetic one, needs at least a patch bump.  Only adequacy is
    checked: skipped numbers (1.2.0 -> 1.4.0) and unreset parts (1.2.3 -> 2.0.5) pass,
    and 0.x versions get no special treatment.
    """
    old, new = parse_version(old_version), parse_version(new_version)
    if new < old:
        return f"version goes backwards: {old_version} -> {new_version}"
    needed = required_bump(changes)
    done = "major" if new[0] > old[0] else "minor" if new[1] > old[1] else \
        "patch" if new[2] > old[2] else "none"
    if _RANK[done] >= _RANK[needed]:
        return None
    top = [c for c in changes if c.bump == needed]
    label = {"major": "breaking change", "minor": "non-breaking change",
             "patch": "cosmetic change"}[needed]
    more = f"; and {len(top) - 1} more" if len(top) > 1 else ""
    target = {"major": (old[0] + 1, 0, 0), "minor": (old[0], old[1] + 1, 0),
              "patch": (old[0], old[1], old[2] + 1)}[needed]
    return (f"{label} ({top[0].detail} at {top[0].path or 'the schema root'}{more}) needs a "
            f"{needed} version bump: {old_version} -> {'.'.join(map(str, target))} "
            f"(got {new_version})")
