"""The nightly run without an orchestrator: configuration, plan, one fit, tables, cache, publishing."""
