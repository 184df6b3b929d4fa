"""Task registry: :func:`register` a :class:`~calver.verifier.family.TaskFamily` subclass, look it
up with :func:`get_family`. The scorer (`calver.verifier.scoring`) runs the same six-bit pipeline for
every registered family; unregistered tasks fail closed there.
"""

from __future__ import annotations

from calver.verifier.family import ANSWER_TYPES, TaskFamily

_REGISTRY: dict[str, TaskFamily] = {}


def register(cls: type[TaskFamily]) -> type[TaskFamily]:
    """Class decorator: validate the family's declaration and register one instance."""
    for attr in ("name", "operation", "description", "answer_type"):
        if not isinstance(getattr(cls, attr, None), str) or not getattr(cls, attr):
            raise TypeError(f"task family {cls.__name__} must declare a non-empty str {attr!r}")
    if cls.answer_type not in ANSWER_TYPES:
        raise TypeError(f"{cls.__name__}.answer_type must be one of {ANSWER_TYPES}")
    for key in cls.query_keys:
        if key not in cls.query_types:
            raise TypeError(f"{cls.__name__}: query key {key!r} has no entry in query_types")
    if cls.name in _REGISTRY and type(_REGISTRY[cls.name]) is not cls:
        raise TypeError(f"task family {cls.name!r} is already registered by {type(_REGISTRY[cls.name]).__name__}")
    _REGISTRY[cls.name] = cls()
    return cls


def unregister(name: str) -> None:
    """Remove a registered family (tests that register a temporary one); KeyError if absent."""
    _load_builtin_families()
    try:
        del _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unregistered task {name!r}") from None


def get_family(name: str) -> TaskFamily:
    fam = _REGISTRY.get(name) if _BUILTINS_LOADED else None  # the hot path: one dict lookup
    if fam is not None:
        return fam
    _load_builtin_families()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unregistered task {name!r}; registered: {', '.join(sorted(_REGISTRY))}") from None


def families() -> dict[str, TaskFamily]:
    _load_builtin_families()
    return dict(sorted(_REGISTRY.items()))


_BUILTINS_LOADED = False


def _load_builtin_families() -> None:
    global _BUILTINS_LOADED
    import calver.verifier.tasks  # noqa: F401  (registers the built-in families on import)

    _BUILTINS_LOADED = True
