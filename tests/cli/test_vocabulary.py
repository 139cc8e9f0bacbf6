"""The CLI speaks the one vocabulary: --n-layers, --n-heads, --d-model, --n-tokens, --n-samples;
the older spellings still parse but are hidden from the help."""

import pytest

from rankcollapse.cli import build_parser

OLD = ["--tokens", "--samples", "--layers", "--heads", "--width", "--batch"]


@pytest.mark.parametrize("command", [["probe"], ["simulate"], ["paths", "count"], ["run"]])
def test_help_shows_no_old_size_names(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([*command, "--help"])
    shown = capsys.readouterr().out
    assert not [old for old in OLD if f"{old} " in shown or f"{old}," in shown]
    assert "depth" not in shown


def test_an_old_size_name_is_a_hidden_alias_of_the_new_one():
    args = build_parser().parse_args(["probe", "minilm", "--tokens", "16", "--samples", "2"])
    assert (args.tokens, args.samples) == (16, 2)
    args = build_parser().parse_args(["probe", "minilm"])
    assert (args.tokens, args.samples) == (128, 32)
