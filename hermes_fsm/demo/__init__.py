"""The bundled demo domain: inventory tools, a calendar, and the demo MCP server.

What the embedded configuration wires in when nothing else is configured; the engine does
not know it exists.
"""
