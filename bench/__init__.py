"""``make bench``: the scale scenarios, each beside an anchor measured in the same run.

``python -m bench [scenario ...] [--quick]``; results go to ``bench/results/``.
"""
