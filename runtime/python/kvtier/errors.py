"""kvtier's errors as Python exceptions: one class per C++ ``kvtier::ec``.

Every failure of a service call raises a subclass of :class:`Error`, which
carries ``ec`` (the C++ code's name, e.g. ``"closed"``) and ``message`` (what
was wrong, in kvtier's words). "No hit", "not kept" and "wait" are answers,
never exceptions. Arguments Python refuses before kvtier sees them (a buffer
of the wrong shape, a token outside 0 .. 2**32-1) raise ``ValueError`` or
``TypeError`` naming what was wrong.
"""

__all__ = ["Error", "error_class", "from_ec"]


class Error(Exception):
    """A kvtier call failed: ``ec`` names the code, ``message`` the reason."""

    ec = "unknown"

    def __init__(self, message="", ec=None):
        if ec is not None:
            self.ec = ec
        self.message = message
        super().__init__(f"{self.ec}: {message}" if message else self.ec)

    def __reduce__(self):
        return (type(self), (self.message, self.ec))


# (ec name, class name, docstring): the C++ enum's order (messages/error.hpp).
_CODES = [
    ("malformed_message", "MalformedMessageError",
     "Bytes that should hold a message do not."),
    ("message_limit_exceeded", "MessageLimitExceededError",
     "A decoded message exceeded the reader limits."),
    ("invalid_argument", "InvalidArgumentError",
     "An argument is outside what the call accepts (names it); also a "
     "ValueError."),
    ("not_trimmable", "NotTrimmableError",
     "A layer or entry cannot be trimmed to the requested token count."),
    ("invalid_config", "InvalidConfigError",
     "A configuration key is unknown or outside its accepted range."),
    ("position_limit_exceeded", "PositionLimitError",
     "A request can never be admitted: it reaches past the position limit."),
    ("over_budget", "OverBudgetError",
     "A request can never be admitted: its projected bytes alone exceed the "
     "whole KV budget."),
    ("io_error", "IoError",
     "A storage operation failed in a way that may succeed on retry."),
    ("no_space", "NoSpaceError", "Storage has no room."),
    ("corrupt_data", "CorruptDataError", "Stored bytes failed verification."),
    ("not_found", "NotFoundError",
     "The entry, file or key asked for does not exist (any more)."),
    ("incompatible_format", "IncompatibleFormatError",
     "Stored data belongs to another format version or model."),
    ("closed", "ClosedError", "The call came after close()."),
    ("cancelled", "CancelledError",
     "The operation was cancelled before it completed."),
    ("timeout", "TimeoutError",
     "Storage or a peer did not answer within its deadline."),
    ("queue_full", "QueueFullError",
     "A bounded queue (admission's waiters) is full: try again later."),
    ("locked", "LockedError",
     "A resource (an SSD directory) is held by another process."),
    ("unsupported", "UnsupportedError",
     "The service was configured without the part the call needs."),
    ("peer_unreachable", "PeerUnreachableError",
     "A peer node is gone or not connected."),
    ("not_permitted", "NotPermittedError",
     "A remote sender asked for an operation only local callers may make."),
]

_BY_EC = {}
for _ec, _name, _doc in _CODES:
    _bases = (Error, ValueError) if _ec == "invalid_argument" else (Error,)
    _cls = type(_name, _bases, {"ec": _ec, "__doc__": _doc,
                                "__module__": "kvtier"})
    globals()[_name] = _cls
    _BY_EC[_ec] = _cls
    __all__.append(_name)
del _ec, _name, _doc, _bases, _cls

# The names the API contract uses besides the uniform ones.
InvalidConfig = InvalidConfigError  # noqa: F821 (made above)
PositionLimitExceededError = PositionLimitError  # noqa: F821
__all__ += ["InvalidConfig", "PositionLimitExceededError"]


def error_class(ec):
    """The exception class of code ``ec`` (``Error`` for an unknown one)."""
    return _BY_EC.get(ec, Error)


def from_ec(ec, message):
    """An exception instance for code ``ec`` with ``message``."""
    return error_class(ec)(message, ec)
