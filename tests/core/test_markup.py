"""tfaccel.core.markup: text from the system is shown as text in Markdown and in HTML."""

from __future__ import annotations

import pytest

from tfaccel.core.markup import html_text, md_cell, md_line, md_text

HOSTILE = "[bold]x[/bold] a|b *c* _d_ `e` ~f~ #g \\h <script>alert('&')</script>"


def test_markdown_escapes_every_markup_character_and_raw_html() -> None:
    assert md_text(HOSTILE) == (
        "\\[bold\\]x\\[/bold\\] a\\|b \\*c\\* \\_d\\_ \\`e\\` \\~f\\~ \\#g \\\\h "
        "&lt;script&gt;alert('&amp;')&lt;/script&gt;"
    )
    assert md_text("line 1\nline 2") == "line 1\nline 2"


@pytest.mark.parametrize("value", ["a|b", "a||b", "|", "x | y | z"])
def test_a_pipe_never_opens_a_column(value: str) -> None:
    cell = md_cell(value)
    assert f"| {cell} |".replace("\\|", "").count("|") == 2
    assert cell.count("\\|") == value.count("|")  # every pipe kept, escaped


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a\nb", "a<br>b"),
        ("a\r\nb", "a<br>b"),
        ("a\rb", "a<br>b"),
        ("a\n\nb", "a<br><br>b"),
        ("```\ncode\n```", "\\`\\`\\`<br>code<br>\\`\\`\\`"),
    ],
)
def test_a_line_break_never_ends_a_table_row(value: str, expected: str) -> None:
    assert md_cell(value) == expected
    assert "\n" not in md_cell(value) and "\r" not in md_cell(value)


def test_one_line_markdown_joins_the_words() -> None:
    assert md_line("  a \n\t b|c  ") == "a b\\|c"


def test_none_and_other_values_are_text() -> None:
    for escape in (md_text, md_cell, md_line, html_text):
        assert escape(None) == ""
        assert escape(0) == "0"
        assert escape(-1.5) == "-1.5"
        assert escape("") == ""


def test_html_escapes_text_and_attribute_quotes() -> None:
    assert html_text(HOSTILE) == (
        "[bold]x[/bold] a|b *c* _d_ `e` ~f~ #g \\h "
        "&lt;script&gt;alert(&#x27;&amp;&#x27;)&lt;/script&gt;"
    )
    assert html_text('"q"') == "&quot;q&quot;"
    assert html_text("a\nb") == "a\nb"
    assert html_text("a\r\nb\nc", breaks=True) == "a<br>b<br>c"
    assert html_text("<b>\n</b>", breaks=True) == "&lt;b&gt;<br>&lt;/b&gt;"
