"""The query side: open an index and search it by text or sparse vector (:mod:`lexray.search.api`), what an
index folder records (:mod:`lexray.search.locate`), document fields from the corpus (:mod:`lexray.search.corpus`)
(``lexray search`` itself is :mod:`lexray.commands.search`)."""

from lexray.search.api import Hit, Index, MatchedTerm, load_encoder, open_index

__all__ = ["Hit", "Index", "MatchedTerm", "load_encoder", "open_index"]
