"""The live documents: reliability and ranking with their monitored decision, what a look at them records,
the pool-score history (written by the job queue's turn, not by reads), and certificates freezing a decision."""
