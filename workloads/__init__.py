"""Client workloads: producers, consumers and final reads that record every operation in the history."""
