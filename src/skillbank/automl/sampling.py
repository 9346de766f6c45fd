"""Turn an Optuna trial into dotted-key values of the search space.

Weighted enums (option_weights) are sampled through one uniform variable mapped onto the
cumulative weights, so random search draws choices with the schema's weights and TPE still models
the variable; powers of two are searched as integer exponents.
"""

from __future__ import annotations

import math
from typing import Any

from skillbank.automl.space import Param, SearchSpace


def weighted_choice(choices: tuple[Any, ...], weights: tuple[float, ...], u: float) -> Any:
    total = sum(weights)
    edge = 0.0
    for choice, weight in zip(choices, weights):
        edge += weight / total
        if u < edge:
            return choice
    return choices[-1]


def suggest(trial: Any, param: Param) -> Any:
    name = param.key
    if param.kind in ("categorical", "bool"):
        if param.weights and len(set(param.weights)) > 1:
            value = weighted_choice(param.choices, param.weights, trial.suggest_float(f"{name}#u", 0.0, 1.0))
            trial.set_user_attr(name, value)
            return value
        return trial.suggest_categorical(name, list(param.choices))
    if param.pow2:
        lo, hi = math.ceil(math.log2(param.low)), math.floor(math.log2(param.high))
        value = 2 ** trial.suggest_int(f"{name}#log2", lo, hi)
        trial.set_user_attr(name, value)
        return value
    if param.kind == "int":
        return trial.suggest_int(name, int(math.ceil(param.low)), int(math.floor(param.high)), log=param.log)
    return trial.suggest_float(name, param.low, param.high, log=param.log)


def suggest_all(trial: Any, space: SearchSpace) -> dict[str, Any]:
    return {p.key: suggest(trial, p) for p in space.params}


def trial_values(trial: Any, space: SearchSpace) -> dict[str, Any]:
    """The dotted-key values of a finished trial (from its params and user attrs)."""
    out = {}
    for p in space.params:
        if p.key in trial.user_attrs:
            out[p.key] = trial.user_attrs[p.key]
        elif p.key in trial.params:
            out[p.key] = trial.params[p.key]
    return out


def enqueue_values(space: SearchSpace, values: dict[str, Any]) -> dict[str, Any]:
    """Optuna params that reproduce `values` (for enqueuing the baseline as trial 0); a null value is no
    param unless it is one of the choices (the baseline keeps it null and samples nothing for it)."""
    params: dict[str, Any] = {}
    for p in space.params:
        if p.key not in values or not holds(p, values[p.key]):
            continue
        value = values[p.key]
        if p.kind in ("categorical", "bool") and p.weights and len(set(p.weights)) > 1:
            total, edge = sum(p.weights), 0.0
            for choice, weight in zip(p.choices, p.weights):
                if choice == value:
                    params[f"{p.key}#u"] = (edge + weight / 2) / total
                    break
                edge += weight
        elif p.pow2:
            params[f"{p.key}#log2"] = int(round(math.log2(value)))
        elif p.kind != "categorical" or value in p.choices:
            params[p.key] = value
    return params


def holds(param: Param, value: Any) -> bool:
    """Can the parameter's Optuna distribution hold the value? A null only as one of a list of choices
    (a prompt search's "the default"); a null numeric base value is no parameter of the baseline."""
    return value is not None or (param.kind in ("categorical", "bool") and None in param.choices)
