"""The console tests' review store: the review queries over the test's chDB database (``store``)."""

from __future__ import annotations

import pytest

from ragmon.review.queries import ClickHouseReviewQueries


@pytest.fixture
def review(store) -> ClickHouseReviewQueries:
    return ClickHouseReviewQueries(store)
