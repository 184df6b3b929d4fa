"""Built-in task families. Importing this package registers them (one module per family)."""

from calver.verifier.tasks import (  # noqa: F401
    ate,
    backdoor,
    blocking,
    cycle,
    frontdoor,
    intervention,
    knights,
    mediator,
    path,
    separation,
)
