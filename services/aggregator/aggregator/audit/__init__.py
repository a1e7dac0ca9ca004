"""kube-apiserver's audit (``audit.k8s.io/v1``) at the gateway, which owns the one event per request.

policy.py reads and evaluates ``--audit-policy-file``; event.py builds the Event as kube writes it;
filter.py is ``WithAudit`` (and the Audit-ID / failed-authentication part) in the handler chain;
logbackend.py and webhook.py are the backends; options.py turns the ``--audit-*`` flags into them.
The backends behind the gateway (core-api, extensions-api) never write events: what only they know
(admission annotations) comes back in a response header the gateway strips (see filter.py).
"""
