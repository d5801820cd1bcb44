"""The live documents: reliability and ranking with their monitored decision, the pool-score history,
and certificates freezing a decision."""
