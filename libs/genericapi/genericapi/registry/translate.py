"""The one place storage errors become API errors (with kube-apiserver's wording)."""

from __future__ import annotations

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.storage import errors as serrors

#: Seconds a client is told to wait when etcd cannot be reached (kube's storage-unreachable answer).
UNREACHABLE_RETRY_AFTER = 2


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
        # kube's storeerr.Interpret*Error for unreachable storage: a ServerTimeout with
        # Retry-After, which client-go and kubectl retry on their own.
        return apierrors.server_timeout(info.group, info.plural, operation or "get", UNREACHABLE_RETRY_AFTER)
    return apierrors.internal_error(str(err))
