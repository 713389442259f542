"""Pairwise judging: games and their two presentation orders, position bias, judge
agreement, Bradley-Terry ratings with prompt-clustered intervals, family-conditioned
preference and the pairwise G-study.

Every function takes polars frames or numpy arrays and returns frames, arrays or
frozen dataclasses; none reads a file. The common input is the *games* frame of
:func:`jurymeter.stats.pairwise.games.games` (one row per stored judgment) and the
*outcomes* frame of :func:`jurymeter.stats.pairwise.games.reconcile` (one row per
(item, unordered pair, judge, generation, replicate), both orders reconciled).

Bradley-Terry is :mod:`~jurymeter.stats.pairwise.bradley_terry` (its model, batched
refits and length control in ``bt_model``, ``bt_resample`` and ``bt_length``);
family preference :mod:`~jurymeter.stats.pairwise.family` (its estimation and its
tests in ``family_support`` and ``family_tests``).
"""
