"""Schemathesis's command line (`npm run fuzz:api` runs it), with two fixes to what it runs on.

Schemathesis 4 scans every 2xx JSON body for strings that look like links, to learn links for its
stateful phase, and splits each with urllib. A string starting with http:// whose host has an
unbalanced bracket makes urllib raise "Invalid IPv6 URL", which Schemathesis does not catch: the
whole run ends with an internal error. Our 2xx bodies echo what people stored (a table's cells, a
note, a step's URL), so such a string is data, not a defect of the API. Here it is read as what it
is, not a link, and every check still runs.

With two workers (threads), Hypothesis describes the filters the coverage phase builds by parsing
their module's source with ast.parse, and CPython 3.11 builds the tree with a recursion counter the
threads share: two parses at once end in "SystemError: AST constructor recursion depth mismatch",
which Schemathesis reports as a runtime error of whichever operation it was on (a run here failed
so on two operations; CI's run of 2026-11-29 most likely too). Parses here take turns: Hypothesis
parses each module's source once and caches what it found.
"""

import ast
import threading

import schemathesis.cli
import schemathesis.engine.observations as observations

_parse = ast.parse
_parse_turn = threading.Lock()


def _parse_in_turn(*args, **kwargs):
    with _parse_turn:
        return _parse(*args, **kwargs)


ast.parse = _parse_in_turn

_same_origin_path = observations._same_origin_path


def _tolerant_same_origin_path(value, origin):
    try:
        return _same_origin_path(value, origin)
    except ValueError:
        return None


observations._same_origin_path = _tolerant_same_origin_path

if __name__ == "__main__":
    schemathesis.cli.schemathesis()
