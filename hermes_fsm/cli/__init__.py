"""The ``hermes-fsm`` command line (:func:`~hermes_fsm.cli.main.main`); imported by nothing."""
