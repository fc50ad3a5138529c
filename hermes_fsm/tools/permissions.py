"""Who may call which tool: callers with roles and grants, and the rule that checks them.

A tool contract lists the ``permissions`` a caller needs (each a role or a grant the caller
must hold); a ``destructive`` tool also needs an explicit grant naming the tool. Callers
are resolved per user id (a configured user, else the default roles).

>>> policy = Permissions(users={"ops": Caller("ops", roles=("admin",), grants=("wipe",))})
>>> policy.caller("ops").holds("admin"), policy.caller("bob").roles
(True, ('user',))
>>> print(permission_problem(policy.caller("bob"), "wipe", "destructive", ()))
tool 'wipe' is destructive and user 'bob' has no grant for it; grant it explicitly \
(permissions.users.bob.grants: [wipe])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Caller", "Permissions", "permission_problem"]


@dataclass(frozen=True, slots=True)
class Caller:
    """A user as the tool layer sees it: an id, roles, and explicit grants (tool names)."""

    user_id: str
    roles: tuple[str, ...] = ("user",)
    grants: tuple[str, ...] = ()

    def holds(self, permission: str) -> bool:
        """Whether ``permission`` is one of the caller's roles or grants."""
        return permission in self.roles or permission in self.grants


@dataclass(slots=True)
class Permissions:
    """Resolves callers by user id.

    Args:
        users: configured callers by user id.
        default_roles: the roles of any other user.
    """

    users: Mapping[str, Caller] = field(default_factory=dict)
    default_roles: tuple[str, ...] = ("user",)
    _cache: dict[str, Caller] = field(default_factory=dict, repr=False)

    def caller(self, user_id: str) -> Caller:
        """The caller for ``user_id`` (a configured one, else one with the default roles)."""
        found = self.users.get(user_id) or self._cache.get(user_id)
        if found is None:
            found = self._cache[user_id] = Caller(user_id, tuple(self.default_roles))
        return found

    @classmethod
    def from_mapping(cls, users: Mapping[str, Mapping[str, Iterable[str]]],
                     default_roles: Iterable[str] = ("user",)) -> Permissions:
        """Build from config-shaped data: ``{user: {roles: [...], grants: [...]}}``."""
        return cls({uid: Caller(uid, tuple(spec.get("roles", default_roles)),
                                tuple(spec.get("grants", ())))
                    for uid, spec in users.items()}, tuple(default_roles))


def permission_problem(caller: Caller, tool: str, side_effects: str,
                       required: Iterable[str]) -> str | None:
    """``None`` when ``caller`` may call ``tool``, else why not and what to do."""
    missing = [p for p in required if not caller.holds(p)]
    if missing:
        return (f"user {caller.user_id!r} lacks permission(s) {missing} for tool {tool!r}; "
                f"give the user those roles or grants (permissions.users.{caller.user_id})")
    if side_effects == "destructive" and tool not in caller.grants:
        return (f"tool {tool!r} is destructive and user {caller.user_id!r} has no grant for it; "
                f"grant it explicitly (permissions.users.{caller.user_id}.grants: [{tool}])")
    return None
