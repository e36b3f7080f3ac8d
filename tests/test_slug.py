"""The project slug against every row of docs/CLAUDE-CODE.md#slug that names its path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ablate.core.slug import base36, java_string_hash, slug, slug_for

FACTS_ROWS = [
    ("/srv/acc/slug/with.dots.v1.2", "-srv-acc-slug-with-dots-v1-2"),
    ("/srv/acc/slug/with_under_score", "-srv-acc-slug-with-under-score"),
    ("/srv/acc/slug/with space dir", "-srv-acc-slug-with-space-dir"),
    ("/srv/acc/slug/ünïcödé-日本", "-srv-acc-slug--n-c-d----"),
    ("/srv/acc/slug2/emoji-😀x", "-srv-acc-slug2-emoji---x"),
    ("/srv/acc/slug/a+b=c@d,e~f", "-srv-acc-slug-a-b-c-d-e-f"),
    ("/srv/acc/slug/trailing.", "-srv-acc-slug-trailing-"),
    ("/srv/acc/slug/MixedCase-Dash--x", "-srv-acc-slug-MixedCase-Dash--x"),
    ("/srv/acc/W/repo", "-srv-acc-W-repo"),
    ("/srv/acc/W/wt", "-srv-acc-W-wt"),
]


@pytest.mark.parametrize(("path", "expected"), FACTS_ROWS)
def test_facts_rows(path: str, expected: str) -> None:
    assert slug(path) == expected


def test_lossy_mapping_is_reproduced() -> None:
    assert slug("/a.b") == slug("/a_b") == slug("/a-b") == "-a-b"


def test_java_hash_matches_known_values() -> None:
    # Java: "hello".hashCode() == 99162322; "Aa" and "BB" collide (2112); "polygenelubricants" is MIN_VALUE.
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert base36(35) == "z" and base36(36) == "10" and base36(0) == "0"


def test_two_hundred_chars_has_no_suffix() -> None:
    path = "/" + "a" * 199
    assert slug(path) == "-" + "a" * 199


def test_over_two_hundred_is_cut_and_suffixed_with_hash_of_original_path() -> None:
    path = "/srv/acc/slug/" + "x.y" * 80  # 254 chars with dots: sanitised and original hashes differ
    out = slug(path)
    assert out[:200] == slug(path[:200])
    suffix = out[201:]
    assert out[200] == "-"
    assert suffix == base36(abs(java_string_hash(path)))
    assert suffix != base36(abs(java_string_hash(out[:200])))


def test_201_chars_gives_207_char_slug_like_facts() -> None:
    path = "/srv/acc/slug/" + "d" * 187
    assert len(path) == 201
    assert len(slug(path)) == 200 + 1 + len(base36(abs(java_string_hash(path))))
    assert 200 < len(slug(path)) <= 208


def test_symlinked_path_is_resolved(tmp_path: Path) -> None:
    real = tmp_path / "real-target"
    real.mkdir()
    link = tmp_path / "link-to-target"
    link.symlink_to(real)
    assert slug_for(link) == slug(os.path.realpath(real))
    assert slug_for(link).endswith("-real-target")
