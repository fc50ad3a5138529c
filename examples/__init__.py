"""Examples of embedding hermes-fsm (importable, so the tests can run them)."""
