"""Glue between a provider's Python code and its WIT exports."""

import functools

from componentize_py_types import Err

try:
    # The infrastructure world also imports wasi:http's `types`, so
    # componentize-py names capwasm's after its package there.
    from wit_world.imports import capwasm_provider_types as types
except ImportError:
    from wit_world.imports import types

from .errors import InvalidConfig, RetryAfter, Terminal


def provider_error(failure):
    """The WIT ``provider-error`` for a :class:`ProviderFailure`."""
    if isinstance(failure, RetryAfter):
        return types.ProviderError_RetryAfter(types.RetryAfterError(failure.seconds, failure.message))
    if isinstance(failure, Terminal):
        return types.ProviderError_Terminal(types.TerminalError(failure.reason, failure.message))
    if isinstance(failure, InvalidConfig):
        return types.ProviderError_InvalidConfig(types.InvalidConfigError(failure.path, failure.message))
    raise TypeError(f"not a provider failure: {failure!r}")


def provider_call(method):
    """Decorates an export returning ``result<_, provider-error>``: a raised
    :class:`ProviderFailure` becomes the call's error. Any other exception
    traps the call; the host reports its traceback."""

    @functools.wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except (RetryAfter, Terminal, InvalidConfig) as failure:
            raise Err(provider_error(failure)) from None

    return call


def info(name, version):
    """The ``provider-info`` record."""
    return types.ProviderInfo(name, version)
