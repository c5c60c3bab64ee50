"""Question-type classification behind the judge seam: ``QuestionClassifier`` and the heuristic one.

Owns the contract (a closed list of labels, one label per question, a fingerprint like a judge's, so
classifications of different fingerprints are never counted together) and ``HeuristicClassifier``, which
assigns a type by documented keyword rules (docs/coverage.md), first matching rule wins. The LLM classifier is
``ragmon.judge.classify_openai``. Must not touch the store, read a clock or follow anything the question says:
question text is untrusted data and is only matched against patterns here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ragmon.judge.base import JudgeInput, Usage, fingerprint

#: the label of a question that fits none of the types; always the last of a classifier's labels
OTHER = "other"
#: bump when a rule changes: it is part of the fingerprint
RULES_VERSION = "question-rules-1"


@dataclass(frozen=True, slots=True)
class Classification:
    """One question's type (one of the classifier's labels) and what finding it cost."""

    label: str
    usage: Usage = Usage()


@runtime_checkable
class QuestionClassifier(Protocol):
    """Assigns one of ``labels`` to a trace's question.

    ``classify`` blocks, is idempotent for an input and fingerprint, and raises ``JudgeError`` (retryable or
    not, like a judge) rather than guess; it never returns a label outside ``labels``.
    """

    name: str
    model: str
    fingerprint: str
    labels: tuple[str, ...]

    def classify(self, item: JudgeInput) -> Classification: ...


def closed_list(question_types: Sequence[str]) -> tuple[str, ...]:
    """The labels a classifier chooses from: the configured types in order, then ``other``."""
    return (*dict.fromkeys(t for t in question_types if t != OTHER), OTHER)


_I = re.IGNORECASE
#: (type, pattern) in the order they are tried; the first that matches decides (docs/coverage.md lists them)
RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("permission-scoped", re.compile(
        r"\b(?:another (?:user|customer|tenant|team)|other (?:users?|customers?|tenants?|team'?s?)|someone else'?s?"
        r"|my (?:colleague|manager|coworker|co-worker)'?s?|(?:his|her|their) (?:account|files?|documents?|orders?))\b",
        _I)),
    ("multi-turn", re.compile(
        r"^\s*(?:and|also|what about|how about|same (?:for|with)|then|ok(?:ay)?,? (?:and|what|how))\b"
        r"|\b(?:the (?:second|other) one|that one|as (?:i|you) (?:said|mentioned)|you (?:just )?said)\b", _I)),
    ("wrong-premise", re.compile(
        r"\b(?:since|now that|given that) (?:you|your|the) \w+(?: \w+)? (?:no longer|stopped|removed|discontinued|"
        r"dropped|abolished|cancel+ed)\b|\bwhy (?:did|do|does|have) (?:you|they|your) (?:stop|remove|discontinue|"
        r"drop|abolish|cancel)", _I)),
    ("multi-passage", re.compile(
        r"\b(?:compare|comparison|difference between|differences between|versus|vs\.?|both (?:the )?\w+ and"
        r"|each of the|across (?:all|the) \w+)\b", _I)),
    ("table-number", re.compile(
        r"\b(?:how (?:much|many)|what (?:is|was|are|were) the (?:amount|price|rate|total|fee|cost|number|percentage"
        r"|limit|maximum|minimum)|percent(?:age)?|(?:line|row|table|column) \d+)\b|[%$€£]\s?\d", _I)),
    ("ambiguous", re.compile(r"^\W*(?:what|when|where|which|who)(?:'s| is| are)? (?:the )?\w+\W*$", _I)),
)


class HeuristicClassifier:
    """Keyword rules, then the trace's behaviour: a refused question that no rule typed is taken as out of scope
    (a proxy: the documents did not answer it), and any other question as a single fact. A type not in the
    configured labels is skipped; what is left over is ``other``. Deterministic and thread-safe."""

    name = "heuristic"
    model = ""

    def __init__(self, question_types: Sequence[str]):
        self.labels = closed_list(question_types)
        self.fingerprint = fingerprint(classifier=self.name, rules=RULES_VERSION, labels=list(self.labels))

    def classify(self, item: JudgeInput) -> Classification:
        allowed = set(self.labels)
        question = item.question[:4000]  # the rules look at the opening; bounding keeps hostile input cheap
        for label, pattern in RULES:
            if label in allowed and pattern.search(question):
                return Classification(label)
        if item.behaviour == "refuse" and "out-of-scope" in allowed:
            return Classification("out-of-scope")
        return Classification("single-fact" if "single-fact" in allowed else OTHER)
