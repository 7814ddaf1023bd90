"""kvtier: a tiered KV-cache service for LLM inference engines, from Python.

One ``kvtier.Service`` per service (docs/python.md). State crosses as
buffers without a copy either way: ``publish`` keeps the caller's arrays
alive instead of copying them, ``acquire`` lends ``Segment`` objects with the
buffer protocol that numpy and torch view in place. Errors raise
``kvtier.Error`` subclasses carrying the C++ ``ec`` name.
"""

from . import _core
from .errors import *  # noqa: F401,F403 (Error and one class per ec)
from .errors import __all__ as _errors_all
from .model import Layer, Model
from .prompt_cache import PromptCache
from .service import ObjectCache, Service
from ._core import (AdmitDecision, Acquired, Event, LayerView, Lease,
                    PrefetchInfo, PublishResult, ReleaseResult, Request,
                    Segment, Subscription, live_buffers)

__version__ = _core.version

__all__ = ["Service", "Model", "Layer", "Request", "Acquired", "LayerView",
           "Segment", "PublishResult", "AdmitDecision", "ReleaseResult",
           "PrefetchInfo", "Lease", "Subscription", "Event", "ObjectCache",
           "live_buffers", "PromptCache"] + list(_errors_all)
