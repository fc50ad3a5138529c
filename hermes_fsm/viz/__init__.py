"""The graph view: Mermaid and DOT text, a self-contained SVG, an HTML page, and a recorded
session laid over the graph."""
