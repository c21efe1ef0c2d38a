"""Schemathesis's command line (`npm run fuzz:api` runs it), with one fix to Schemathesis itself.

Schemathesis 4 scans every 2xx JSON body for strings that look like links, to learn links for its
stateful phase, and splits each with urllib. A string starting with http:// whose host has an
unbalanced bracket makes urllib raise "Invalid IPv6 URL", which Schemathesis does not catch: the
whole run ends with an internal error. Our 2xx bodies echo what people stored (a table's cells, a
note, a step's URL), so such a string is data, not a defect of the API. Here it is read as what it
is, not a link, and every check still runs.
"""

import schemathesis.cli
import schemathesis.engine.observations as observations

_same_origin_path = observations._same_origin_path


def _tolerant_same_origin_path(value, origin):
    try:
        return _same_origin_path(value, origin)
    except ValueError:
        return None


observations._same_origin_path = _tolerant_same_origin_path

if __name__ == "__main__":
    schemathesis.cli.schemathesis()
