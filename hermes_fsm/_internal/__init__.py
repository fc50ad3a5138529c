"""Private helpers shared by several layers (YAML with line numbers, the PostgreSQL pool,
group commit, the package's data paths). Nothing here is public API."""
