"""``python -m extensionsapi``.

The cyclic collector is off while the server's modules load: importing them leaves ~95,000
long-lived containers and, at CPython's default thresholds, the collector ran ~230 times over them
(start-up CPU, issue 15). It is back on before anything is served; once start-up is done
``genericapi.server.gctuning`` freezes what was built.
"""

import gc

gc.disable()
try:
    from .server import main
finally:
    gc.enable()

main()
