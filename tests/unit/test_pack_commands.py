"""The exec deny check on parsed commands: destructive shapes refused however they are
wrapped or chained, everyday commands let through."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from owlclaw.tools.pack.commands import refusal

WS = PurePosixPath("/srv/ws/agent")


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("rm -rf /", "rm -r"),
        ("rm -r notes", "rm -r"),
        ("rm --recursive notes", "rm -r"),
        ("env FOO=1 nice -n 5 rm -fR notes", "rm -r"),
        ("timeout 5 /bin/rm -rf x", "rm -r"),
        ("echo ok; rm -rf x", "rm -r"),
        ("ls && mkfs.ext4 disk.img", "disk operation"),
        ("dd if=/dev/zero of=x bs=1M", "disk operation"),
        ("shutdown -h now", "power operation"),
        ("systemctl reboot", "power operation"),
        (":(){ :|:& };:", "shell function"),
        ("sudo ls", "privilege"),
        ("bash -c 'rm -rf /'", "cannot see"),
        ('eval "ls"', "cannot see"),
        ("echo $(whoami)", "substitution"),
        ("echo `whoami`", "substitution"),
        ("cat /etc/passwd", "outside the workspace"),
        ("cat ../other/secret", "'..'"),
        ("cat ~/.ssh/id_rsa", "home-relative"),
        ("echo x > /dev/sda", "redirect"),
        ("grep --file=/etc/shadow x", "outside the workspace"),
        ("echo 'unbalanced", "cannot be parsed"),
    ],
)
def test_destructive_and_unseeable_commands_are_refused(command: str, why: str) -> None:
    reason = refusal(command, WS)
    assert reason is not None and why in reason


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "echo hello > out.txt",
        "grep -r needle .",
        "cat notes/a.txt 2>/dev/null | wc -l",
        "python3 -c 'print(1)'",
        f"cat {WS}/notes/a.txt",
        "rm notes/old.txt",
        "mkdir -p a/b && touch a/b/c",
    ],
)
def test_everyday_commands_pass(command: str) -> None:
    assert refusal(command, WS) is None


def test_the_apps_own_deny_list_is_applied() -> None:
    assert refusal("curl http://x", WS, frozenset({"curl"})) == (
        "curl is denied by the app's [tools.exec] deny"
    )


_prefix = st.sampled_from(["", "ls; ", "true && ", "false || ", "echo a | ", "cd sub; "])
_wrapper = st.sampled_from(["", "env A=1 ", "nice -n 5 ", "nohup ", "timeout 3 ", "A=1 "])
_danger = st.sampled_from(
    ["rm -rf /", "rm -r .", "/bin/rm -Rf x", "mkfs /dev/sda", "dd if=a of=b", "reboot", "sudo -i"]
)
_suffix = st.sampled_from(["", " &", "; echo done", " && ls", " | cat"])


@settings(max_examples=300)
@given(prefix=_prefix, wrapper=_wrapper, danger=_danger, suffix=_suffix)
def test_a_dangerous_command_is_refused_wherever_it_sits(
    prefix: str, wrapper: str, danger: str, suffix: str
) -> None:
    assert refusal(prefix + wrapper + danger + suffix, WS) is not None


@given(st.text(max_size=200))
def test_any_text_gets_an_answer_never_an_exception(command: str) -> None:
    reason = refusal(command, WS)
    assert reason is None or reason.strip()  # a refusal always says why
