"""The CLI speaks the one vocabulary: --n-layers, --n-heads, --d-model, --n-tokens, --n-samples;
the older spellings still parse but are hidden from the help."""

import pytest

from rankcollapse.cli import build_parser, main

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


@pytest.mark.parametrize(
    ("words", "hint"),
    [
        (["simulate", "--layers", "6"], "did you mean --n-layers for --layers?"),
        (["simulate", "--n_heads", "2"], "did you mean --n-heads for --n_heads?"),
        (["run", "toy-collapse", "--jobz=2"], "did you mean --jobs for --jobz?"),
    ],
)
def test_a_mistyped_flag_is_refused_with_the_commands_nearest_flag(words, hint, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(words)
    said = capsys.readouterr().err
    assert exit_.value.code == 2
    assert f"rankcollapse {words[0]}: error: unrecognized arguments:" in said
    assert hint in said
    assert f"usage: rankcollapse {words[0]}" in said  # the command's own usage, not the top one


def test_a_word_near_no_flag_is_refused_without_a_guess(capsys):
    with pytest.raises(SystemExit):
        main(["probe", "minilm", "--zzz"])
    said = capsys.readouterr().err
    assert said.strip().endswith("rankcollapse probe: error: unrecognized arguments: --zzz")
