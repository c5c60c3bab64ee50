"""SQL fragments every drift window query shares: a trace's window index, the time ranges a check reads, and
the drift group's columns. Values travel as ``{name:Type}`` parameters (``window_queries.plan_parameters``)."""

from __future__ import annotations

#: a trace's window index: 0 the current window, then older ones (``ragmon.drift.method.windows``)
INDEX = "intDiv({end:Int64} - 1 - toUnixTimestamp64Milli(ts), {win:Int64})"
SPAN = "ts >= fromUnixTimestamp64Milli({lo:Int64}, 'UTC') AND ts < fromUnixTimestamp64Milli({hi:Int64}, 'UTC')"
CURRENT = "ts >= fromUnixTimestamp64Milli({cs:Int64}, 'UTC')"
#: the reference's time range (a pinned reference's rows; a trailing reference's question levels)
REFERENCE_RANGE = ("ts >= fromUnixTimestamp64Milli({rs:Int64}, 'UTC') AND ts < fromUnixTimestamp64Milli({re:Int64}, "
                   "'UTC')")
# The scores table has no drift_group: its queries group by the four strings. Grouping by four LowCardinality columns
# took 3× longer in chDB than grouping by their String values (0.9 s vs 0.3 s for 2.3 M rows), so the inner queries
# cast them and the outer ones rename them back.
INNER_GROUP = ("toString(retriever_name) AS g_rn, toString(retriever_version) AS g_rv, toString(variant) AS g_var, "
               "toString(category) AS g_cat")
OUTER_GROUP = "g_rn AS retriever_name, g_rv AS retriever_version, g_var AS variant, g_cat AS category"
GROUP_KEYS = "g_rn, g_rv, g_var, g_cat"

#: The drift group of a trace, in the queries over ``traces``: grouped by the 64-bit hash of its four strings
#: (``drift_group``, stored at insert, migration 0018), whose values ride along (``any``) — cheaper than grouping
#: by the four strings (4–7 % of the traces query's time at 10 M traces). Two groups would share a hash with
#: probability about 2⁻⁶⁴ for a pair, as ``question_queries.question_key`` already assumes.
TRACE_GROUP = ("drift_group AS dg, retriever_name AS g_rn, retriever_version AS g_rv, variant AS g_var, "
               "category AS g_cat")
#: ``TRACE_GROUP``'s columns, passed through a subquery
TRACE_KEYS = "dg, g_rn, g_rv, g_var, g_cat"
#: the hash and the four strings of the outer ``GROUP BY dg``, as ``window_queries._group`` reads them
TRACE_OUTER = ("dg, toString(any(g_rn)) AS retriever_name, toString(any(g_rv)) AS retriever_version, "
               "toString(any(g_var)) AS variant, toString(any(g_cat)) AS category")
