"""Statistics more than one role uses: the drift tests between two samples or their sketches (``shift``: KS, PSI,
Wasserstein, proportion tests, Benjamini–Hochberg; the drift role's checks and the shadow role's score shift) and
confidence intervals of a share (``intervals``: the gate's coverage, the A/B rates, the drift benchmarks).

Pure functions of numbers: no I/O, no clock, no globals, and no import of a role's package.
"""
