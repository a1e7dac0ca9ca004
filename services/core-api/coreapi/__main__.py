"""``python -m coreapi``: the server module is imported with the cyclic collector off
(``genericapi.server.gctuning.import_server``: start-up CPU, issue 15)."""

from genericapi.server.gctuning import import_server

import_server("coreapi.server").main()
