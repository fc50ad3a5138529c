"""The conversation: a session's own state beyond its messages (seed 002 §2.1).

Data and pure functions only, below the brains and the engine so both can read it: the
conversation graph (entity and intent nodes, edges, versions, decay), the pending tasks
with their slots, and the normalisation of time expressions to exact values. The engine
changes it only through events.
"""
