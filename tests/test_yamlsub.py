"""The YAML subset reader (ablate.setup.yamlsub): what plugin-eval files use, and what it refuses, by line."""

from __future__ import annotations

import pytest

from ablate.setup.yamlsub import YamlSubsetError, loads

SUPPORTED = """\
# comment
schema_version: "1.0"   # trailing comment
name: demo case
plain: a # b
hash_inside: "a # b"
single: 'it''s'
numbers: [1, -2, 3.5, 1e3]
words: [yes, on, null, ~, True]
empty:
flow_map: {source: file, path: "out dir/x.txt"}
nested_flow: [{tool: Read}, [a, b]]
block_list:
- a
- 'b'
indented_list:
  - type: regex
    name: r
    before: {tool: Read, input_match: "x"}
  - type: llm
    criteria: |
      line one
        kept indent

      after blank
literal_strip: |-
  no newline
folded: >
  one
  two

  para
"""


def test_the_supported_subset() -> None:
    assert loads(SUPPORTED) == {
        "schema_version": "1.0",
        "name": "demo case",
        "plain": "a",
        "hash_inside": "a # b",
        "single": "it's",
        "numbers": [1, -2, 3.5, 1000.0],
        "words": ["yes", "on", None, None, True],
        "empty": None,
        "flow_map": {"source": "file", "path": "out dir/x.txt"},
        "nested_flow": [{"tool": "Read"}, ["a", "b"]],
        "block_list": ["a", "b"],
        "indented_list": [
            {"type": "regex", "name": "r", "before": {"tool": "Read", "input_match": "x"}},
            {"type": "llm", "criteria": "line one\n  kept indent\n\nafter blank\n"},
        ],
        "literal_strip": "no newline",
        "folded": "one two\n\npara\n",
    }
    assert loads("") is None and loads("# only a comment\n") is None


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("a: &x 1\nb: *x\n", 1, "anchors, aliases and tags"),
        ("a: !!str 1\n", 1, "anchors, aliases and tags"),
        ("a: 1\n---\nb: 2\n", 2, "several YAML documents"),
        ("? complex\n", 1, "complex mapping keys"),
        ("a: 1\na: 2\n", 2, "duplicate key 'a'"),
        ("a: [1,\n  2]\n", 1, "unterminated flow collection"),
        ("a: b\n  c\n", 2, "unexpected indentation"),
        ("a:\n\t- b\n", 2, "tab indentation"),
        ("a: 'open\n", 1, "unterminated single-quoted"),
        ("a: 1\njust words\n", 2, "expected 'key: value'"),
        ("a: |+\n  x\n", 1, "only |, |-, > and >- are supported"),
    ],
)
def test_outside_the_subset_is_refused_by_line(text: str, line: int, words: str) -> None:
    with pytest.raises(YamlSubsetError) as exc:
        loads(text, first_line=1)
    assert exc.value.line == line and words in exc.value.message, str(exc.value)


def test_line_numbers_count_from_the_frontmatter_start() -> None:
    with pytest.raises(YamlSubsetError) as exc:
        loads("a: 1\nb: *x\n", first_line=2)
    assert exc.value.line == 3
