"""Families rendered to the text format once per change of their data, not once per scrape.

Why: the reactor's CD objects gauge has three series per cluster and source (6,000 at
1,000 clusters with Flux and Argo CD objects, 0.5 MB of text); prometheus_client formats
it again at every scrape, 40-90 ms of CPU, though it changes only when a CD pass finds
other counts. That CPU is taken from the requests answered meanwhile (bench/reactor_lists,
bench/RESULTS.md). The exporter writes its whole page once per cycle for the same reason
(``exporter.expose.render``).

How: a :class:`Prerendered` collector builds its families from data it is handed, and is
told when that data changed (:meth:`Prerendered.changed`). :func:`exposition` renders a
registry as ``generate_latest`` does, except that each :class:`Prerendered` collector of it
hands the text it rendered the first time it was asked since its last change, appended
after the rest. Anywhere else (``registry.get_sample_value``, another exposition) it
collects as any collector, so tests and tools read it as usual. Which collector is being
rendered by :func:`exposition` is said by a context variable, so two scrapes in two
threads do not mix their pages.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

#: The page :func:`exposition` is writing in this context: the prerendered texts it
#: gathered; None outside it.
_PAGE: ContextVar[list[bytes] | None] = ContextVar("prerendered_page", default=None)


class _Families(CollectorRegistry):
    """A registry of families already built, for ``generate_latest``."""

    def __init__(self, families: Sequence[Metric]) -> None:
        super().__init__(auto_describe=False)
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families


class Prerendered(Collector):
    """A collector whose text is rendered once per :meth:`changed`.

    Subclasses build their families in :meth:`families` from their current data, and call
    :meth:`changed` whenever that data is replaced by different data.
    """

    def __init__(self) -> None:
        self._generation = 0
        self._text: tuple[int, bytes] | None = None
        self._render_lock = threading.Lock()

    def families(self) -> Iterable[Metric]:
        raise NotImplementedError

    def changed(self) -> None:
        """The data changed: the next :func:`exposition` renders it again."""
        self._generation += 1

    def describe(self) -> list[Metric]:
        return []  # the families depend on the data: nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        page = _PAGE.get()
        if page is None:
            yield from self.families()
        else:
            page.append(self.text())

    def text(self) -> bytes:
        """The families in the text format, rendered again only after a change.

        A change while rendering leaves the text tagged with the generation read before
        it, so the next call renders again: never a text older than its tag.
        """
        with self._render_lock:  # two scrapes at once render it once
            generation = self._generation
            cached = self._text
            if cached is not None and cached[0] == generation:
                return cached[1]
            text = generate_latest(_Families(list(self.families())))
            self._text = (generation, text)
            return text


def exposition(registry: CollectorRegistry) -> bytes:
    """``generate_latest(registry)``, with each :class:`Prerendered` collector's text
    rendered once per change, at the end of the page."""
    page: list[bytes] = []
    token = _PAGE.set(page)
    try:
        body = generate_latest(registry)
    finally:
        _PAGE.reset(token)
    return body + b"".join(page)
