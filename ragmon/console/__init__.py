"""The console: read-only pages of the running daemon for on-call (traces, drift, shadow, gate runs, dead letters).

Served on the process's one HTTP port under ``/review/console``, behind the review UI's sign-in (its session
cookie and users): ``router.console_router`` builds the routes; one module per page reads what the page shows
(``traces``, ``trace_page``, ``drift_page``, ``shadow_page``, ``gate_runs``, ``dead_letters``) and ``svg`` draws
the plots. Every value reaches the SQL as a ``{name:Type}`` parameter and the HTML through Jinja's autoescape.
The console never writes: it must not change the store, the topics or the run artifacts.
"""
