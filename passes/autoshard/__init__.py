"""Auto-sharding: the shardings a program leaves open, chosen by an integer
program over the partitioner's cost model (`auto-shard`)."""
