"""Imports from the tools labels already live in (eval frameworks, LLM-ops score exports) and the
generic long format, all written through one all-or-nothing path (:mod:`service.integrations.scores`)."""
