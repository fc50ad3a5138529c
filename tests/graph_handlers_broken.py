"""A module that fails on import, for graph files that must report it (not crash)."""

raise RuntimeError("tests.graph_handlers_broken fails on import, deliberately")
