"""Agent episodes: a case run through the whole tool loop (BRIEF §10).

The model answers, its calls run on the reference executor against the episode's own copy of
the backend database, the results go back in the provider's native format, and the loop
repeats until a final answer, the step limit or the loop guard. Modules, in data-flow order:
:mod:`~bench.episodes.factors` (what the model is shown of results and errors),
:mod:`~bench.episodes.state` (the private database and its checks),
:mod:`~bench.episodes.loop` (the loop), :mod:`~bench.episodes.scoring` (the metrics).
"""
