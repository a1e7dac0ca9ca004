"""The one place storage errors become API errors (with kube-apiserver's wording)."""

from __future__ import annotations

from genericapi.apimachinery import errors as apierrors
from genericapi.apimachinery.resources import ResourceInfo
from genericapi.storage import errors as serrors


def to_api_error(err: serrors.StorageError, info: ResourceInfo, name: str = "") -> apierrors.APIError:
    if isinstance(err, serrors.KeyExistsError):
        return apierrors.already_exists(info.group, info.plural, name)
    if isinstance(err, serrors.KeyNotFoundError):
        return apierrors.not_found(info.group, info.plural, name)
    if isinstance(err, serrors.RevisionConflictError):
        return apierrors.optimistic_lock(info.group, info.plural, name)
    if isinstance(err, serrors.TooOldRevisionError):
        return apierrors.resource_expired(
            f"too old resource version: {err.requested} ({err.oldest})")
    if isinstance(err, serrors.FutureRevisionError):
        return apierrors.timeout(f"Too large resource version: {err.requested}, current: {err.current}", 1)
    if isinstance(err, serrors.UnavailableError):
        return apierrors.service_unavailable(f"storage is unavailable: {err}")
    return apierrors.internal_error(str(err))
