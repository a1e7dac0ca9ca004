"""The one place storage errors become API errors (with kube-apiserver's wording)."""

from __future__ import annotations

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.storage import errors as serrors

#: Seconds a client is told to wait when etcd cannot be reached (kube's storage-unreachable answer).
UNREACHABLE_RETRY_AFTER = 2

#: The operations that write: one etcd may have applied although its call failed.
_WRITES = frozenset({"create", "update", "delete"})

#: kube's answer when a request's context ends first (finisher.FinishRequest: NewTimeoutError(...,
#: 0)); a write etcd has not answered within the client's deadline ends there in kube-apiserver.
REQUEST_TIMEOUT_MESSAGE = "Timeout: request did not complete within requested timeout - context deadline exceeded"


def sent_write_error(code: int, details: str) -> apierrors.APIError:
    """kube 1.33's answer to a write whose etcd call was sent and then failed, its outcome unknown.

    kube's etcd3 store hands clientv3's error up as is (OptimisticPut's error; storeerr's
    Interpret*Error pass it through), so the handler answers what that error becomes:

    * no answer in time: the request's context ends (the create/update/delete handlers' 34 s,
      kube's etcd client has no deadline of its own) and the finisher answers 504 ``Timeout`` with
      empty details, no Retry-After (a client must not send again a write that may have landed);
    * an error status from etcd (``etcdserver: request timed out``, leader changes) or the connection
      lost under the call: ErrorToAPIStatus of a plain error, 500 with no reason and the error's text
      (clientv3's EtcdError is etcd's message; any other is grpc-go's ``rpc error: code = ... desc
      = ...``).
    """
    if code == serrors.GRPC_DEADLINE_EXCEEDED:
        return apierrors.APIError(504, "Timeout", REQUEST_TIMEOUT_MESSAGE, {})
    if details.startswith(("etcdserver: ", "mvcc: ")):
        return apierrors.APIError(500, "", details)
    name = serrors.GRPC_CODE_NAMES.get(code, f"Code({code})")
    return apierrors.APIError(500, "", f"rpc error: code = {name} desc = {details}")


def to_api_error(err: serrors.StorageError, info: ResourceInfo, name: str = "",
                 operation: str = "") -> apierrors.APIError:
    """``operation`` (get, list, watch, create, update, delete) names what failed where kube's
    answer says so (storage unreachable)."""
    if isinstance(err, serrors.KeyExistsError):
        return apierrors.already_exists(info.group, info.plural, name)
    if isinstance(err, serrors.KeyNotFoundError):
        return apierrors.not_found(info.group, info.plural, name)
    if isinstance(err, serrors.RevisionConflictError):
        return apierrors.optimistic_lock(info.group, info.plural, name)
    if isinstance(err, serrors.FutureRevisionRefusedError):
        # kube's ErrorToAPIStatus for an error that is no Status: 500, no reason, the error's text.
        return apierrors.APIError(500, "", str(err))
    if isinstance(err, serrors.TooOldRevisionError):
        return apierrors.resource_expired(
            f"too old resource version: {err.requested} ({err.oldest})")
    if isinstance(err, serrors.FutureRevisionError):
        return apierrors.timeout(f"Too large resource version: {err.requested}, current: {err.current}", 1)
    if isinstance(err, serrors.UnavailableError):
        sent = serrors.sent_call_status(err) if operation in _WRITES else None
        if sent is not None:
            return sent_write_error(*sent)
        # kube's storeerr.Interpret*Error for unreachable storage: a ServerTimeout with
        # Retry-After, which client-go and kubectl retry on their own.
        return apierrors.server_timeout(info.group, info.plural, operation or "get", UNREACHABLE_RETRY_AFTER)
    return apierrors.internal_error(str(err))
