"""Graph text formats, one module each holding that format's ``parse`` and ``render``.

Import the public API (``parse_graph`` with auto-detection, ``render_graph``, node-set/path parsers)
from :mod:`calver.verifier.parsers`; these modules are its parts.  Every format module offers
``parse(text, hint=None) -> (nodes, directed, bidirected, declared kind)``, and ``render(g)`` and
``detect(body)`` where the format has them.  Shared pieces (``ParseError``, limits, edge-type words,
name quoting) live in :mod:`.common`; node sets and paths in :mod:`.objects`.
"""
