"""Readers of other tools' files into :class:`~service.integrations.scores.Score` rows: promptfoo
results, Inspect AI eval logs, Langfuse score exports and LangSmith feedback exports.

Each names a bad file's field by its path in the file (``results.results[3].gradingResult``) and
decides which scorers are judges, which are humans and which (deterministic checks) are left
out; a scorer it does not know is a 422 unless the request names it in ``judges`` or ``humans``.
The formats and the versions they were checked against are in docs/integrations.md.
"""

from __future__ import annotations

import io
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from service.core.errors import Invalid, TooLarge, echo
from service.integrations.scores import Score, Skipped, value_text
from service.schemas.raters import RaterKind

Source = Literal["promptfoo", "inspect", "langfuse", "langsmith"]

PROMPTFOO_JUDGES = frozenset(
    {
        "llm-rubric",
        "model-graded-closedqa",
        "model-graded-factuality",
        "factuality",
        "g-eval",
        "answer-relevance",
        "context-faithfulness",
        "context-recall",
        "context-relevance",
        "conversation-relevance",
        "search-rubric",
        "select-best",
        "pi",
    }
)
"""promptfoo's model-graded assertion types: their grader is an LLM, a judge."""
PROMPTFOO_HUMANS = frozenset({"human"})
"""The assertion type of a rating given by hand in promptfoo's viewer."""
PROMPTFOO_CHECKS = frozenset(
    {
        "equals",
        "contains",
        "icontains",
        "contains-all",
        "contains-any",
        "icontains-all",
        "icontains-any",
        "starts-with",
        "regex",
        "is-json",
        "contains-json",
        "is-sql",
        "contains-sql",
        "is-xml",
        "contains-xml",
        "is-html",
        "contains-html",
        "javascript",
        "python",
        "webhook",
        "similar",
        "levenshtein",
        "rouge-n",
        "bleu",
        "gleu",
        "meteor",
        "latency",
        "cost",
        "perplexity",
        "perplexity-score",
        "classifier",
        "moderation",
        "is-refusal",
        "finish-reason",
        "word-count",
        "is-valid-openai-function-call",
        "is-valid-openai-tools-call",
        "is-valid-function-call",
        "guardrails",
        "assert-set",
    }
)
"""promptfoo's deterministic assertion types (and their ``not-`` forms): checks, not raters."""
INSPECT_JUDGES = frozenset({"model_graded_qa", "model_graded_fact"})
"""Inspect AI's model-graded scorers."""
INSPECT_CHECKS = frozenset(
    {"match", "includes", "pattern", "answer", "choice", "exact", "f1", "math", "expression_equivalance"}
)
"""Inspect AI's deterministic scorers."""
INSPECT_VALUES = {"C": "correct", "I": "incorrect", "P": "partial", "N": "noanswer"}
"""Inspect AI's letter values (CORRECT, INCORRECT, PARTIAL, NOANSWER) as words."""


@dataclass
class Roles:
    """Who is who, from the request: scorers named as judges or humans, and the kind an API-sourced
    score (Langfuse ``API``, LangSmith ``api``) has."""

    judges: frozenset[str] = frozenset()
    humans: frozenset[str] = frozenset()
    api_source: RaterKind | None = None
    score: str | None = None
    skipped: Counter[tuple[str, str]] = field(default_factory=Counter)

    def kind(
        self, scorer: str, known: tuple[frozenset[str], frozenset[str]], checks: frozenset[str], where: str
    ) -> RaterKind | None:
        """The kind of ``scorer``'s rater (the request's naming first, then the tool's ``known`` judges
        and humans), or ``None`` (counted as skipped) for a deterministic check."""
        if scorer in self.judges or (scorer in known[0] and scorer not in self.humans):
            return "judge"
        if scorer in self.humans or scorer in known[1]:
            return "human"
        if scorer in checks or scorer.removeprefix("not-") in checks:
            self.skipped[(scorer, "a deterministic check, not a rater")] += 1
            return None
        raise Invalid(
            f"{where}: unknown scorer {echo(scorer)}; name it in judges= or humans= to import it",
            code="unknown_scorer",
        )

    def skipped_list(self) -> list[Skipped]:
        return [Skipped(scorer=s, scores=n, reason=r) for (s, r), n in sorted(self.skipped.items())]


def _get(obj: Any, key: str, where: str, kind: type | tuple[type, ...], *, required: bool = True) -> Any:
    """``obj[key]`` checked to be a ``kind``; 422 naming ``where.key`` when it is missing or wrong."""
    value = obj.get(key) if isinstance(obj, dict) else None
    if value is None and not required:
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        got = "missing" if value is None else type(value).__name__
        raise Invalid(f"{where}.{key}: expected {names}, got {got}", code="wrong_schema")
    return value


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise Invalid(f"body is not valid JSON: {exc}", code="malformed_body") from None


def promptfoo_scores(body: bytes, roles: Roles) -> list[Score]:
    """Scores of a promptfoo results file (``promptfoo eval -o results.json``): one item per test
    case (and prompt and provider when there are several), one rater per graded assertion."""
    data = _json(body)
    outer = _get({"file": data}, "file", "body", dict)
    results = _get(_get(outer, "results", "body", dict), "results", "results", list)
    combos = {(r.get("promptIdx"), _provider(r)) for r in results if isinstance(r, dict)}
    scores: list[Score] = []
    for n, result in enumerate(results):
        where = f"results.results[{n}]"
        test = _get(result, "testIdx", where, int)
        item = str(test) if len(combos) == 1 else f"{test}:{result.get('promptIdx')}:{_provider(result)}"
        grading = _get(result, "gradingResult", where, dict, required=False)
        components = (
            [] if grading is None else _get(grading, "componentResults", f"{where}.gradingResult", list, required=False)
        )
        for k, component in enumerate(components or []):
            at = f"{where}.gradingResult.componentResults[{k}]"
            assertion = _get(component, "assertion", at, dict)
            kind_name = _get(assertion, "type", f"{at}.assertion", str)
            metric = assertion.get("metric") if isinstance(assertion.get("metric"), str) else None
            named = metric if metric in roles.judges | roles.humans else kind_name
            kind = roles.kind(named, (PROMPTFOO_JUDGES, PROMPTFOO_HUMANS), PROMPTFOO_CHECKS, at)
            if kind is None:
                continue
            passed = _get(component, "pass", at, bool)
            scores.append(
                Score(item, f"promptfoo-{metric or kind_name}", kind, "pass" if passed else "fail", None, "boolean", at)
            )
    return scores


def _provider(result: Any) -> str:
    provider = result.get("provider") if isinstance(result, dict) else None
    if isinstance(provider, dict):
        return str(provider.get("label") or provider.get("id") or "")
    return str(provider or "")


def _inspect_samples(body: bytes, max_bytes: int) -> list[tuple[str, Any]]:
    """The samples of an Inspect AI log, with where each was read: a ``.json`` log's ``samples``, or
    the ``samples/*.json`` entries of a ``.eval`` (zip) log."""
    if not body.startswith(b"PK\x03\x04"):
        samples = _get(_get({"file": _json(body)}, "file", "body", dict), "samples", "body", list)
        return [(f"samples[{n}]", s) for n, s in enumerate(samples)]
    try:
        archive = zipfile.ZipFile(io.BytesIO(body))
        entries = sorted(
            (i for i in archive.infolist() if i.filename.startswith("samples/") and i.filename.endswith(".json")),
            key=lambda i: i.filename,
        )
    except zipfile.BadZipFile as exc:
        raise Invalid(f"body is not a readable .eval (zip) log: {exc}", code="malformed_body") from None
    if sum(i.file_size for i in entries) > max_bytes:
        raise TooLarge(f"the log's samples unpack to more than {max_bytes:,} bytes", code="too_large")
    return [(e.filename, _json(archive.read(e))) for e in entries]


def inspect_scores(body: bytes, roles: Roles, *, max_bytes: int) -> list[Score]:
    """Scores of an Inspect AI eval log (``.json``, or ``.eval`` zip): one item per sample (and epoch
    when there are several), one rater per scorer."""
    samples = _inspect_samples(body, max_bytes)
    epochs = {s.get("epoch", 1) for _, s in samples if isinstance(s, dict)}
    scores: list[Score] = []
    for where, sample in samples:
        sid = _get(sample, "id", where, (str, int))
        epoch = _get(sample, "epoch", where, int, required=False) or 1
        item = str(sid) if len(epochs) <= 1 else f"{sid}#{epoch}"
        for scorer, score in (_get(sample, "scores", where, dict, required=False) or {}).items():
            at = f"{where}.scores.{scorer}"
            kind = roles.kind(scorer, (INSPECT_JUDGES, frozenset()), INSPECT_CHECKS, at)
            if kind is None:
                continue
            raw = _get(score, "value", at, (str, int, float, bool))
            text, scale = value_text(raw)
            if isinstance(raw, str) and raw in INSPECT_VALUES:
                text = INSPECT_VALUES[raw]
            scores.append(Score(item, f"inspect-{scorer}", kind, text, None, scale, at))
    return scores


def _records(body: bytes, wrapper: str) -> list[Any]:
    data = _json(body)
    if isinstance(data, dict) and wrapper in data:
        data = data[wrapper]
    if not isinstance(data, list):
        raise Invalid(f"body must be a JSON array of records or an object with {wrapper!r}", code="wrong_schema")
    return data


def langfuse_scores(body: bytes, roles: Roles) -> list[Score]:
    """Scores of a Langfuse score export (``GET /api/public/scores`` pages, ``data``, or an array):
    ``EVAL`` scores are the judge ``langfuse-eval``, ``ANNOTATION`` scores the human
    ``langfuse-user-<authorUserId>``; the item is the trace (``<traceId>/<observationId>`` for an
    observation's score)."""
    scores: list[Score] = []
    for n, record in enumerate(_records(body, "data")):
        where = f"data[{n}]"
        name = _get(record, "name", where, str)
        if roles.score is not None and name != roles.score:
            continue
        source = _get(record, "source", where, str)
        trace = _get(record, "traceId", where, str)
        observation = _get(record, "observationId", where, str, required=False)
        item = trace if observation is None else f"{trace}/{observation}"
        if source == "EVAL":
            rater, kind = "langfuse-eval", "judge"
        elif source == "ANNOTATION":
            rater, kind = f"langfuse-user-{_get(record, 'authorUserId', where, str)}", "human"
        elif source == "API" and roles.api_source is not None:
            rater, kind = "langfuse-api", roles.api_source
        elif source == "API":
            raise Invalid(f"{where}.source: an API score; say whose with api_source=judge or api_source=human")
        else:
            raise Invalid(f"{where}.source: unknown source {echo(source)} (ANNOTATION, EVAL or API)")
        data_type = _get(record, "dataType", where, str)
        if data_type == "CATEGORICAL":
            text, scale = _get(record, "stringValue", where, str), "categorical"
        elif data_type == "BOOLEAN":
            text, scale = ("true" if _get(record, "value", where, (int, float)) else "false"), "boolean"
        elif data_type == "NUMERIC":
            text, scale = value_text(_get(record, "value", where, (int, float)))
        else:
            raise Invalid(f"{where}.dataType: unknown data type {echo(data_type)} (NUMERIC, CATEGORICAL or BOOLEAN)")
        scores.append(Score(item, rater, kind, text, name, scale, where))  # type: ignore[arg-type]
    return scores


def langsmith_scores(body: bytes, roles: Roles) -> list[Score]:
    """Scores of a LangSmith feedback export (``list_feedback`` records): ``model`` feedback is the
    judge ``langsmith-model``, ``app`` feedback the human ``langsmith-user-<user_id>``; the item is
    the run."""
    scores: list[Score] = []
    for n, record in enumerate(_records(body, "feedback")):
        where = f"feedback[{n}]"
        key = _get(record, "key", where, str)
        if roles.score is not None and key != roles.score:
            continue
        run = _get(record, "run_id", where, str)
        source = _get(record, "feedback_source", where, dict)
        kind_name = _get(source, "type", f"{where}.feedback_source", str)
        if kind_name == "model":
            rater, kind = "langsmith-model", "judge"
        elif kind_name == "app":
            user = _get(source, "user_id", f"{where}.feedback_source", str)
            rater, kind = f"langsmith-user-{user}", "human"
        elif kind_name == "api" and roles.api_source is not None:
            rater, kind = "langsmith-api", roles.api_source
        elif kind_name == "api":
            raise Invalid(
                f"{where}.feedback_source.type: api feedback; say whose with api_source=judge or api_source=human"
            )
        else:
            raise Invalid(f"{where}.feedback_source.type: unknown source {echo(kind_name)} (model, app or api)")
        value = record.get("value")
        if isinstance(value, str):
            text, scale = value, "categorical"
        else:
            text, scale = value_text(_get(record, "score", where, (bool, int, float)))
        scores.append(Score(run, rater, kind, text, key, scale, where))  # type: ignore[arg-type]
    return scores
