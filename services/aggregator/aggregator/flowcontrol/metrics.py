"""The ``apiserver_flowcontrol_*`` metrics kube-apiserver 1.33 exposes, with its names, labels and
buckets (k8s.io/apiserver/pkg/util/flowcontrol/metrics), on the gateway's ``/metrics``."""

from __future__ import annotations

from genericapi.server.metrics import LeanCounter, LeanGauge, LeanHistogram
from prometheus_client import Counter, Gauge

# The series every request through a priority level updates (dispatched, in queue, executing, wait,
# execution, queue length) are the lean kinds: one addition each instead of prometheus_client's
# validation and lock (about 12% of the gateway chain's CPU for a user with an APF seat); the
# text they print is prometheus_client's.

_PL, _FS = "priority_level", "flow_schema"
_DURATION_BUCKETS = (0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30)
_QUEUE_LENGTH_BUCKETS = (0, 10, 25, 50, 100, 250, 500, 1000)

REJECTED = Counter("apiserver_flowcontrol_rejected_requests",
                   "Number of requests rejected by API Priority and Fairness subsystem", [_PL, _FS, "reason"])
DISPATCHED = LeanCounter("apiserver_flowcontrol_dispatched_requests",
                         "Number of requests executed by API Priority and Fairness subsystem", (_PL, _FS))
INQUEUE = LeanGauge("apiserver_flowcontrol_current_inqueue_requests",
                    "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
                    (_PL, _FS))
INQUEUE_SEATS = LeanGauge("apiserver_flowcontrol_current_inqueue_seats",
                          "Number of seats currently pending in queues of the API Priority and Fairness subsystem",
                          (_PL, _FS))
EXECUTING = LeanGauge("apiserver_flowcontrol_current_executing_requests",
                      "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API "
                      "Priority and Fairness subsystem", (_PL, _FS))
EXECUTING_SEATS = LeanGauge("apiserver_flowcontrol_current_executing_seats",
                            "Concurrency (number of seats) occupied by the currently executing (initial stage for a "
                            "WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem",
                            (_PL, _FS))
CONCURRENCY_LIMIT = Gauge("apiserver_flowcontrol_request_concurrency_limit",
                          "Nominal number of execution seats configured for each priority level", [_PL])
NOMINAL_SEATS = Gauge("apiserver_flowcontrol_nominal_limit_seats",
                      "Nominal number of execution seats configured for each priority level", [_PL])
LOWER_SEATS = Gauge("apiserver_flowcontrol_lower_limit_seats",
                    "Configured lower bound on number of execution seats available to each priority level", [_PL])
UPPER_SEATS = Gauge("apiserver_flowcontrol_upper_limit_seats",
                    "Configured upper bound on number of execution seats available to each priority level", [_PL])
CURRENT_SEATS = Gauge("apiserver_flowcontrol_current_limit_seats",
                      "current derived number of execution seats available to each priority level", [_PL])
WAIT = LeanHistogram("apiserver_flowcontrol_request_wait_duration_seconds",
                     "Length of time a request spent waiting in its queue", (_PL, _FS, "execute"),
                     buckets=_DURATION_BUCKETS)
EXECUTION = LeanHistogram("apiserver_flowcontrol_request_execution_seconds",
                          "Duration of initial stage (for a WATCH) or any (for a non-WATCH) stage of request "
                          "execution in the API Priority and Fairness subsystem", (_PL, _FS, "type"),
                          buckets=_DURATION_BUCKETS)
QUEUE_LENGTH = LeanHistogram("apiserver_flowcontrol_request_queue_length_after_enqueue",
                             "Length of queue in the API Priority and Fairness subsystem, as seen by each request "
                             "after it is enqueued", (_PL, _FS), buckets=_QUEUE_LENGTH_BUCKETS)
FAIR_FRAC = Gauge("apiserver_flowcontrol_seat_fair_frac",
                  "Fair fraction of server's concurrency to allocate to each priority level that can use it")
