"""The correctness scoring of ``bench/real_model.py`` (tests/real_model_turns.py): strict
number and word tokens, expected facts from the demo data."""

from __future__ import annotations

import pytest

from hermes_fsm.demo.retail import RetailData
from tests.real_model_turns import TURNS, Expect, correct, numbers, stock, total, words


def test_an_expected_zero_does_not_match_a_number_that_contains_it() -> None:
    expect = stock("B2002", "east")  # 0 units
    assert not correct("There are 980 B2002 in the east warehouse.", expect)
    assert not correct("B2002: 10 units", expect)
    assert correct("B2002 has 0 units in the East China warehouse.", expect)
    assert correct("B2002 is out of stock in the east warehouse.", expect)
    assert correct("B2002 在华东仓缺货。", expect)


def test_numbers_inside_codes_and_decimals_are_not_figures() -> None:
    assert numbers("A1001 has 342 units") == [342]
    assert numbers("IP15-128 v2 x3") == []
    assert numbers("在华东仓还有342件") == [342]
    assert numbers("1,500 units, 1.5 m, 0.") == [1500, 1, 0]
    assert not correct("A1001 is in stock.", stock("A1002", "south"))  # no 1001 → 203 mix-up


def test_a_stock_answer_must_not_give_another_warehouses_figure() -> None:
    expect = stock("A1001", "east")  # 342; north 120, south 0, west 57
    assert correct("A1001 (Wireless mouse): 342 units in the East China warehouse.", expect)
    assert not correct("A1001: east 342, north 120, south 0, west 57.", expect)
    assert not correct("A1001 has 3420 units.", expect)
    assert not correct("A1001 has 57 units in the east.", expect)


def test_expected_figures_come_from_the_demo_data() -> None:
    units = RetailData.default().doc["warehouse_stock"]
    assert stock("C3001", "west").any_of == ((units["C3001"]["west"],),)
    assert total("A1001").any_of[0] == (sum(units["A1001"].values()),)
    assert correct("A1001: 342, 120, 0 and 57 units.", total("A1001"))
    assert correct("A1001 一共有 519 件。", total("A1001"))
    assert not correct("A1001 has 342 units.", total("A1001"))


def test_words_are_whole_words_and_cjk_is_as_written() -> None:
    assert correct("OK, I will call you Ali.", words("ali"))
    assert not correct("That is totally fine.", words("ali"))
    assert correct("好的，已记下李雷。", words("李雷"))
    both = words(("bob", "b2002"))
    assert correct("Reminders: call Bob (9:00), order more B2002.", both)
    assert not correct("Reminders: call Bob.", both)
    assert not correct("Reminders: call Bobby, order more B2002s.", both)


@pytest.mark.parametrize("answer", ["", "   \n"])
def test_an_empty_answer_is_never_correct(answer: str) -> None:
    assert not correct(answer, Expect())


def test_the_fixed_set_is_forty_turns_each_expecting_something_or_small_talk() -> None:
    assert len(TURNS) == 40
    assert len({t.text for t in TURNS}) == 40
    small_talk = [t.text for t in TURNS if not t.expect.any_of]
    assert len(small_talk) == 5, small_talk
