"""Fault injection: kill, pause, partition and power-loss faults and the schedule that drives them."""
