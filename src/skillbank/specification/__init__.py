"""Typed spec models: the one source of every rule, schema, template and parameter table."""
