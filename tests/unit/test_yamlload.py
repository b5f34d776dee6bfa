"""The one YAML loader: documents measured before they are built, the caller's error raised."""

from __future__ import annotations

from typing import NoReturn

import pytest
import yaml

from desched.yamlload import yaml_documents, yaml_error_position


class Refused(Exception):
    pass


def fail(source: str, reason: str) -> NoReturn:
    raise Refused(f"{source}: {reason}")


def docs(text: str, *, max_nodes: int = 1000, max_depth: int = 10, single: bool = False) -> list[object]:
    return list(yaml_documents(text, "f.yaml", fail, max_nodes=max_nodes, max_depth=max_depth, single=single))


def test_every_document_of_a_stream() -> None:
    assert docs("a: 1\n---\n---\n- 2\n") == [{"a": 1}, None, [2]]
    assert docs("") == []


def test_single_takes_one_document_and_refuses_two() -> None:
    assert docs("a: 1\n", single=True) == [{"a": 1}]
    assert docs("", single=True) == []
    with pytest.raises(yaml.YAMLError, match="expected a single document"):
        docs("a: 1\n---\nb: 2\n", single=True)


def test_aliases_count_as_the_copies_they_make() -> None:
    ten = "a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    assert len(docs(ten)[0]["b"]) == 10  # type: ignore[index]
    with pytest.raises(Refused, match=r"f\.yaml: YAML expands to more than 100 values"):
        docs(ten, max_nodes=100)


def test_depth_is_bounded() -> None:
    assert docs("[[[1]]]", max_depth=4) == [[[[1]]]]
    with pytest.raises(Refused, match="nested more than 3 levels deep"):
        docs("[[[1]]]", max_depth=3)


def test_syntax_errors_say_where() -> None:
    with pytest.raises(yaml.YAMLError) as e:
        docs("a: [1,\nb")
    assert yaml_error_position(e.value).startswith(" at line ")
