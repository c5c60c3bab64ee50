"""The judge agreement role: judge drift, the weekly judge-vs-human kappa from review labels (``job``), published
for ``RagmonJudgeAgreementLow``; ``role`` is how a process starts it. Settings: ``drift.judge_agreement`` (their
place before this was a role of its own) and the switch ``roles.judge_agreement``."""
