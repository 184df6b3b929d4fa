"""Built-in task families. Importing this package registers them (one module per family)."""

from calver.verifier.tasks import (  # noqa: F401
    backdoor,
    blocking,
    frontdoor,
    separation,
    cycle,
    mediator,
    intervention,
    path,
    ate,
    knights,
)
