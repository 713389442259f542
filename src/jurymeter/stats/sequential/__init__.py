"""Sequential judging: serial dependence, batch plans."""
