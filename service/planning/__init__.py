"""Plans and what follows from them: recipes and designs, each secondary's planned list, feature
strata, and batch leases."""
