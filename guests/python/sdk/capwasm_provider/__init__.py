"""capwasm's provider SDK for Python (componentize-py).

- :mod:`.errors`: the failures a call raises (retry after, terminal,
  invalid config); :func:`.exports.provider_call` turns them into the WIT
  ``provider-error``.
- :mod:`.config`: strict parsing of ``spec.config`` with JSON paths.
- :mod:`.log`: structured logging into the host's log.

The modules that touch the WIT bindings (:mod:`.exports`, :mod:`.log`)
import them when used, so the rest runs under plain CPython in unit tests.

:data:`WIT` is the directory of the WIT package the installed SDK carries
(``capwasm:provider@0.1.0``), which componentize-py builds against.
"""

import os

WIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wit")
