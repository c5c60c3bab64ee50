"""Weekly human review of a random sample of production traces: selection, the web pages and JSON API, labels,
and golden-set export.

Modules: ``queries`` (the ``ReviewStore`` seam and every SQL string of the role), ``records`` (ISO weeks and
the records that cross the seam), ``in_memory`` (the test double), ``selection`` (the seeded weekly sample),
``queue`` (a week's items and progress), ``labels`` (saving a label, disagreement), ``export`` (golden cases),
``auth`` and ``sessions`` (who a request is, signing out), ``item_view`` and ``models`` (what a page or a
response shows), ``context``, ``web`` and ``api`` (the routers) and ``role`` (what a process starts). See
docs/review.md.
"""
