"""Labels in hand as the planner's code matrix: building it, each worker's kept copies brought up to
date from the label events, snapshots on disk, shared memory for child processes, and modal strata."""
