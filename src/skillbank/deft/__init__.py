"""The DEFT loop: evaluate on proxy + frozen benchmark -> gaps (proxy) -> mine the pool (embeddings +
FAISS) -> curate -> retrain -> evaluate, round by round, with a state file, a regression guard, a stop
rule and a report. `skillbank deft --config FILE`; the config model is skillbank.specification.deft.DeftConfig."""
