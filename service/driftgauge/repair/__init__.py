"""Safe repair: watermarks, consumers and their read log, backfills, rerun probes, breaches."""
