"""Why a call failed, as Python exceptions.

A provider raises one of these; the SDK's export glue turns it into the
WIT ``provider-error`` the host expects. Any other exception reaches the
host as a trap, with the traceback's last lines in the error.
"""


class ProviderFailure(Exception):
    """A failure the host turns into a condition, an Event and a requeue."""


class RetryAfter(ProviderFailure):
    """Transient: the host calls again after ``seconds``."""

    def __init__(self, seconds, message):
        super().__init__(message)
        self.seconds = seconds
        self.message = message


class Terminal(ProviderFailure):
    """Calling again will not help without a change; ``reason`` is CamelCase."""

    def __init__(self, reason, message):
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


class InvalidConfig(ProviderFailure):
    """The object's ``spec.config`` is not acceptable, at JSON ``path``."""

    def __init__(self, path, message):
        super().__init__(f"{path}: {message}")
        self.path = str(path)
        self.message = message
