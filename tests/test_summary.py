"""Token counting (offline, Chinese and English) and the extractive rolling summary."""

from __future__ import annotations

from typing import Any

import pytest

from hermes_fsm.brain.summary import (
    compress_summary,
    extractive_summary,
    sentence_weight,
    truncate_tokens,
)
from hermes_fsm.brain.tokens import (
    CalibratedCounter,
    HeuristicCounter,
    TokenizerCounter,
    build_counter,
)
from hermes_fsm.errors import ConfigError

COUNT = HeuristicCounter()


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


# --- the heuristic counter ---------------------------------------------------------------


def test_each_chinese_character_and_punctuation_mark_is_one_token() -> None:
    assert COUNT.count("我喜欢用邮件联系") == 8
    assert COUNT.count("明天下午三点开会。") == 9


def test_english_words_are_one_token_up_to_six_letters_then_one_more_per_six() -> None:
    assert COUNT.count("call the office") == 3  # call, the, office (six letters)
    assert COUNT.count("internationalization") == 4  # 20 letters


def test_digits_count_in_threes_and_symbols_in_pairs() -> None:
    assert COUNT.count("2026") == 2
    assert COUNT.count('{"a":1}') == 5  # {" a ": 1 }


def test_whitespace_is_free() -> None:
    assert COUNT.count("remind   me\n\ttomorrow") == COUNT.count("remind me tomorrow") == 4


def test_mixed_chinese_and_english_add_up() -> None:
    assert COUNT.count("提醒我 call Bob") == COUNT.count("提醒我") + COUNT.count("call Bob") == 5


def test_the_heuristic_does_not_count_fewer_tokens_than_a_real_tokenizer_on_prose() -> None:
    from hermes_fsm.memory.onnx_embedder import minilm_files

    real = TokenizerCounter(minilm_files()[1])
    prose = ("Please book a table for four at 7:30pm on Friday; it must not be near the "
             "window, and send the invoice to accounting@example.com by Monday.")
    assert COUNT.count(prose) >= real.count(prose)


def test_a_tokenizer_file_counts_exactly_without_special_tokens() -> None:
    from hermes_fsm.memory.onnx_embedder import minilm_files

    counter = TokenizerCounter(minilm_files()[1])
    assert counter.count("hello world") == 2
    assert counter.count("") == 0
    assert counter.name == "tokenizer:tokenizer.json"


def test_a_tokenizer_file_that_is_not_one_is_a_config_error(tmp_path: Any) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"tokenizer\.json"):
        TokenizerCounter(bad)


def test_the_calibrated_counter_learns_the_server_ratio_within_bounds() -> None:
    counter = CalibratedCounter()
    base = counter.count("word " * 100)
    for _ in range(50):
        counter.observe(estimated=100, actual=150)
    assert counter.ratio == pytest.approx(1.5, abs=0.01)
    assert counter.count("word " * 100) == pytest.approx(base * 1.5, abs=2)
    for _ in range(50):
        counter.observe(estimated=100, actual=1000)  # a server gone wrong cannot run away
    assert counter.ratio == pytest.approx(2.0)


def test_the_calibrated_counter_ignores_empty_observations() -> None:
    counter = CalibratedCounter()
    counter.observe(estimated=0, actual=50)
    counter.observe(estimated=50, actual=0)
    assert counter.ratio == 1.0


def test_auto_calibrates_for_a_brain_that_reports_usage_and_not_otherwise() -> None:
    class Served:
        name = "openai:some-model"

    class Offline:
        name = "rules"

    assert isinstance(build_counter("auto", Served()), CalibratedCounter)
    assert isinstance(build_counter("auto", Offline()), HeuristicCounter)
    assert isinstance(build_counter("heuristic", Served()), HeuristicCounter)


# --- the extractive summary ---------------------------------------------------------------

ENGLISH = [
    user("Hi, nice to meet you."),
    user("Book a table for four at 7:30pm on Friday."),
    assistant("Sure thing, happy to help."),
    user("It must not be near the window. I don't eat shellfish."),
    assistant("Noted."),
    user("Also send the invoice to Li by Monday."),
]

CHINESE = [
    user("你好。"),
    user("帮我预约周五下午三点的牙医。"),
    assistant("好的,没问题。"),
    user("必须在下班之前完成,不要安排在上午。"),
    user("报告要在3月5日前交给王经理。"),
]


def test_the_summary_keeps_times_tasks_and_constraints_in_english() -> None:
    summary = extractive_summary("", ENGLISH, 60, COUNT)
    assert "user: Book a table for four at 7:30pm on Friday." in summary
    assert "must not be near the window" in summary
    assert "don't eat shellfish" in summary
    assert "by Monday" in summary
    assert "Sure thing" not in summary and "Noted" not in summary  # the assistant's small talk


def test_the_summary_keeps_times_tasks_and_constraints_in_chinese() -> None:
    summary = extractive_summary("", CHINESE, 60, COUNT)
    assert "周五下午三点" in summary
    assert "必须在下班之前完成" in summary
    assert "3月5日前" in summary
    assert "好的" not in summary


def test_over_its_budget_the_summary_drops_small_talk_before_constraints() -> None:
    full = extractive_summary("", ENGLISH, 1000, COUNT)
    tight = extractive_summary("", ENGLISH, 30, COUNT)
    assert "nice to meet you" in full and "nice to meet you" not in tight
    assert "7:30pm on Friday" in tight
    assert COUNT.count(tight) <= 30


def test_among_equally_important_lines_the_oldest_go_first() -> None:
    messages = [user(f"Call supplier {name} before noon.") for name in ("Ann", "Bo", "Cy")]
    summary = extractive_summary("", messages, 2 * COUNT.count("user: Call supplier Ann "
                                                               "before noon."), COUNT)
    assert "Ann" not in summary and "Bo" in summary and "Cy" in summary


def test_the_previous_summary_stays_and_nothing_is_repeated() -> None:
    first = extractive_summary("", ENGLISH[:2], 100, COUNT)
    second = extractive_summary(first, ENGLISH[1:4], 100, COUNT)
    assert second.startswith(first)
    assert second.count("7:30pm on Friday") == 1


def test_a_single_line_over_the_budget_is_cut_to_fit() -> None:
    long = user("You must remember " + "very " * 200 + "much.")
    summary = extractive_summary("", [long], 20, COUNT)
    assert COUNT.count(summary) <= 20
    assert summary.startswith("user: You must remember very") and summary.endswith("…")


def test_compressing_a_summary_keeps_its_weightiest_lines() -> None:
    summary = "user: hello there\nuser: pay the rent before the 5th\nuser: lovely day"
    assert compress_summary(summary, 12, COUNT) == "user: pay the rent before the 5th"


def test_sentence_weights_add_times_constraints_tasks_and_numbers() -> None:
    assert sentence_weight("Nice weather.") == 0
    assert sentence_weight("Call Bob.") == 2
    assert sentence_weight("Don't call after 9pm.") == 3 + 3 + 2 + 1
    assert sentence_weight("不要在晚上打电话") == 3 + 3


def test_truncate_tokens_never_exceeds_the_limit() -> None:
    text = "明天下午三点开会,必须准时。" * 20
    for limit in (0, 1, 5, 17, 100):
        cut = truncate_tokens(text, limit, COUNT)
        assert COUNT.count(cut) <= limit
    assert truncate_tokens("short", 10, COUNT) == "short"
