"""Many tools: a toolset grown with distractor tools, and tool retrieval as a measured stage.

- :mod:`bench.toolspace.space`: the settings of one condition (:class:`ToolSpace`: tool
  count, retriever, top-k) and how they name it (``l3~tools=40~retriever=bm25~top_k=5``);
- :mod:`bench.toolspace.distractors`: a variant's tools plus seeded, stratified distractors
  from the other toolsets (:func:`expand_variant`);
- :mod:`bench.toolspace.retrieval`: BM25 and embedding retrievers picking the top-k tools of
  a query (:func:`retrieve`), and their tokenizer;
- :mod:`bench.toolspace.embedding`: the embedding model (the embedded GGUF, mean pooled);
- :mod:`bench.toolspace.setup`: what a run plans from them (:class:`SpaceSetup`);
- :mod:`bench.toolspace.signal`: retrieval recall@k per variant without any generation.

Imports go one way: descriptions and models below, the runner above.
"""

from bench.toolspace.space import RETRIEVERS, ToolSpace, space_grid

__all__ = ["RETRIEVERS", "ToolSpace", "space_grid"]
