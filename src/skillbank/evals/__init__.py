"""Agent evals: each skill's evals/evals.json graded by checks a program runs on what an agent left behind.

`catalog` reads the evals, `workspace` builds a fresh workspace (setup steps, the prompt, the recording shim on
PATH: `shim`, whose invocations `transcript` reads back), `steps` and `checks` are the two registries of kinds
(one function per kind of specification/evals.py), `grade` grades a workspace, `runner` runs an agent command
over many evals. The command line is skillbank/commands/evals.py.
"""
