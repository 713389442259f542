"""jurymeter: how far to trust a leaderboard scored by LLM judges."""

__version__ = "0.1.0"
