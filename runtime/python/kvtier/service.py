"""kvtier.Service: one embedded kvtier service (docs/python.md).

The blocking calls come from the extension module (each releases the GIL
while it waits); this class adds construction from a Model and an options
dict, the ``*_async`` forms (asyncio futures resolved on the caller's loop),
the context manager and the object cache.
"""

import asyncio
import os

from . import _aio, _core
from .model import Layer, Model

__all__ = ["Service", "ObjectCache"]

_MODEL_KEYS = ("model.layers", "model.preset", "model.scale", "model.identity")


def _option_text(key, value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        items = []
        for v in value:
            if not isinstance(v, str):
                raise TypeError(f"option {key}: a list of strings")
            items.append('"' + v.replace("\\", "\\\\").replace('"', '\\"')
                         + '"')
        return "[" + ", ".join(items) + "]"
    raise TypeError(f"option {key}: a str, int, float, bool or list of "
                    f"str, not {type(value).__name__}")


def _option_args(options, model):
    if not isinstance(options, dict):
        raise TypeError("options: a dict 'section.key' -> value")
    args = []
    for key, value in options.items():
        if not isinstance(key, str) or "." not in key:
            raise ValueError(f"option {key!r}: written 'section.key', e.g. "
                             f"'ram-tier.cap-bytes'")
        if model is not None and key in _MODEL_KEYS:
            raise ValueError(f"option {key}: the model= argument sets the "
                             f"model; give one or the other")
        args.append(f"--{key}={_option_text(key, value)}")
    if model is not None:
        args.append(f"--model.layers={model.layers_text()}")
        args.append(f"--model.identity={model.identity}")
    return args


def _raw_model(identity, layers):
    out = []
    for kind, row_bytes, window, dtype, _fmt, _item, shape in layers:
        out.append(Layer(kind, shape, dtype, window))
    return Model(identity, out)


def _ignore(ok, value):
    pass


class Service(_core.Service):
    """One kvtier service: ``Service(model=None, config_file=None,
    options=None)``. ``model`` (a kvtier.Model) sets the layers and identity
    (without it the configured geometry's layers are raw bytes); options are
    ``{"section.key": value}`` over the configuration file (or the embedded
    default). A context manager: ``close()`` on exit. Safe from many
    threads."""

    def __init__(self, model=None, config_file=None, options=None):
        if model is not None and not isinstance(model, Model):
            raise TypeError(f"model: a kvtier.Model, not "
                            f"{type(model).__name__}")
        args = _option_args(options if options is not None else {}, model)
        layers = None if model is None else [l._desc() for l in model.layers]
        if config_file is not None:
            config_file = os.fspath(config_file)
        super().__init__(layers, args, config_file)
        self._model = model if model is not None else \
            _raw_model(self._identity, self._layers)

    @property
    def model(self):
        """The kvtier.Model the service holds state of."""
        return self._model

    @property
    def objects(self):
        """The object cache, or None with ``ram-tier.objects=false``."""
        return ObjectCache(self) if self._has_objects() else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        """close(), then stop the service's actors and let go of its SSD
        directory (a later call raises kvtier.ClosedError), as ``del``
        does."""
        try:
            if not self.closed:
                self.close()
        finally:
            self._shutdown()
        return False

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return f"<kvtier.Service {state} {self._model.identity!r}>"

    # --- asyncio forms: each returns a future on the running loop ----------

    def acquire_async(self, req, ns=""):
        return _aio.call(lambda done: self._acquire_then(req, ns, done))

    def peek_prefix_len_async(self, prompt, ns=""):
        return _aio.call(lambda d: self._peek_prefix_len_then(prompt, ns, d))

    def route_async(self, prompt, ns="", max_new_tokens=0):
        return _aio.call(
            lambda d: self._route_then(prompt, ns, max_new_tokens, d))

    def publish_async(self, req, tokens, layers, ns="", attachments=None):
        return _aio.call(lambda d: self._publish_then(
            req, tokens, layers, ns, attachments, d))

    def checkpoint_async(self, req, tokens, layers, ns=""):
        return _aio.call(
            lambda d: self._checkpoint_then(req, tokens, layers, ns, d))

    def keeps_async(self, req):
        return _aio.call(lambda d: self._keeps_then(req, d))

    def admit_async(self, req):
        return _aio.call(lambda d: self._admit_then(req, d))

    def fits_async(self, req):
        return _aio.call(lambda d: self._fits_then(req, d))

    def admit_queued_async(self, req):
        """Completes once admitted; cancelling it takes the request out of
        the queue (or returns its budget when it was admitted meanwhile)."""
        def withdraw():
            try:
                self._release_then(req, False, _ignore)
            except Exception:
                pass
        return _aio.call(lambda d: self._admit_queued_then(req, d),
                         on_cancel=withdraw)

    def release_async(self, req, completed):
        return _aio.call(lambda d: self._release_then(req, completed, d))

    def close_session_async(self, session):
        return _aio.call(lambda d: self._close_session_then(session, d))

    def prefetch_async(self, prompt, ns="", session=None):
        return _aio.call(lambda d: self._prefetch_then(prompt, ns, session, d))

    def flush_async(self):
        return _aio.call(self._flush_then)

    def close_async(self):
        return _aio.call(self._close_then)

    def boundary_async(self, want_bytes=None):
        return _aio.call(lambda d: self._boundary_then(want_bytes, d))

    def demote_idle_async(self, idle_ms):
        return _aio.call(lambda d: self._demote_idle_then(idle_ms, d))

    def stop_idle_demotion_async(self):
        return _aio.call(self._stop_idle_demotion_then)

    def stats_async(self):
        return _aio.call(self._stats_then)

    def report_async(self):
        return _aio.call(self._report_then)

    def saved_prefixes_async(self):
        return _aio.call(self._saved_prefixes_then)

    def set_ssd_limit_async(self, nbytes):
        return _aio.call(lambda d: self._set_ssd_limit_then(nbytes, d))

    def relieve_pressure_async(self, check):
        """The check runs on the loop's default executor thread (it is the
        engine's own code, run between the relief's rounds)."""
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(None, self.relieve_pressure, check)

    def subscribe_events_async(self, callback=None, timeout=None):
        """subscribe_events on the loop's default executor (it waits for
        the feed to confirm the subscription)."""
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(
            None, lambda: self.subscribe_events(callback, timeout))


class ObjectCache(_core.ObjectCache):
    """Exact tensor objects (encoder outputs) by exact key:
    ``put(key, {name: buffer})`` -> kept, ``get(key)`` -> ``{name:
    [Segment, ...]}`` or None; both also as ``*_async``."""

    def put_async(self, key, tensors):
        return _aio.call(lambda d: self._put_then(key, tensors, d))

    def get_async(self, key):
        return _aio.call(lambda d: self._get_then(key, d))
