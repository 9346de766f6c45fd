"""Read an AutoML on/off wish ("turn off AutoML", "no HPO", "plain training") and an RL wish ("GRPO on
my SFT checkpoint", "no RL, just SFT") from a free-text request.

The request is normalised (case, punctuation, contractions, spelling variants), then every mention
of AutoML / HPO / hyperparameter search is judged by the words around it, and every "plain
training"-style phrase counts as off. A negation flips the verb it precedes ("don't disable
AutoML" is on, "don't use AutoML" is off). When signals conflict the last one wins, the way
people correct themselves ("use AutoML... actually, no AutoML").
"""

from __future__ import annotations

import re

_REWRITES = (
    (r"[’`´]", "'"),
    (r"\bautoml[_ -]?policy\b", " automl "),
    (r"\bauto[\s_-]?ml\b", " automl "),
    (r"\bhyper[\s_-]?param(eter)?s?\b", " hyperparameter "),
    (r"\bh[\s_-]?param(s)?\b", " hyperparameter "),
    (r"\bh\.?p\.?o\b", " hpo "),
    (r"\bfine[\s_-]?tun(e|ing)\b", " finetune "),
    (r"\b(do|does|did|should|would|could|can|will|must)\s*n[o']?t\b", " not "),
    (r"\b(don|doesn|didn|shouldn|wouldn|couldn|won|can)'?t\b", " not "),
    (r"\bcannot\b", " not "),
    (r"\bw/o\b", " without "),
    (r"\b(turn|switch|shut|turned|switched|switching|turning)\s+(it\s+|the\s+)?off\b", " disable "),
    (r"\b(turn|switch|turned|switched|switching|turning)\s+(it\s+|the\s+)?on\b", " enable "),
    (r"\bopt(ing)?\s+out\s+of\b", " without "),
    (r"\brather\s+not\b", " not "),
    (r"\binstead\s+of\b", " not "),
)
_OBJECTS = {"automl", "hpo", "hyperparameter", "sweep", "sweeps", "tuning"}
_OFF_BEFORE = {"disable", "disabled", "disabling", "skip", "skipping", "skipped", "without", "no", "avoid", "bypass",
               "deactivate", "forgo", "drop", "exclude", "excluding", "minus", "nor", "none"}
_ON_BEFORE = {"use", "using", "enable", "enabled", "run", "running", "with", "want", "keep", "do", "need", "try",
              "apply", "please", "via", "through", "perform", "launch", "start", "include", "including"}
_OFF_AFTER = {"off", "disabled", "skipped", "false", "0", "none", "no", "not", "never", "unnecessary", "unneeded"}
_ON_AFTER = {"on", "enabled", "auto", "true", "1", "yes"}
_NEGATIONS = {"not", "never", "no"}
_PLAIN = re.compile(
    r"\b(plain|vanilla|simple|direct|basic|regular|normal|straight)\s+(sft\s+)?(training|train|finetune|sft|run)\b"
    r"|\btrain(ing)?\s+(it\s+|the\s+model\s+)?directly\b|\bjust\s+(train|finetune|sft)\b|\bdirect\s+model\s+training\b"
)


def normalise(text: str) -> list[str]:
    t = text.lower()
    for pattern, repl in _REWRITES:
        t = re.sub(pattern, repl, t)
    t = re.sub(r"[^a-z0-9_ ]+", " ", t)
    return t.split()


def _negated(tokens: list[str], i: int, lookback: int = 2, words: frozenset[str] | set[str] = _NEGATIONS) -> bool:
    return any(tokens[j] in words for j in range(max(0, i - lookback), i))


def signals(text: str) -> list[tuple[int, str]]:
    """(position, "on"|"off") for each judgement the request makes, in text order."""
    tokens = normalise(text)
    found: list[tuple[int, str]] = []
    for i, tok in enumerate(tokens):
        if tok not in _OBJECTS:
            continue
        verdict = None
        for j in range(i - 1, max(-1, i - 5), -1):  # nearest verb before the object decides
            word = tokens[j]
            if word in _OFF_BEFORE:
                verdict = "on" if word != "no" and _negated(tokens, j, words={"not", "never"}) else "off"
                break
            if word in _ON_BEFORE:
                verdict = "off" if _negated(tokens, j) else "on"
                break
            if word in ("not", "never"):
                verdict = "off"
                break
        if verdict is None:
            for word in tokens[i + 1 : i + 4]:
                if word in _OFF_AFTER:
                    verdict = "off"
                    break
                if word in _ON_AFTER:
                    verdict = "on"
                    break
                if word in _OBJECTS:
                    break
        if verdict:
            found.append((i, verdict))
    joined = " ".join(tokens)
    for match in _PLAIN.finditer(joined):
        pos = len(joined[: match.start()].split())
        negated = (pos >= 1 and tokens[pos - 1] in _NEGATIONS) or (pos >= 2 and tokens[pos - 2] in ("not", "never"))
        found.append((pos, "on" if negated else "off"))
    return sorted(found)


def policy_from_request(text: str | None) -> str | None:
    """"off", "auto", or None when the request says nothing about AutoML."""
    if not text:
        return None
    found = signals(text)
    if not found:
        return None
    return "off" if found[-1][1] == "off" else "auto"


# ---- RL (the rl action: GRPO) ---------------------------------------------------------------------

_RL_REWRITES = (
    (r"\bcosmos[\s_-]?rl\b", " cosmosrl "),  # the backend's name is no wish for RL
    (r"\breinforcement[\s_-]+(learning|fine[\s_-]?tun(e|ing)|training)\b", " rl "),
    (r"\b(grpo|gspo|dapo|rlvr)\b", " rl "),
)
_NOT_RL_OBJECTS = {"sft", "plain", "just", "finetune", "supervised", "automl", "hpo"}
_RL_OFF_AFTER = {"off", "disabled", "skipped", "not", "isn", "aren", "unnecessary", "unneeded", "later"}


def rl_signals(text: str) -> list[tuple[int, bool]]:
    """(position, wants RL) for each mention of RL / GRPO / reinforcement learning, in text order: the
    nearest verb before it decides, as for AutoML ("no RL", "don't run GRPO", "SFT instead of RL" say no;
    "then RL", "run GRPO" say yes); a mention with no verb is a wish for it."""
    t = text.lower()
    for pattern, repl in _RL_REWRITES:
        t = re.sub(pattern, repl, t)
    tokens = normalise(t)
    found: list[tuple[int, bool]] = []
    for i, tok in enumerate(tokens):
        if tok != "rl":
            continue
        wants = True
        for j in range(i - 1, max(-1, i - 5), -1):
            word = tokens[j]
            if word in _OFF_BEFORE:
                wants = word != "no" and _negated(tokens, j, words={"not", "never"})
                break
            if word in _ON_BEFORE:
                wants = not _negated(tokens, j, lookback=1)  # "no AutoML, use GRPO": the "no" is AutoML's
                break
            if word in ("not", "never"):
                wants = False
                break
            if word in _OBJECTS or word in ("rl", "sft", "then", "after", "and"):
                break  # another subject ("no AutoML, GRPO ...") or a sequence ("SFT, then RL")
        else:
            for k in range(i + 1, min(len(tokens), i + 3)):
                if tokens[k] == "not" and k + 1 < len(tokens) and tokens[k + 1] in _NOT_RL_OBJECTS:
                    break  # "RL instead of SFT" (-> "rl not sft"): the negation is SFT's
                if tokens[k] in _RL_OFF_AFTER:
                    wants = False
                    break
        found.append((i, wants))
    return found


def rl_from_request(text: str | None) -> bool | None:
    """True when the request asks for RL (GRPO, reinforcement learning), False when it declines it,
    None when it says nothing about it. The last mention wins."""
    if not text:
        return None
    found = rl_signals(text)
    return found[-1][1] if found else None


# ---- data in (skillbank data import) ---------------------------------------------------------------

_DATA_OBJECTS = r"(data\s*set|data|clips?|videos?|labels?|annotations?|parquet|csv|jsonl|hugging\s*face|hf)"
_DATA_IN = re.compile(
    r"\b(convert|converting|import|importing|ingest|ingesting|reformat|transform|bring\s+in)\b"
    r"(?:\s+(?!(model|checkpoint|ckpt|weights|adapter)s?\b)\S+){0,3}?\s+" + _DATA_OBJECTS + r"\b"
    r"|\b(to|into|in)\s+(the\s+)?llava(\s+format)?\b"
    r"|\bget\s+(the\s+|my\s+|our\s+)?data\s+in\b"
)


def data_import_from_request(text: str | None) -> bool:
    """True when the request asks to convert or import a dataset ("convert my dataset", "import my
    HF dataset", "my clips and label files into LLaVA"): its first step is `skillbank data import`.
    A negated verb ("don't convert the data") is no such request."""
    if not text:
        return False
    t = " ".join(normalise(text))
    for match in _DATA_IN.finditer(t):
        before = t[: match.start()].split()[-2:]
        if not any(word in _NEGATIONS for word in before):
            return True
    return False


# ---- DEFT (improve a model with more data from a pool) ------------------------------------------------

_DATA = r"(training\s+)?(data|examples|samples|records|clips|videos|footage)"
_DEFT_PHRASES = re.compile(
    r"\bdeft\b"
    r"|\bmin(e|es|ing)\s+((my|the|our|a|that|this)\s+)?(\w+\s+)?pool\b"  # "mine my pool", "mining the video pool"
    r"|\bpool\s+(of\s+\w+\s+)?(for|to\s+find)\b"  # "use my pool for the gaps"
    rf"|\b(from|in|out\s+of)\s+((my|the|our|a|that|this)\s+)?(\w+\s+)?pool\b"  # "more clips from the pool"
    rf"|\b(fix|fixes|fixing|improve|improving|patch|patching|close|closing|address)\s+(it|this|that|them|those|the\s+\w+|its\s+\w+)?\s*"
    rf"(with|using|by\s+adding|by\s+mining)\s+(more|extra|additional|new|targeted|mined)\s+{_DATA}\b"  # "fix it with more data"
    rf"|\b(data\s+mining|mine\s+(more\s+)?{_DATA}|mined\s+{_DATA}|active\s+data\s+selection|gap\s+mining)\b"
)
_FAILS = re.compile(r"\b(keeps?|kept|still)\s+(failing|getting\s+\w+\s+wrong|missing|fails?|confusing|mixing\s+up)\b|\bfails?\s+on\b|\bfailures?\s+on\b|\bweak\s+(on|at)\b")
_MORE_DATA = re.compile(rf"\b(more|extra|additional|new|targeted)\s+{_DATA}\b")
_POOL = re.compile(r"\bpool\b")
_IMPROVE = re.compile(r"\b(fix|fixes|fixing|improve|improving|better|gaps?|fail\w*|weak\w*|wrong|mistakes?|errors?)\b")
_DEFT_DECLINED = {"no", "not", "without", "skip", "never", "disable"}


def deft_from_request(text: str | None) -> bool | None:
    """True when the request asks to improve the model with more data from a pool ("mine my pool",
    "it keeps failing on X, fix it with more data", "run DEFT"): the DEFT loop, not AutoML. False when
    it declines it ("no DEFT", "without mining the pool"); None when it says nothing of it. A request
    that names failures and more data ("keeps failing on left turns ... more data") counts as DEFT."""
    if not text:
        return None
    joined = " ".join(normalise(text))
    match = _DEFT_PHRASES.search(joined)
    if match is None and _FAILS.search(joined) and _MORE_DATA.search(joined):
        match = _MORE_DATA.search(joined)  # "keeps failing on X ... more data"
    if match is None and _IMPROVE.search(joined) and _POOL.search(joined):
        match = _POOL.search(joined)  # "use my pool to fix the gaps"
    if match is None:
        return None
    before = joined[: match.start()].split()[-2:]
    return not any(word in _DEFT_DECLINED for word in before)


_FAILING_ON = re.compile(r"\b(?:failing|fails?|failures?|weak|mistakes?|errors?)\s+(?:on|at|with)\s+(?:the\s+|its\s+|my\s+)?([a-z][\w-]*(?:\s+[a-z][\w-]*)?)"
                         r"|\b(?:getting|gets?|got|confusing|confuses?|mixing\s+up|mixes\s+up)\s+(?:the\s+)?([a-z][\w-]*(?:\s+[a-z][\w-]*)?)\s+(?:wrong|up)?")
_NOT_A_FAMILY = {"it", "this", "that", "them", "those", "all", "everything", "some", "a", "an", "my", "our", "data", "test", "benchmark"}
_AFTER_FAMILY = {"and", "so", "but", "from", "with", "in", "fix", "please", "mine", "more", "retrain", "train", "use", "using", "add", "wrong",
                 "up", "again", "now", "too", "can", "could", "would", "need", "needs", "questions", "clips", "videos", "i", "we", "you", "they",
                 "it", "there", "is", "are", "has", "have"}


def failing_on(text: str | None) -> str | None:
    """What a request says the model fails on ("keeps failing on directionality" -> "directionality", "weak at left turns" ->
    "left turns", "keeps getting colours wrong" -> "colours"): the words, beside the DEFT step's --adopt-on FAMILY (the
    pool's family names may differ: `skillbank data stats` lists them)."""
    if not text:
        return None
    match = _FAILING_ON.search(" ".join(normalise(text)))
    if match is None:
        return None
    words = [w for w in (match.group(1) or match.group(2)).split() if w not in _NOT_A_FAMILY]
    stop = next((i for i, w in enumerate(words) if w in _AFTER_FAMILY), len(words))
    return " ".join(words[:stop]) or None


# ---- sizing (skillbank plan) and the layout a request asks for -----------------------------------------

_UNITS = r"(gpus?|nodes?|gpu\s+hours?|hours?|days?|minutes?|steps?|epochs?|h100s?|h200s?|a100s?|b200s?)"
_SIZING = re.compile(
    rf"\bhow\s+many\s+{_UNITS}\b"
    r"|\bhow\s+long\b"
    r"|\bhow\s+much\s+(gpu\s+)?(memory|vram|ram|disk|storage|space|time|compute|gpu)\b"
    r"|\b(does|do|will|would|can|could|is|if|whether)\s+(\S+\s+){0,6}?(fit|fits|oom|ooms)\b"
    r"|\b(fit|fits)\s+(in|on|into)\s+(\S+\s+){0,3}?(memory|gpus?|nodes?|vram|h100s?|h200s?|a100s?|b200s?|\d+\s*gb)\b"
    r"|\benough\s+(gpu\s+)?(memory|vram|gpus?|disk)\b"
    r"|\b(estimate|estimated|estimating|size|sizing|plan|planning)\s+(\S+\s+){0,2}?"
    r"(gpus?|memory|vram|time|hours|cost|run|job|disk|layout|resources|compute)\b"
    r"|\b(gpu\s+hours?|wall\s*(clock\s+)?time|time\s+estimate|memory\s+estimate|memory\s+per\s+gpu|time\s+to\s+train)\b"
    r"|\bplan(ning)?\s+(?!(is|was|to)\b)(\S+\s+){0,2}?(sft|training|train|finetune|lora|rl|fine\s+tuning)\b"  # "plan LoRA SFT of the 8B"
)


def plan_from_request(text: str | None) -> bool:
    """True when the request asks how many GPUs, how long, or whether it fits ("how many GPUs do I need
    for 50k clips", "will the 8B fit on one node", "how long will 3 epochs take"), or for a plan of the
    training ("plan LoRA SFT of the 8B on one GPU"): `skillbank plan` answers it. A negated mention ("not how long it takes") is no such question."""
    if not text:
        return False
    joined = " ".join(normalise(text))
    for match in _SIZING.finditer(joined):
        before = joined[: match.start()].split()[-2:]
        if not any(word in ("not", "never", "without") for word in before):
            return True
    return False


GPUS_PER_NODE = 8  # a node of the bank's GPUs (H100 / H200 / A100 / B200 servers hold 8)
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "eight": 8, "ten": 10, "sixteen": 16, "single": 1}
_GPU_WORD = r"(?:gpus?|h100s?|h200s?|a100s?|b200s?)"
_NODES = re.compile(r"\b(\d+|" + "|".join(_NUMBER_WORDS) + r")\s+"  # "4 nodes", "two 8 gpu nodes", "4 dgx nodes"; not "an 8 gpu node"
                    rf"(?!(?:x\s+)?{_GPU_WORD}\b)(?:(?:x\s+)?(?:\d+\s+)?(?:x\s+)?(?:{_GPU_WORD}|\w+)\s+)?(nodes?|machines|servers|hosts)\b")
_MULTI = re.compile(r"\b(multi\s*node|multiple\s+nodes|several\s+nodes|many\s+nodes|across\s+nodes|more\s+than\s+one\s+node)\b")
_GPUS = re.compile(r"\b(\d+)\s+(x\s+)?(\w+\s+)?(gpus|h100s|h200s|a100s|b200s)\b")


def nodes_from_request(text: str | None) -> tuple[int | None, str]:
    """(nodes the request asks to train on, the words that say so): "on 4 nodes" 4, "multi-node" 2 (at
    least), "on 32 GPUs" 4 (GPUS_PER_NODE a node); (None, "") when it names no layout."""
    if not text:
        return None, ""
    joined = " ".join(normalise(text))
    if m := _NODES.search(joined):
        count = m[1]
        return (int(count) if count.isdigit() else _NUMBER_WORDS[count]), m[0]
    if m := _MULTI.search(joined):
        return 2, m[0]
    if (m := _GPUS.search(joined)) and int(m[1]) > GPUS_PER_NODE:
        return -(-int(m[1]) // GPUS_PER_NODE), f"{m[0]} (more than {GPUS_PER_NODE} GPUs: more than one {GPUS_PER_NODE}-GPU node)"
    return None, ""
