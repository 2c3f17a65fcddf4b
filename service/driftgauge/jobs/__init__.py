"""The job runtime: the clock, every recurring job, and what one reconcile run does."""
