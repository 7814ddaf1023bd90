"""asyncio forms of kvtier's calls, built on the service's callback forms.

``call(start)`` makes a future on the running loop and starts the call with
a completion ``done(ok, value)`` that kvtier runs on one of its actor threads
(under the GIL). ``done`` hands the answer to the loop with
``call_soon_threadsafe``, so the future resolves on the loop's own thread.
No thread waits for the call. The completion holds the future (and so its
loop) only while it is pending: once the future is settled or cancelled it
lets go, and an answer for a closed loop is dropped.
"""

import asyncio

__all__ = ["call"]


def _settle(fut, ok, value):
    if fut.done():  # cancelled meanwhile
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


def call(start, on_cancel=None):
    """A future on the running loop for the call ``start(done)`` begins;
    ``on_cancel()`` runs (on the loop) when the future is cancelled."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    slot = [fut]

    def done(ok, value):  # an actor thread, under the GIL
        f = slot[0]
        if f is None:
            return
        slot[0] = None
        try:
            f.get_loop().call_soon_threadsafe(_settle, f, ok, value)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def finished(f):
        slot[0] = None
        if on_cancel is not None and f.cancelled():
            on_cancel()

    fut.add_done_callback(finished)
    start(done)
    return fut
