"""API Priority and Fairness at the gateway (kube's WithPriorityAndFairness and its config controller).

Each gateway replica classifies every request by the FlowSchemas in its watch cache, gives it a seat
of its priority level's share of ``--max-requests-inflight`` + ``--max-mutating-requests-inflight``,
queues it fairly (shuffle sharding, fair queuing over virtual time) when the level is busy, and
answers 429 when the queue is full or the wait too long. The pure parts (bootstrap objects, matching,
dealing, seat math) live in ``genericapi.apimachinery.flowcontrol``.
"""
