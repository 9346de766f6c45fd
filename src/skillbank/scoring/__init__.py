"""Answers scored against references (answers) and the statistics of scores, below evaluation, training and gaps."""
