"""desched.k8s.labels against apimachinery's labels package and LabelSelectorAsSelector."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from desched.k8s.labels import (
    OP_EXISTS,
    OP_GT,
    OP_IN,
    SelectorError,
    compile_label_selector,
    labels_match,
    match_everything,
    match_nothing,
    new_requirement,
    parse_int64,
    parse_requirements,
    parse_selector_string,
    validate_label_key,
    validate_label_selector,
    validate_label_value,
)
from desched.k8s.objects import LabelSelector


def sel(match_labels: dict[str, str] | None = None, *exprs: dict[str, Any]) -> LabelSelector:
    raw: dict[str, Any] = {}
    if match_labels is not None:
        raw["matchLabels"] = match_labels
    if exprs:
        raw["matchExpressions"] = list(exprs)
    return msgspec.convert(raw, LabelSelector)


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        e["values"] = list(values)
    return e


# --------------------------------------------------------------------------- structured


def test_nil_and_empty_selectors() -> None:
    assert compile_label_selector(None, none_matches=True)({"a": "b"})
    assert not compile_label_selector(None, none_matches=False)({"a": "b"})
    empty = compile_label_selector(sel(), none_matches=False)
    assert empty({}) and empty({"a": "b"})
    assert compile_label_selector(sel({}), none_matches=False)({"x": "y"})


def test_match_labels_need_every_pair() -> None:
    m = compile_label_selector(sel({"app": "web", "tier": "fe"}), none_matches=False)
    assert m({"app": "web", "tier": "fe", "extra": "1"})
    assert not m({"app": "web"})
    assert not m({"app": "web", "tier": "be"})
    empty_value = compile_label_selector(sel({"app": ""}), none_matches=False)
    assert empty_value({"app": ""})
    assert not empty_value({})


@pytest.mark.parametrize(
    ("requirement", "labels", "expected"),
    [
        (expr("env", "In", "prod", "stage"), {"env": "prod"}, True),
        (expr("env", "In", "prod", "stage"), {"env": "dev"}, False),
        (expr("env", "In", "prod"), {}, False),
        (expr("env", "NotIn", "prod"), {"env": "dev"}, True),
        (expr("env", "NotIn", "prod"), {"env": "prod"}, False),
        (expr("env", "NotIn", "prod"), {}, True),  # a missing key is "not in"
        (expr("env", "Exists"), {"env": ""}, True),
        (expr("env", "Exists"), {}, False),
        (expr("env", "DoesNotExist"), {}, True),
        (expr("env", "DoesNotExist"), {"env": "x"}, False),
    ],
)
def test_match_expressions(requirement: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    assert compile_label_selector(sel(None, requirement), none_matches=False)(labels) is expected


def test_labels_and_expressions_are_anded() -> None:
    m = compile_label_selector(
        sel({"app": "web"}, expr("env", "In", "prod"), expr("canary", "DoesNotExist")), none_matches=False
    )
    assert m({"app": "web", "env": "prod"})
    assert not m({"app": "web", "env": "prod", "canary": "true"})
    assert not m({"app": "db", "env": "prod"})


@pytest.mark.parametrize(
    ("selector", "fragment"),
    [
        (sel(None, expr("a", "In")), "values set can't be empty"),
        (sel(None, expr("a", "NotIn")), "values set can't be empty"),
        (sel(None, expr("a", "Exists", "x")), "must be empty for exists"),
        (sel(None, expr("a", "DoesNotExist", "x")), "must be empty for exists"),
        (sel(None, expr("a", "Equals", "x")), "'Equals' is not a valid label selector operator"),
        (sel(None, expr("a", "Gt", "1")), "'Gt' is not a valid label selector operator"),
        (sel(None, expr("a", "")), "'' is not a valid label selector operator"),
        (sel(None, expr("", "Exists")), "name part must be non-empty"),
        (sel({"bad key!": "x"}), "matchLabels[bad key!]"),
        (sel({"app": "-x"}), "a valid label value"),
        (sel(None, expr("a", "In", "x" * 64)), "no more than 63 characters"),
    ],
)
def test_invalid_selectors_raise(selector: LabelSelector, fragment: str) -> None:
    with pytest.raises(SelectorError) as info:
        compile_label_selector(selector, none_matches=False)
    assert fragment in str(info.value)
    with pytest.raises(SelectorError):
        validate_label_selector(selector)
    # Cached failures still raise.
    with pytest.raises(SelectorError):
        compile_label_selector(selector, none_matches=False)


def test_validate_accepts_valid_and_none() -> None:
    validate_label_selector(None)  # raises SelectorError if refused
    valid = sel({"app.kubernetes.io/name": "x"}, expr("a", "NotIn", "b"))
    validate_label_selector(valid)
    # what was validated compiles to the selector it says
    matcher = compile_label_selector(valid, none_matches=False)
    assert matcher({"app.kubernetes.io/name": "x", "a": "c"})
    assert not matcher({"app.kubernetes.io/name": "x", "a": "b"})
    assert not matcher({"a": "c"})


def test_equal_selectors_share_a_compiled_matcher() -> None:
    a = compile_label_selector(sel({"app": "web"}, expr("env", "In", "p")), none_matches=False)
    b = compile_label_selector(sel({"app": "web"}, expr("env", "In", "p")), none_matches=False)
    assert a is b


def test_empty_string_values_are_allowed() -> None:
    m = compile_label_selector(sel(None, expr("a", "In", "")), none_matches=False)
    assert m({"a": ""}) and not m({"a": "x"}) and not m({})


# --------------------------------------------------------------------------- keys and values


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("app", True),
        ("app.kubernetes.io/name", True),
        ("a_b-c.D9", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("", False),
        ("-a", False),
        ("a/", False),
        ("/a", False),
        ("A.com/x", False),
        ("a/b/c", False),
        ("example.com/" + "x" * 63, True),
        ("a" * 254 + "/x", False),
    ],
)
def test_label_key_validation(key: str, ok: bool) -> None:
    assert (validate_label_key(key) is None) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("", True),
        ("v1", True),
        ("a.b_c-d", True),
        ("-a", False),
        ("a-", False),
        ("a b", False),
        ("x" * 64, False),
    ],
)
def test_label_value_validation(value: str, ok: bool) -> None:
    assert (validate_label_value(value) is None) is ok


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("-5", -5),
        ("+7", 7),
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
        ("9223372036854775808", None),
        ("1_000", None),
        (" 1", None),
        ("", None),
        ("1.0", None),
        ("٣", None),  # non-ASCII digits are not digits to Go
    ],
)
def test_parse_int64(text: str, expected: int | None) -> None:
    assert parse_int64(text) == expected


def test_new_requirement_validates() -> None:
    assert new_requirement("a", OP_IN, ["x"]).matches({"a": "x"})
    assert new_requirement("a", OP_EXISTS).matches({"a": ""})
    with pytest.raises(SelectorError, match="must be an integer"):
        new_requirement("a", OP_GT, ["x"])
    with pytest.raises(SelectorError, match="exactly one value"):
        new_requirement("a", OP_GT, ["1", "2"])
    with pytest.raises(SelectorError, match="not supported"):
        new_requirement("a", "bogus", ["1"])


# --------------------------------------------------------------------------- strings


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("", {}, True),
        ("", {"a": "b"}, True),
        ("a=b", {"a": "b"}, True),
        ("a==b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a!=b", {"a": "c"}, True),
        ("a!=b", {}, True),
        ("a!=b", {"a": "b"}, False),
        ("a in (x, y)", {"a": "y"}, True),
        ("a in (x,y)", {}, False),
        ("a notin (x)", {}, True),
        ("a notin (x)", {"a": "x"}, False),
        ("a", {"a": ""}, True),
        ("a", {}, False),
        ("!a", {}, True),
        ("!a", {"a": "1"}, False),
        ("a>5", {"a": "6"}, True),
        ("a>5", {"a": "5"}, False),
        ("a<5", {"a": "-1"}, True),
        ("a>5", {"a": "x"}, False),
        ("a>5", {}, False),
        ("a=", {"a": ""}, True),  # an empty exact value
        ("a in ()", {"a": ""}, True),  # "()" is the set of the empty value
        ("x in (foo,,baz),y,z notin ()", {"x": "", "y": "1"}, True),
        ("x in (foo,,baz),y,z notin ()", {"x": "foo", "y": "1", "z": ""}, False),
        ("in in (in, notin)", {"in": "notin"}, True),  # keywords are values in value position
        ("a=b, c=d", {"a": "b", "c": "d"}, True),
        ("a=b,c=d", {"a": "b", "c": "x"}, False),
        (" \ta = b \n", {"a": "b"}, True),
        ("node-role.kubernetes.io/worker", {"node-role.kubernetes.io/worker": ""}, True),
    ],
)
def test_parse_selector_string_matches(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector_string(selector)(labels) is expected


@pytest.mark.parametrize(
    ("selector", "fragment"),
    [
        ("a in", "expected: '('"),
        ("a in (b c)", "found 'c', expected: ',' or ')'"),
        ("a in (b", "found end of string, expected: ',' or ')'"),
        ("=a", "found '=', expected: !, identifier"),
        ("a,", "found end of string, expected: identifier after ','"),
        ("a=b=c", "expected: ',' or 'end of string'"),
        ("a!b", "found '!', expected: in, notin"),
        ("a<-5", "a valid label value"),  # like upstream: "-5" is not a label value
        ("a>x", "must be an integer"),
        ("A/b=c", "prefix part"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a=!", "found '!', expected: identifier"),
        ("(", "found '(', expected: !, identifier"),
    ],
)
def test_parse_selector_string_errors(selector: str, fragment: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_selector_string(selector)
    assert fragment in str(info.value)
    assert repr(selector) in str(info.value)


def test_parse_requirements_sorted_values() -> None:
    (r,) = parse_requirements("k notin (b,a,b)")
    assert (r.key, r.operator, r.values) == ("k", "notin", ("a", "b"))


def test_labels_match() -> None:
    assert labels_match(None, {})
    assert labels_match({}, {"a": "b"})
    assert labels_match({"a": "b"}, {"a": "b", "c": "d"})
    assert not labels_match({"a": "b"}, {})
    assert match_everything({}) and not match_nothing({"a": "b"})


# --------------------------------------------------------------------------- properties

KEYS = ["a", "b", "app", "example.com/tier"]
VALUES = ["", "x", "y", "z1"]
label_sets = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=4)
value_lists = st.lists(st.sampled_from(VALUES), min_size=1, max_size=3)


@given(st.sampled_from(KEYS), value_lists, label_sets)
def test_not_in_is_the_complement_of_in(key: str, values: list[str], labels: dict[str, str]) -> None:
    is_in = compile_label_selector(sel(None, expr(key, "In", *values)), none_matches=False)
    not_in = compile_label_selector(sel(None, expr(key, "NotIn", *values)), none_matches=False)
    assert is_in(labels) is not not_in(labels)


@given(st.sampled_from(KEYS), label_sets)
def test_does_not_exist_is_the_complement_of_exists(key: str, labels: dict[str, str]) -> None:
    exists = compile_label_selector(sel(None, expr(key, "Exists")), none_matches=False)
    missing = compile_label_selector(sel(None, expr(key, "DoesNotExist")), none_matches=False)
    assert exists(labels) is not missing(labels)
    assert exists(labels) is (key in labels)


@given(label_sets, st.booleans())
def test_empty_selector_matches_everything(labels: dict[str, str], none_matches: bool) -> None:
    assert compile_label_selector(LabelSelector(), none_matches=none_matches)(labels)
    assert parse_selector_string("")(labels)


requirement_specs: st.SearchStrategy[tuple[str, str, list[str]]] = st.one_of(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["In", "NotIn"]), value_lists),
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["Exists", "DoesNotExist"]), st.just([])),
)


def to_string(key: str, op: str, values: list[str]) -> str:
    if op == "In":
        return f"{key} in ({','.join(values)})"
    if op == "NotIn":
        return f"{key} notin ({', '.join(values)})"
    return key if op == "Exists" else f"!{key}"


@given(
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
    st.lists(requirement_specs, max_size=4),
    st.lists(label_sets, min_size=1, max_size=5),
)
def test_string_syntax_agrees_with_structured_selector(
    match_labels: dict[str, str],
    specs: list[tuple[str, str, list[str]]],
    samples: list[dict[str, str]],
) -> None:
    structured = compile_label_selector(
        sel(match_labels, *(expr(k, op, *vs) for k, op, vs in specs)), none_matches=False
    )
    parts = [f"{k}={v}" for k, v in match_labels.items()] + [to_string(*spec) for spec in specs]
    from_string = parse_selector_string(",".join(parts))
    for labels in samples:
        assert structured(labels) is from_string(labels)
