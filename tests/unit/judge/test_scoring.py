"""The live scorer's metric values from a judge's verdicts (judge.scoring.score_verdicts): what is applicable."""

from __future__ import annotations

from ragmon.judge import HeuristicJudge, JudgeInput
from ragmon.judge.scoring import score_trace, score_verdicts
from ragmon.metrics import claim_sentences
from ragmon.metrics.verdicts import CitationVerdict, ClaimVerdict, RefusalVerdict, Verdicts
from tests.conftest import make_trace


def values(item: JudgeInput, verdicts: Verdicts) -> dict[str, float | None]:
    return {m.metric: m.value for m in score_verdicts(item, verdicts, [0.9])}


def test_a_retrieval_only_trace_has_no_answer_to_rate_and_no_refusal_to_judge():
    # a shadow twin that skips generation: behaviour "answer", empty answer
    scores = {m.metric: m.value for m in score_trace(HeuristicJudge(), make_trace(answer="", citations=[])).values}
    assert scores["answer_relevance"] is None
    assert scores["refusal_correct"] is None and scores["wrong_refusal"] is None and scores["missed_refusal"] is None
    assert scores["context_precision"] is not None  # the retrieval is still judged


def test_any_way_of_declining_an_unanswerable_question_is_correct():
    unanswerable = Verdicts("fp", refusal=RefusalVerdict(answerable=False))
    for behaviour in ("refuse", "clarify", "route"):
        item = JudgeInput.of(make_trace(behaviour=behaviour, answer="I cannot help with that.", citations=[]))
        got = values(item, unanswerable)
        assert got["refusal_correct"] == 1.0 and got["missed_refusal"] == 0.0, behaviour
    answered = values(JudgeInput.of(make_trace(citations=[])), unanswerable)
    assert answered["refusal_correct"] == 0.0 and answered["missed_refusal"] == 1.0


def test_citation_recall_counts_the_sentences_a_reworded_claim_comes_from():
    item = JudgeInput.of(make_trace(answer="Thanks for asking. The fee is 5 USD.", citations=[]))
    assert item.sentences == ("Thanks for asking.", "The fee is 5 USD.")
    cited = (CitationVerdict(sentence=1, chunk_id="c", quote_verified=True, supports=True),)
    for claim in ("The fee is 5 USD.", "The fee is 5 USD", "the fee is 5 usd"):
        got = values(item, Verdicts("fp", claims=(ClaimVerdict(claim, True),), citations=cited,
                                    sentences=item.sentences))
        assert got["citation_recall"] == 1.0, claim  # the greeting needs no citation


def test_claim_sentences_maps_each_claim_to_its_best_sentence_or_none():
    sentences = ("Invoices are sent monthly.", "Refunds take five days.", "Thanks!")
    claims = (ClaimVerdict("refunds take 5 business days", None), ClaimVerdict("invoices are sent each month", True),
              ClaimVerdict("the weather is nice", True))
    assert claim_sentences(claims, sentences) == {0, 1}
    assert claim_sentences(claims, ()) == set() and claim_sentences((), sentences) == set()
