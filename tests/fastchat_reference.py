"""FastChat's MT-Bench single-answer rules, written out with ``re`` (test-only reference).

Shared by the tests that hold the MT-Bench adapter to FastChat
(``test_mt_bench_reference.py``: the adapter's batches; ``test_adapter_mt_bench_reference.py``:
the rows a store holds): the rating ``run_judge_single`` reads from a judge
reply, and the graded answer's length cut from a judge prompt by one regular
expression per template of ``fastchat/llm_judge/data/judge_prompts.jsonl``,
not by the adapter's index arithmetic.
"""

from __future__ import annotations

import ast
import re
from typing import Any

ONE_SCORE = re.compile(r"\[\[(\d+\.?\d*)\]\]")  # fastchat/llm_judge/common.py one_score_pattern
ONE_SCORE_BACKUP = re.compile(r"\[(\d+\.?\d*)\]")  # one_score_pattern_backup
SINGLE_V1 = re.compile(r"(?s).*?\[The Start of Assistant's Answer\]\n(.*)\n\[The End of Assistant's Answer\]")
MULTI_TURN = re.compile(
    r"(?s).*?\n\n### Assistant A:\n.*?\n\n### Assistant A:\n(.*)\n\n<\|The End of Assistant A's Conversation with User\|>"
)


def fastchat_rating(judgment: str) -> float:
    """``run_judge_single``'s rating of a judge reply."""
    match = ONE_SCORE.search(judgment) or ONE_SCORE_BACKUP.search(judgment)
    return ast.literal_eval(match.groups()[0]) if match else -1


def answer_length(prompt: Any) -> int | None:
    """Characters of the graded answer where the prompt has exactly one template's markers."""
    if not isinstance(prompt, str):
        return None
    match = SINGLE_V1.fullmatch(prompt)
    if match and prompt.count("[The Start of Assistant's Answer]\n") == 1:
        return len(match.group(1))
    match = MULTI_TURN.fullmatch(prompt)
    if match and prompt.count("\n\n### Assistant A:\n") == 2 and "<|The End of Assistant A's" not in match.group(1):
        return len(match.group(1))
    return None
