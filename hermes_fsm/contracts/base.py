"""Named, versioned pydantic contracts and the registry that resolves ``name@version``.

A contract is a strict pydantic v2 model (extra fields forbidden, no type coercion)
with a class-level name and semantic version:

>>> class Greeting(Contract):
...     contract_name = "greeting"
...     contract_version = "1.2.0"
...     text: str
>>> registry = ContractRegistry([Greeting])
>>> registry.get("greeting@1") is Greeting, registry.get("greeting@1.2.0") is Greeting
(True, True)
>>> Greeting.ref()
'greeting@1.2.0'

Validation may receive a *context* (pydantic's ``info.context``): the engine passes the
turn's facts and tools so a contract can check references, not only shapes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from hermes_fsm.errors import ContractError

__all__ = ["JSON_TYPES", "Contract", "ContractRegistry", "explicit_any", "output_field",
           "split_ref"]


class Contract(BaseModel):
    """Base of every state contract: strict, extra fields forbidden, named and versioned;
    a float field refuses NaN and the infinities (a model's ``NaN`` is a violation)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    contract_name: ClassVar[str] = ""
    contract_version: ClassVar[str] = "0.0.0"

    @classmethod
    def ref(cls) -> str:
        """``name@version`` of this contract."""
        return f"{cls.contract_name}@{cls.contract_version}"

    @classmethod
    def validate_output(cls, raw: Any, context: Mapping[str, Any] | None = None) -> Contract:
        """Validate a state's raw output: a mapping, a model instance, or JSON text.

        Raises:
            pydantic.ValidationError: the output breaks the contract.
        """
        if isinstance(raw, cls):
            raw = raw.model_dump()
        if isinstance(raw, str | bytes):
            return cls.model_validate_json(raw, context=context)
        return cls.model_validate(raw, context=context)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema handed to a model for structured output, and exported for review.

        A field typed ``Any`` (a tool's output, a remembered value) is written as an
        explicit "any JSON value" (``type`` listing the seven JSON types), not as an empty
        schema: the same values validate, and a grammar compiler (llama.cpp's
        ``json_schema_to_grammar``) can turn it into a grammar instead of refusing it.
        """
        return explicit_any(cls.model_json_schema())


JSON_TYPES = ["string", "number", "integer", "boolean", "object", "array", "null"]
_SHAPING = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "properties",
            "items", "not")


def explicit_any(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every untyped subschema (``{}``, ``{"title": ...}``) given the
    explicit type list of any JSON value (see :meth:`Contract.json_schema`).

    >>> explicit_any({"type": "object", "properties": {"v": {"title": "V"}}})["properties"]["v"]
    {'title': 'V', 'type': ['string', 'number', 'integer', 'boolean', 'object', 'array', 'null']}
    """

    def subschema(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        node = {key: walk(key, value) for key, value in node.items()}
        if not any(key in node for key in _SHAPING):
            node["type"] = list(JSON_TYPES)
        return node

    def walk(key: str, value: Any) -> Any:
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(
                value, dict):
            return {name: subschema(sub) for name, sub in value.items()}
        if key in ("items", "additionalProperties", "not", "contains"):
            return subschema(value) if isinstance(value, dict) else value
        if key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            return [subschema(sub) for sub in value]
        return value

    return {key: walk(key, value) for key, value in schema.items()}


def split_ref(ref: str) -> tuple[str, str | None]:
    """Split ``name@version`` into ``(name, version)``; a bare name gives ``(name, None)``."""
    name, sep, version = ref.partition("@")
    return name, (version if sep else None)


def output_field(output: Any, name: str, default: Any = None) -> Any:
    """``getattr(output, name, default)``, without what a miss costs on a pydantic model
    (~1.6 µs: its ``__getattr__`` raises and catches inside). On a :class:`Contract` that
    allows no extra fields, a name that is none of its fields (``__pydantic_fields__``) nor
    an attribute of its class (properties, methods, class variables; private attributes too,
    which pydantic's metaclass answers for) is known to be missing, and ``default`` comes
    back at once. What is missing is worked out once per class and name."""
    if isinstance(output, Contract):
        key = (type(output), name)
        absent = _ABSENT.get(key)
        if absent is None:
            cls = type(output)
            if len(_ABSENT) >= 1024:  # classes made at run time: stay small
                _ABSENT.clear()
            absent = _ABSENT[key] = (name not in cls.__pydantic_fields__
                                     and cls.model_config.get("extra") != "allow"
                                     and not hasattr(cls, name))
        if absent:
            return default
    return getattr(output, name, default)


_ABSENT: dict[tuple[type, str], bool] = {}
"""Per contract class and name: whether :func:`output_field` knows the name is missing."""


class ContractRegistry:
    """Resolves contract references (``name@1``, ``name@1.2``, ``name@1.2.3``, ``name``).

    A partial version picks the highest registered version with that prefix.
    """

    def __init__(self, contracts: Iterable[type[Contract]] = ()) -> None:
        self._by_name: dict[str, dict[str, type[Contract]]] = {}
        for contract in contracts:
            self.register(contract)

    def register(self, contract: type[Contract]) -> type[Contract]:
        """Add a contract class; returns it, so this works as a class decorator."""
        if not (isinstance(contract, type) and issubclass(contract, Contract)):
            raise ContractError(
                f"{contract!r} is not a Contract subclass; derive it from hermes_fsm.Contract"
            )
        if not contract.contract_name:
            raise ContractError(
                f"{contract.__qualname__} has no contract_name; set the class attribute "
                "contract_name = '...' (and contract_version = 'MAJOR.MINOR.PATCH')"
            )
        _parse_semver(contract.contract_version, contract.__qualname__)
        versions = self._by_name.setdefault(contract.contract_name, {})
        existing = versions.get(contract.contract_version)
        if existing is not None and existing is not contract:
            raise ContractError(
                f"contract {contract.ref()} is registered twice ({existing.__qualname__} and "
                f"{contract.__qualname__}); bump one version or rename it"
            )
        versions[contract.contract_version] = contract
        return contract

    def get(self, ref: str) -> type[Contract]:
        """The contract for ``ref``.

        Raises:
            ContractError: no such contract or version; the message lists what exists.
        """
        name, version = split_ref(ref)
        versions = self._by_name.get(name)
        if not versions:
            known = ", ".join(sorted(self.refs())) or "none"
            raise ContractError(f"unknown contract {ref!r}; registered contracts: {known}")
        candidates = [
            v for v in versions if version is None or v == version or v.startswith(version + ".")
        ]
        if not candidates:
            have = ", ".join(sorted(versions))
            raise ContractError(
                f"contract {name!r} has no version matching {version!r}; it has {have}"
            )
        best = max(candidates, key=lambda v: _parse_semver(v, name))
        return versions[best]

    def refs(self) -> list[str]:
        """Every registered ``name@version``."""
        return [f"{n}@{v}" for n, vs in self._by_name.items() for v in vs]

    def __iter__(self) -> Iterator[type[Contract]]:
        for versions in self._by_name.values():
            yield from versions.values()

    def __contains__(self, ref: object) -> bool:
        if not isinstance(ref, str):
            return False
        try:
            self.get(ref)
        except ContractError:
            return False
        return True


def _parse_semver(version: str, owner: str) -> tuple[int, int, int]:
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ContractError(
            f"{owner}: contract_version {version!r} is not MAJOR.MINOR.PATCH (e.g. '1.0.0')"
        )
    major, minor, patch = (int(p) for p in parts)
    return major, minor, patch


def dump_schema(contract: type[Contract]) -> str:
    """The exported form of a contract: stable, pretty JSON with name, version and schema."""
    doc = {
        "name": contract.contract_name,
        "version": contract.contract_version,
        "schema": contract.json_schema(),
    }
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
