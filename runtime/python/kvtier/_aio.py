"""asyncio forms of kvtier's calls, built on the service's callback forms.

``call(start)`` makes a future on the running loop and starts the call with
a completion ``done(ok, value)`` that kvtier runs on one of its actor threads
(under the GIL). ``done`` hands the answer to the loop with
``call_soon_threadsafe``, so the future resolves on the loop's own thread.
No thread waits for the call. The completion holds the future (and so its
loop) only weakly: whoever awaits the future keeps it; a future nobody holds
any more is collected with its loop, and its answer is dropped (as is an
answer for a closed loop).
"""

import asyncio
import weakref

__all__ = ["call"]


def _settle(fut, ok, value):
    if fut.done():  # cancelled meanwhile
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


def call(start, on_cancel=None):
    """A future on the running loop for the call ``start(done)`` begins.
    ``on_cancel()`` runs when the future is cancelled, or collected while
    still pending (nobody can see its answer any more)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    ref = weakref.ref(fut)

    def done(ok, value):  # an actor thread, under the GIL
        f = ref()
        if f is None:  # nobody holds the future: nobody waits
            return
        try:
            f.get_loop().call_soon_threadsafe(_settle, f, ok, value)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    if on_cancel is not None:
        pending = [True]

        def finished(f):
            pending[0] = False
            if f.cancelled():
                on_cancel()

        def collected():
            if pending[0]:
                on_cancel()

        fut.add_done_callback(finished)
        weakref.finalize(fut, collected)
    start(done)
    return fut
