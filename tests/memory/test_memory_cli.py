"""``hermes-fsm memory search|list|forget --user U`` on the embedded stores."""

from __future__ import annotations

import io

from hermes_fsm.cli.main import main


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_memory_commands_list_search_and_forget_a_users_memory():
    code, _ = cli("run", "--user", "alice", "Please contact me by email")
    assert code == 0
    cli("run", "--user", "bob", "Please contact me by phone")
    code, listed = cli("memory", "list", "--user", "alice")
    assert code == 0 and "preference.contact_channel: email" in listed
    assert "phone" not in listed
    code, found = cli("memory", "search", "contact email", "--user", "alice")
    assert "preference.contact_channel: email" in found and "score" in found
    code, forgot = cli("memory", "forget", "--all", "--yes", "--user", "alice")
    assert code == 0 and "forgot user 'alice'" in forgot
    assert "0 item(s)" in cli("memory", "list", "--all", "--user", "alice")[1]
    assert "phone" in cli("memory", "list", "--user", "bob")[1]


def test_memory_search_without_a_query_is_a_usage_error(capsys):
    code, _ = cli("memory", "search", "--user", "alice")
    assert code == 1
    assert "needs a query" in capsys.readouterr().err
