"""The exec tool's deny check, on the parsed command (``shlex`` with shell punctuation).

Each simple command of a pipeline or list is checked after its wrappers (``env``, ``nice``,
``timeout`` ...) are taken off: recursive ``rm``, disk tools (``mkfs``, ``dd``, ``fdisk`` ...),
power (``shutdown``, ``reboot`` ...), privilege (``sudo``, ``su``), shell functions (the fork
bomb's shape), and paths outside the workspace (absolute, ``~``, ``..``). What the check cannot
see through is refused too: command substitution, ``eval``, ``source``, a shell started with
``-c``. This is a guard against the common destructive commands, not a sandbox: exec is off
unless enabled and waits for a person's approval by default.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import PurePosixPath

SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", ";;", ";&", "(", ")", "{", "}", "\n"})
REDIRECTS = frozenset({">", ">>", "<", "<<", "<<<", ">|", "&>", "&>>", ">&", "<&", "<>"})
HIDDEN = re.compile(r"\$\(|`|<\(|>\(")
DISK = frozenset(
    {"dd", "format", "diskpart", "fdisk", "sfdisk", "cfdisk", "parted", "wipefs", "mkswap",
     "shred", "mke2fs", "badblocks", "hdparm"}
)  # fmt: skip
POWER = frozenset({"shutdown", "reboot", "poweroff", "halt", "init", "telinit"})
POWER_ACTIONS = frozenset({"poweroff", "reboot", "halt", "kexec", "suspend", "hibernate"})
PRIVILEGE = frozenset({"sudo", "su", "doas", "pkexec"})
INDIRECT = frozenset({"eval", "exec", "source", ".", "builtin", "command"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish"})
WRAPPERS = frozenset({"env", "nice", "nohup", "time", "timeout", "stdbuf", "xargs", "ionice"})
DEVICES_ALLOWED = frozenset({"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"})


def refusal(
    command: str, workspace: PurePosixPath, extra: frozenset[str] = frozenset()
) -> str | None:
    """Why ``command`` may not run in ``workspace`` (an absolute path), or None.

    ``extra``: program names the app's ``[tools.exec] deny`` adds.
    """
    if HIDDEN.search(command):
        return "command substitution ($(...), backticks, <(...)) cannot be checked"
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as e:
        return f"the command cannot be parsed: {e}"
    if "()" in tokens:
        return "defines a shell function (the fork bomb's shape)"
    for words, targets in _simple_commands(tokens):
        for target in targets:
            if (reason := _path_refusal(target, workspace)) is not None:
                return f"redirect to {target!r}: {reason}"
        if (reason := _program_refusal(_unwrapped(words), workspace, extra)) is not None:
            return reason
    return None


def _simple_commands(tokens: list[str]) -> Iterator[tuple[list[str], list[str]]]:
    """(words, redirect targets) of each simple command."""
    words: list[str] = []
    targets: list[str] = []
    redirect = False
    for token in [*tokens, ";"]:
        if redirect:
            targets.append(token)
            redirect = False
        elif token in SEPARATORS:
            if words or targets:
                yield words, targets
            words, targets = [], []
        elif token in REDIRECTS:
            redirect = True
        else:
            words.append(token)


def _unwrapped(words: list[str]) -> list[str]:
    """The command a wrapper runs: ``env A=1 nice -n 5 rm -r x`` -> ``rm -r x``."""
    rest = list(words)
    while rest:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", rest[0]):
            rest.pop(0)
        elif PurePosixPath(rest[0]).name in WRAPPERS:
            wrapper = PurePosixPath(rest.pop(0)).name
            while rest and rest[0].startswith("-"):
                option = rest.pop(0)
                if option in ("-n", "-c", "-s", "-k", "-i", "-o", "-e") and rest:
                    rest.pop(0)
            if wrapper == "timeout" and rest:
                rest.pop(0)  # the duration
        else:
            break
    return rest


def _program_refusal(
    words: list[str], workspace: PurePosixPath, extra: frozenset[str]
) -> str | None:
    if not words:
        return None
    program = PurePosixPath(words[0]).name
    args = words[1:]
    rules = (
        (program in extra, f"{program} is denied by the app's [tools.exec] deny"),
        (program in PRIVILEGE, f"{program}: no privilege escalation"),
        (program in INDIRECT, f"{program}: runs a command the check cannot see"),
        (program in SHELLS and "-c" in args, f"{program} -c: runs a command the check cannot see"),
        (program == "rm" and any(map(_recursive, args)), "rm -r: recursive delete"),
        (program in DISK or program.startswith("mkfs"), f"{program}: disk operation"),
        (
            program in POWER or (program == "systemctl" and bool(POWER_ACTIONS & set(args))),
            f"{program}: power operation",
        ),
    )
    for refused, reason in rules:
        if refused:
            return reason
    for arg in args:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if (path_reason := _path_refusal(value, workspace)) is not None:
            return f"argument {arg!r}: {path_reason}"
    return None


def _recursive(arg: str) -> bool:
    if arg in ("--recursive", "--no-preserve-root"):
        return True
    return arg.startswith("-") and not arg.startswith("--") and bool(set(arg[1:]) & {"r", "R"})


def _path_refusal(value: str, workspace: PurePosixPath) -> str | None:
    if value.startswith("~"):
        return "home-relative paths are outside the workspace"
    if ".." in PurePosixPath(value).parts:
        return "'..' leaves the workspace"
    if value.startswith("/") and value not in DEVICES_ALLOWED:
        path = PurePosixPath(value)
        if path != workspace and workspace not in path.parents:
            return "absolute path outside the workspace"
    return None
