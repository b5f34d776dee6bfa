"""Label selectors: ``k8s.io/apimachinery/pkg/labels`` and ``metav1.LabelSelectorAsSelector``.

Two spellings compile to the same :class:`Requirement` list and the same matchers:

- the structured ``LabelSelector`` of PDBs, spread constraints, affinity terms and policy args
  (:func:`compile_label_selector`);
- the string syntax of ``--node-selector`` / ``nodeSelector: "a=b,c in (x,y),!d"``
  (:func:`parse_selector_string`).

Semantics, as upstream: requirements are ANDed; ``NotIn``/``!=``/``DoesNotExist`` match a missing
key; ``In``/``=``/``Exists``/``Gt``/``Lt`` do not; ``Gt``/``Lt`` compare the label value parsed as a
base-10 int64 (a label that is not one does not match). Keys must be qualified names and values
valid label values, and every operator has its value-count rule; a violation is a
:class:`SelectorError` naming the requirement.

Compiled matchers are cached: selectors repeat across thousands of pods. The structured cache is
keyed by object identity (holding a reference, so an id is never reused while cached) and then by
the selector's msgpack encoding, so equal selectors share one matcher. Selectors are treated as
immutable once compiled.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from desched.k8s._compile_cache import CompileCache
from desched.k8s.objects import LabelSelector

__all__ = [
    "OP_DOES_NOT_EXIST",
    "OP_DOUBLE_EQUALS",
    "OP_EQUALS",
    "OP_EXISTS",
    "OP_GT",
    "OP_IN",
    "OP_LT",
    "OP_NOT_EQUALS",
    "OP_NOT_IN",
    "Matcher",
    "Requirement",
    "SelectorError",
    "compile_label_selector",
    "label_selector_requirements",
    "labels_match",
    "match_everything",
    "match_nothing",
    "new_requirement",
    "parse_int64",
    "parse_requirements",
    "parse_selector_string",
    "requirements_matcher",
    "validate_label_key",
    "validate_label_selector",
    "validate_label_value",
]

Matcher = Callable[[Mapping[str, str]], bool]


class SelectorError(ValueError):
    """An invalid label selector (structured or string)."""


# Operators of k8s.io/apimachinery/pkg/selection, spelled as there.
OP_IN = "in"
OP_NOT_IN = "notin"
OP_EQUALS = "="
OP_DOUBLE_EQUALS = "=="
OP_NOT_EQUALS = "!="
OP_EXISTS = "exists"
OP_DOES_NOT_EXIST = "!"
OP_GT = "gt"
OP_LT = "lt"

_VALID_OPERATORS = (
    OP_IN,
    OP_NOT_IN,
    OP_EQUALS,
    OP_DOUBLE_EQUALS,
    OP_NOT_EQUALS,
    OP_GT,
    OP_LT,
    OP_EXISTS,
    OP_DOES_NOT_EXIST,
)

# metav1.LabelSelectorOperator → selection operator.
_LABEL_SELECTOR_OPERATORS = {
    "In": OP_IN,
    "NotIn": OP_NOT_IN,
    "Exists": OP_EXISTS,
    "DoesNotExist": OP_DOES_NOT_EXIST,
}

# --------------------------------------------------------------------------- validation

_QUALIFIED_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INT64_RE = re.compile(r"[+-]?[0-9]+")
_MIN_INT64 = -(1 << 63)
_MAX_INT64 = (1 << 63) - 1

_NAME_CHARS_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def parse_int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: optional sign, ASCII digits, int64 range; else None."""
    if _INT64_RE.fullmatch(text) is None:
        return None
    value = int(text)
    if value < _MIN_INT64 or value > _MAX_INT64:
        return None
    return value


def validate_label_key(key: str) -> str | None:
    """Why ``key`` is not a valid label key (a qualified name), or None if it is."""
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return "prefix part must be non-empty"
        if len(prefix) > 253:
            return "prefix part must be no more than 253 characters"
        if _DNS1123_SUBDOMAIN_RE.fullmatch(prefix) is None:
            return (
                "prefix part must be a lowercase RFC 1123 subdomain: lower case alphanumeric "
                "characters, '-' or '.', starting and ending with an alphanumeric character"
            )
    else:
        return (
            "a qualified name has at most one '/' "
            "(an optional DNS subdomain prefix, e.g. 'example.com/MyName')"
        )
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if _QUALIFIED_NAME_RE.fullmatch(name) is None:
        return f"name part {_NAME_CHARS_MSG}"
    return None


def validate_label_value(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or None if it is (the empty string is valid)."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if _LABEL_VALUE_RE.fullmatch(value) is None:
        return f"a valid label value must be empty or {_NAME_CHARS_MSG}"
    return None


# --------------------------------------------------------------------------- requirements


@dataclass(frozen=True, slots=True)
class Requirement:
    """One validated requirement: ``key``, a selection operator (``OP_*``) and its values."""

    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return _requirement_check(self)(labels)


def new_requirement(key: str, operator: str, values: Sequence[str] = ()) -> Requirement:
    """``labels.NewRequirement``: validate and build a requirement, or raise SelectorError."""
    problems: list[str] = []
    why = validate_label_key(key)
    if why is not None:
        problems.append(f"key {key!r}: {why}")
    n = len(values)
    if operator in (OP_IN, OP_NOT_IN):
        if n == 0:
            problems.append("for 'in', 'notin' operators, values set can't be empty")
    elif operator in (OP_EQUALS, OP_DOUBLE_EQUALS, OP_NOT_EQUALS):
        if n != 1:
            problems.append("exact-match compatibility requires one single value")
    elif operator in (OP_EXISTS, OP_DOES_NOT_EXIST):
        if n != 0:
            problems.append("values set must be empty for exists and does not exist")
    elif operator in (OP_GT, OP_LT):
        if n != 1:
            problems.append("for 'Gt', 'Lt' operators, exactly one value is required")
        for v in values:
            if parse_int64(v) is None:
                problems.append(f"for 'Gt', 'Lt' operators, the value must be an integer, got {v!r}")
    else:
        problems.append(f"operator {operator!r} is not supported (supported: {', '.join(_VALID_OPERATORS)})")
    for v in values:
        why = validate_label_value(v)
        if why is not None:
            problems.append(f"value {v!r} for key {key!r}: {why}")
    if problems:
        raise SelectorError("; ".join(problems))
    return Requirement(key, operator, tuple(values))


def _requirement_check(r: Requirement) -> Matcher:
    key = r.key
    op = r.operator
    if op in (OP_IN, OP_EQUALS, OP_DOUBLE_EQUALS):
        if len(set(r.values)) == 1:
            only = r.values[0]
            return lambda labels: labels.get(key) == only
        values = frozenset(r.values)

        def is_in(labels: Mapping[str, str]) -> bool:
            v = labels.get(key)
            return v is not None and v in values

        return is_in
    if op in (OP_NOT_IN, OP_NOT_EQUALS):
        if len(set(r.values)) == 1:
            only = r.values[0]
            return lambda labels: labels.get(key) != only
        values = frozenset(r.values)

        def not_in(labels: Mapping[str, str]) -> bool:
            v = labels.get(key)
            return v is None or v not in values

        return not_in
    if op == OP_EXISTS:
        return lambda labels: key in labels
    if op == OP_DOES_NOT_EXIST:
        return lambda labels: key not in labels
    if op in (OP_GT, OP_LT):
        bound = parse_int64(r.values[0]) if len(r.values) == 1 else None
        if bound is None:
            return match_nothing
        greater = op == OP_GT

        def compare(labels: Mapping[str, str]) -> bool:
            v = labels.get(key)
            if v is None:
                return False
            n = parse_int64(v)
            if n is None:
                return False
            return n > bound if greater else n < bound

        return compare
    return match_nothing


def match_everything(labels: Mapping[str, str]) -> bool:
    """The selector that matches every label set."""
    return True


def match_nothing(labels: Mapping[str, str]) -> bool:
    """The selector that matches no label set."""
    return False


def requirements_matcher(requirements: Sequence[Requirement]) -> Matcher:
    """A matcher for the AND of ``requirements`` (none: everything)."""
    if not requirements:
        return match_everything
    if all(
        r.operator in (OP_IN, OP_EQUALS, OP_DOUBLE_EQUALS) and len(set(r.values)) == 1 for r in requirements
    ):
        pairs = tuple((r.key, r.values[0]) for r in requirements)
        if len(pairs) == 1:
            ((key, value),) = pairs
            return lambda labels: labels.get(key) == value

        def all_equal(labels: Mapping[str, str]) -> bool:
            for k, v in pairs:  # noqa: SIM110 -- hot path: a loop beats all() over a generator
                if labels.get(k) != v:
                    return False
            return True

        return all_equal
    checks = tuple(_requirement_check(r) for r in requirements)
    if len(checks) == 1:
        return checks[0]

    def all_match(labels: Mapping[str, str]) -> bool:
        for check in checks:  # noqa: SIM110 -- hot path
            if not check(labels):
                return False
        return True

    return all_match


def labels_match(required: Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    """``labels.SelectorFromSet(required).Matches(labels)``: every pair present and equal."""
    if required:
        for k, v in required.items():
            if labels.get(k) != v:
                return False
    return True


# --------------------------------------------------------------------------- structured selectors


def label_selector_requirements(sel: LabelSelector) -> list[Requirement]:
    """The requirements of a LabelSelector (``LabelSelectorAsSelector``), validated."""
    out: list[Requirement] = []
    for k, v in (sel.match_labels or {}).items():
        try:
            out.append(new_requirement(k, OP_EQUALS, (v,)))
        except SelectorError as e:
            raise SelectorError(f"matchLabels[{k}]: {e}") from None
    for i, expr in enumerate(sel.match_expressions or ()):
        op = _LABEL_SELECTOR_OPERATORS.get(expr.operator)
        if op is None:
            raise SelectorError(
                f"matchExpressions[{i}]: {expr.operator!r} is not a valid label selector operator "
                "(valid: In, NotIn, Exists, DoesNotExist)"
            )
        try:
            out.append(new_requirement(expr.key, op, tuple(expr.values or ())))
        except SelectorError as e:
            raise SelectorError(f"matchExpressions[{i}]: {e}") from None
    return out


def _compile_structured(sel: LabelSelector) -> Matcher | str:
    if not sel.match_labels and not sel.match_expressions:
        return match_everything
    try:
        return requirements_matcher(label_selector_requirements(sel))
    except SelectorError as e:
        return str(e)


_compiled: Callable[[LabelSelector], Matcher | str] = CompileCache(_compile_structured).get


def compile_label_selector(sel: LabelSelector | None, *, none_matches: bool) -> Matcher:
    """A matcher for a structured LabelSelector (``metav1.LabelSelectorAsSelector``).

    An empty selector matches everything. ``None`` matches everything if ``none_matches`` else
    nothing (upstream differs by caller: a nil PDB selector matches nothing, a nil policy
    labelSelector matches everything). Raises SelectorError for an invalid selector.
    """
    if sel is None:
        return match_everything if none_matches else match_nothing
    compiled = _compiled(sel)
    if isinstance(compiled, str):
        raise SelectorError(compiled)
    return compiled


def validate_label_selector(sel: LabelSelector | None) -> None:
    """Raise SelectorError if ``sel`` is invalid (None is valid)."""
    if sel is not None:
        compiled = _compiled(sel)
        if isinstance(compiled, str):
            raise SelectorError(compiled)


# --------------------------------------------------------------------------- string selectors

# Tokens of the labels lexer.
_T_ERROR = 0
_T_EOS = 1
_T_CLOSE = 2
_T_COMMA = 3
_T_NOT = 4
_T_DOUBLE_EQ = 5
_T_EQ = 6
_T_GT = 7
_T_IDENT = 8
_T_IN = 9
_T_LT = 10
_T_NOT_EQ = 11
_T_NOT_IN = 12
_T_OPEN = 13

_STRING_TO_TOKEN = {
    ")": _T_CLOSE,
    ",": _T_COMMA,
    "!": _T_NOT,
    "==": _T_DOUBLE_EQ,
    "=": _T_EQ,
    ">": _T_GT,
    "in": _T_IN,
    "<": _T_LT,
    "!=": _T_NOT_EQ,
    "notin": _T_NOT_IN,
    "(": _T_OPEN,
}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_BINARY_OPERATOR_NAMES = "in, notin, =, ==, !=, gt, lt"

_Item = tuple[int, str]


def _shown(literal: str) -> str:
    # Only the end-of-string token has an empty literal.
    return f"'{literal}'" if literal else "end of string"


def _lex(s: str) -> list[_Item]:
    items: list[_Item] = []
    pos = 0
    end = len(s)
    while True:
        while pos < end and s[pos] in _WHITESPACE:
            pos += 1
        if pos >= end:
            items.append((_T_EOS, ""))
            return items
        if s[pos] in _SPECIAL:
            # Longest run of special symbols that is still a known token ("!=" not "!" "=").
            tok, lit = _T_ERROR, ""
            buf = ""
            while pos < end and s[pos] in _SPECIAL:
                candidate = buf + s[pos]
                known = _STRING_TO_TOKEN.get(candidate)
                if known is not None:
                    tok, lit, buf = known, candidate, candidate
                    pos += 1
                elif tok != _T_ERROR:
                    break
                else:
                    buf = candidate
                    pos += 1
            if tok == _T_ERROR:
                items.append((_T_ERROR, f"error expected: keyword found '{buf}'"))
            else:
                items.append((tok, lit))
            continue
        start = pos
        while pos < end and s[pos] not in _SPECIAL and s[pos] not in _WHITESPACE:
            pos += 1
        word = s[start:pos]
        items.append((_STRING_TO_TOKEN.get(word, _T_IDENT), word))


class _Parser:
    __slots__ = ("items", "position")

    def __init__(self, items: list[_Item]) -> None:
        self.items = items
        self.position = 0

    def lookahead(self, values: bool) -> _Item:
        tok, lit = self.items[self.position]
        if values and tok in (_T_IN, _T_NOT_IN):
            tok = _T_IDENT
        return tok, lit

    def consume(self, values: bool) -> _Item:
        item = self.lookahead(values)
        self.position += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self.lookahead(True)
            if tok in (_T_IDENT, _T_NOT):
                try:
                    requirements.append(self.parse_requirement())
                except SelectorError as e:
                    raise SelectorError(f"unable to parse requirement: {e}") from None
                t, lit2 = self.consume(True)
                if t == _T_EOS:
                    return requirements
                if t == _T_COMMA:
                    t2, lit3 = self.lookahead(True)
                    if t2 not in (_T_IDENT, _T_NOT):
                        raise SelectorError(f"found {_shown(lit3)}, expected: identifier after ','")
                else:
                    raise SelectorError(f"found {_shown(lit2)}, expected: ',' or 'end of string'")
            elif tok == _T_EOS:
                return requirements
            else:
                raise SelectorError(f"found {_shown(lit)}, expected: !, identifier, or 'end of string'")

    def parse_requirement(self) -> Requirement:
        key, operator = self.parse_key_and_infer_operator()
        if operator in (OP_EXISTS, OP_DOES_NOT_EXIST):
            return new_requirement(key, operator, ())
        operator = self.parse_operator()
        if operator in (OP_IN, OP_NOT_IN):
            values = self.parse_values()
        else:
            values = self.parse_exact_value()
        return new_requirement(key, operator, tuple(sorted(values)))

    def parse_key_and_infer_operator(self) -> tuple[str, str]:
        operator = ""
        tok, lit = self.consume(True)
        if tok == _T_NOT:
            operator = OP_DOES_NOT_EXIST
            tok, lit = self.consume(True)
        if tok != _T_IDENT:
            raise SelectorError(f"found {_shown(lit)}, expected: identifier")
        why = validate_label_key(lit)
        if why is not None:
            raise SelectorError(f"key {lit!r}: {why}")
        t, _ = self.lookahead(True)
        if t in (_T_EOS, _T_COMMA) and operator != OP_DOES_NOT_EXIST:
            operator = OP_EXISTS
        return lit, operator

    def parse_operator(self) -> str:
        tok, lit = self.consume(False)
        op = {
            _T_IN: OP_IN,
            _T_EQ: OP_EQUALS,
            _T_DOUBLE_EQ: OP_DOUBLE_EQUALS,
            _T_GT: OP_GT,
            _T_LT: OP_LT,
            _T_NOT_IN: OP_NOT_IN,
            _T_NOT_EQ: OP_NOT_EQUALS,
        }.get(tok)
        if op is None:
            raise SelectorError(f"found {_shown(lit)}, expected: {_BINARY_OPERATOR_NAMES}")
        return op

    def parse_values(self) -> set[str]:
        tok, lit = self.consume(True)
        if tok != _T_OPEN:
            raise SelectorError(f"found {_shown(lit)}, expected: '('")
        tok, lit = self.lookahead(True)
        if tok in (_T_IDENT, _T_COMMA):
            values = self.parse_identifiers_list()
            tok, lit = self.consume(True)
            if tok != _T_CLOSE:
                raise SelectorError(f"found {_shown(lit)}, expected: ')'")
            return values
        if tok == _T_CLOSE:  # "()" means the one empty value
            self.consume(True)
            return {""}
        raise SelectorError(f"found {_shown(lit)}, expected: ',', ')' or identifier")

    def parse_identifiers_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.consume(True)
            if tok == _T_IDENT:
                values.add(lit)
                tok2, lit2 = self.lookahead(True)
                if tok2 == _T_COMMA:
                    continue
                if tok2 == _T_CLOSE:
                    return values
                raise SelectorError(f"found {_shown(lit2)}, expected: ',' or ')'")
            if tok == _T_COMMA:  # empty values: "(,a)", "(a,,b)", "(a,)"
                if not values:
                    values.add("")
                tok2, _ = self.lookahead(True)
                if tok2 == _T_CLOSE:
                    values.add("")
                    return values
                if tok2 == _T_COMMA:
                    values.add("")
                continue
            raise SelectorError(f"found {_shown(lit)}, expected: ',', or identifier")

    def parse_exact_value(self) -> set[str]:
        tok, _ = self.lookahead(True)
        if tok in (_T_EOS, _T_COMMA):
            return {""}
        tok, lit = self.consume(True)
        if tok == _T_IDENT:
            return {lit}
        raise SelectorError(f"found {_shown(lit)}, expected: identifier")


@functools.lru_cache(maxsize=1024)
def _parse_cached(s: str) -> tuple[Requirement, ...] | str:
    try:
        return tuple(_Parser(_lex(s)).parse())
    except SelectorError as e:
        return f"invalid label selector {s!r}: {e}"


def parse_requirements(s: str) -> list[Requirement]:
    """``labels.Parse``: the requirements of a selector string, or SelectorError."""
    parsed = _parse_cached(s)
    if isinstance(parsed, str):
        raise SelectorError(parsed)
    return list(parsed)


@functools.lru_cache(maxsize=1024)
def _string_matcher(s: str) -> Matcher | str:
    parsed = _parse_cached(s)
    if isinstance(parsed, str):
        return parsed
    return requirements_matcher(parsed)


def parse_selector_string(s: str) -> Matcher:
    """A matcher for a selector string (``a=b,c!=d,e in (x,y),f notin (z),g,!h,n>5``).

    The empty string matches everything. Raises SelectorError naming the problem.
    """
    compiled = _string_matcher(s)
    if isinstance(compiled, str):
        raise SelectorError(compiled)
    return compiled
