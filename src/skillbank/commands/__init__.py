"""The command line, on the top floor: one module per command group (argparse and the orchestration that
ties several rooms together), the flags shared between commands in `flags`. skillbank.cli's table names
the module of each command and imports only the one that runs; the rooms below know nothing of flags."""
