"""The shared core: what every layer of tfaccel uses and nothing else defines.

- ``errors``: the error raised to users (what, expected, received, fix) and how an argument is
  named (``budget_s=4`` from Python, ``--budget 4`` from the command line);
- ``checks``: the argument checks of the public API (a switch, a count, a number, a path);
- ``findings``: the one shape of a finding (doctor, profile, placement);
- ``timing``: the measuring method (warm-up excluded, interleaved rounds, median and IQR);
- ``jsonout``: the one JSON writer (strict: NaN and infinities as null);
- ``files``: the one rule for "can I write here" and the one atomic writer;
- ``units``: bytes, durations, figures and rates as every message writes them, with one marker
  for a missing figure (``n/a``);
- ``markup``: the one Markdown escaper and the one HTML escaper of every renderer.

Everything in tfaccel may import the core; the core imports nothing of tfaccel outside itself
(the ``core`` contract of ``lint-imports``). Importing it never imports TensorFlow.
"""
