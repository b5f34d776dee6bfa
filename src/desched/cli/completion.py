"""``desched completion bash|zsh|fish``: a shell completion script, made from the argparse parser.

Written by hand rather than with ``shtab``: shtab makes bash, zsh and tcsh scripts but not fish,
so fish would be hand-written anyway, and the three scripts together are a few dozen lines over
the parser's own tables (the commands, each command's options, an option's choices), with no new
run-time dependency. The zsh script loads the bash one through zsh's ``bashcompinit``.

Each script completes the commands, each command's options (long and short), the choices of an
option that has them (``--output``, ``--logging-format``...), and file names everywhere else.
"""

from __future__ import annotations

import argparse
import shlex

SHELLS = ("bash", "zsh", "fish")


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {c.dest: str(c.help or "") for c in sub._choices_actions}


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings]


def _choices(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for action in _options(parser):
        if action.choices:
            for spelling in action.option_strings:
                out[spelling] = [str(c) for c in action.choices if str(c)]
    return out


def bash(parser: argparse.ArgumentParser) -> str:
    commands = _commands(parser)
    top = [s for a in _options(parser) for s in a.option_strings]
    lines = [
        "# desched completion for bash: source <(desched completion bash)",
        "_desched() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmd="" i opts',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        case "${COMP_WORDS[i]}" in',
        f'            {"|".join(commands)}) cmd="${{COMP_WORDS[i]}}"; break ;;',
        "        esac",
        "    done",
        '    case "$cmd" in',
    ]
    choices_by_command: dict[str, dict[str, list[str]]] = {}
    for name, child in commands.items():
        words = sorted({s for a in _options(child) for s in a.option_strings})
        lines.append(f"        {name}) opts={shlex.quote(' '.join(words))} ;;")
        choices_by_command[name] = _choices(child)
    lines.append(f"        *) opts={shlex.quote(' '.join([*commands, *top]))} ;;")
    lines.append("    esac")
    lines.append('    case "$cmd $prev" in')
    for name, choices in choices_by_command.items():
        for flag, values in sorted(choices.items()):
            listed = shlex.quote(" ".join(values))
            lines.append(f'        "{name} {flag}") COMPREPLY=($(compgen -W {listed} -- "$cur")); return ;;')
    lines += [
        "    esac",
        '    if [[ "$cur" == -* || -z "$cmd" ]]; then',
        '        COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
        "    fi",
        "}",
        "complete -o default -F _desched desched",
    ]
    return "\n".join(lines) + "\n"


def zsh(parser: argparse.ArgumentParser) -> str:
    return (
        "#compdef desched\n"
        "# desched completion for zsh: source <(desched completion zsh)\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash(parser).split("\n", 1)[1]
    )


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(parser: argparse.ArgumentParser) -> str:
    commands = _commands(parser)
    helps = _helps(parser)
    names = " ".join(commands)
    lines = ["# desched completion for fish: desched completion fish | source", "complete -c desched -f"]
    for name in commands:
        lines.append(
            f"complete -c desched -n 'not __fish_seen_subcommand_from {names}' -a {name} "
            f"-d {_fish_quote(helps.get(name, '')[:80])}"
        )
    for name, child in commands.items():
        condition = f"-n '__fish_seen_subcommand_from {name}'"
        for action in _options(child):
            parts = [f"complete -c desched {condition}"]
            for spelling in action.option_strings:
                if spelling.startswith("--"):
                    parts.append(f"-l {spelling[2:]}")
                else:
                    parts.append(f"-s {spelling[1:]}")
            if action.choices:
                parts.append(f"-x -a {_fish_quote(' '.join(str(c) for c in action.choices if str(c)))}")
            elif action.nargs != 0:
                parts.append("-r -F")
            if action.help and action.help != argparse.SUPPRESS:
                parts.append(f"-d {_fish_quote(' '.join(str(action.help).split())[:80])}")
            lines.append(" ".join(parts))
        if any(not a.option_strings for a in child._actions):  # a file argument (a policy, a snapshot)
            lines.append(f"complete -c desched {condition} -F")
    return "\n".join(lines) + "\n"


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    return {"bash": bash, "zsh": zsh, "fish": fish}[shell](parser)
