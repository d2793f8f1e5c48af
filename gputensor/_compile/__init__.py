"""``gt.compile``: capture a function's kernels once, replay them without the op frontends.

``state`` is the one piece the rest of the package imports (a capture in progress, read by
the places that must tell it about themselves); ``capture``, ``program`` and ``compiled`` load
when ``gt.compile`` is first used.
"""
