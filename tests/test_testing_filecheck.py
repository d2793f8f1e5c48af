"""gt.testing.FileCheck against torch.testing.FileCheck on the same checks and strings."""

from __future__ import annotations

import pytest
import torch

import gputensor as gt

TEXT = "graph(%x):\n  %1 = aten::add(%x, %x)\n  %2 = aten::mul(%1, %1)\n  return (%2)\n"
LONG = "".join(f"l{i} {'ab' if i == 5 else 'xy'}\n" for i in range(12))

# (builder calls, test string): each call is (method name, args).
BUILT = [
    ([("check", ("aten::add",)), ("check", ("aten::mul",))], TEXT),
    ([("check", ("aten::mul",)), ("check", ("aten::add",))], TEXT),
    ([("check", ("abc",))], "xx\nab\nyy"),
    ([("check", ("abc",))], LONG),
    ([("check_not", ("ab",))], "xx\nab\nyy"),
    ([("check", ("l2",)), ("check_not", ("ab",)), ("check", ("l9",))], LONG),
    ([("check", ("l6",)), ("check_not", ("ab",)), ("check", ("l9",))], LONG),
    ([("check_not", ("ab",)), ("check_not", ("zz",))], LONG),
    ([("check", ("aten::add",)), ("check_next", ("aten::mul",))], TEXT),
    ([("check", ("graph",)), ("check_next", ("aten::mul",))], TEXT),
    ([("check_next", ("ab",))], "xx ab\nyy"),
    ([("check", ("aten::add",)), ("check_same", ("%x",))], TEXT),
    ([("check", ("aten::add",)), ("check_same", ("%1",))], TEXT),
    ([("check_same", ("yy",))], "xx ab\nyy"),
    ([("check_count", ("%x", 3))], TEXT),
    ([("check_count", ("%x", 4))], TEXT),
    ([("check_count", ("%1", 2, True))], TEXT),
    ([("check_count", ("%1", 3, True))], TEXT),
    ([("check_count", ("a", 2, True))], "aaa"),
    ([("check_count", ("zz", 0, True))], TEXT),
    ([("check_count", ("aten", 0, True))], TEXT),
    ([("check_dag", ("aten::mul",)), ("check_dag", ("aten::add",)), ("check", ("return",))],
     TEXT),
    ([("check_dag", ("a",)), ("check_dag", ("b",)), ("check_not", ("x",)), ("check", ("c",))],
     "b a x c"),
    ([("check_dag", ("a",)), ("check_dag", ("b",)), ("check_not", ("x",)), ("check", ("c",))],
     "b a c x"),
    ([("check_dag", ("q",))], TEXT),
    ([("check_regex", ("aten::[a-z]+",)), ("check", ("return",))], TEXT),
    ([("check_regex", ("a+c",))], "xx\nab\nyy"),
    ([("check_regex", ("",)), ("check", ("c",))], "bccc"),
    # PyTorch takes a regex match's position relative to where the search started.
    ([("check", ("b",)), ("check_regex", ("c",)), ("check", ("c",))], "bc"),
    ([("check", ("b",)), ("check_regex", ("c+",)), ("check", ("c",))], "bccc"),
    ([("check_source_highlighted", ("ab",))], "xx ab\n   ~~\nyy"),
    ([("check_source_highlighted", ("ab",))], "xx ab\n   ~~~\nyy"),
    ([("check_source_highlighted", ("ab",))], "xx ab\n  ~~\nyy"),
    ([("check_source_highlighted", ("ab",))], "xx\nab\nyy"),
    ([("check_source_highlighted", ("zz",))], "xx\nab\nyy"),
    ([("check_source_highlighted", ("ab",)), ("check", ("xx",))], "xx ab\n   ~~\nyy"),
    ([("check", ('q"\\\t\x01é',))], "bccc"),
    ([("check", ("é",)), ("check_not", ("é",))], "aé\nb\né"),
    ([("check", ("",))], ""),
    ([("check", ("it's",))], "zz"),
    ([("check", ("a\x7fb\x00c\x1b",))], "zz"),   # the message ends at the NUL byte
    ([("check", ("\a\b\f\v\r",))], "zz"),
]

PARSED = [
    ("#CHECK: a\n  #  CHECK-NEXT: b\n# CHECK-COUNT-EXACTLY-2: c\n#CHECK-DAG: d", "a\nb cc d"),
    ("#CHECK: a\n  #  CHECK-NEXT: b\n# CHECK-COUNT-EXACTLY-2: c\n#CHECK-DAG: d", "a\nb ccc d"),
    ("# CHECK: aten::add\n# CHECK-SAME: %x\n# CHECK-NOT: aten::sub\n# CHECK: return", TEXT),
    ("# CHECK-COUNT-2: %1\n# CHECK-REGEX: re[a-z]urn", TEXT),
    ("# CHECK-COUNT-3: %1", TEXT),
    ("#CHECK: a", "zz"),
    ("#CHECK-COUNT-2 a", "zz"),
    ("# CHECK-XX: a", "b"),
    ("# not a check # CHECK: graph", TEXT),
    ("#        CHECK: graph", TEXT),   # more than six blanks: not a directive
    ("# CHECK-SOURCE-HIGHLIGHTED: ab", "xx ab\n   ~~\nyy"),
]


def _outcome(make, calls, text, parsed=None):
    fc = make()
    for name, args in calls:
        fc = getattr(fc, name)(*args)
    try:
        fc.run(text) if parsed is None else fc.run(parsed, text)
    except RuntimeError as e:
        return str(e)
    return None


@pytest.mark.parametrize("calls,text", BUILT)
def test_built_checks_match_torch(calls, text):
    expected = _outcome(torch.testing.FileCheck, calls, text)
    got = _outcome(gt.testing.FileCheck, calls, text)
    assert got == expected


@pytest.mark.parametrize("checks,text", PARSED)
def test_parsed_checks_match_torch(checks, text):
    expected = _outcome(torch.testing.FileCheck, [], text, checks)
    got = _outcome(gt.testing.FileCheck, [], text, checks)
    assert got == expected


def test_chaining_and_empty():
    fc = gt.testing.FileCheck()
    assert fc.check("a") is fc
    with pytest.raises(RuntimeError, match="No checks have been added"):
        gt.testing.FileCheck().run("x")


def test_bad_arguments():
    with pytest.raises(RuntimeError, match="Count == 0"):
        gt.testing.FileCheck().check_count("a", 0)
    with pytest.raises(TypeError):
        gt.testing.FileCheck().check(1)
    with pytest.raises(TypeError):
        gt.testing.FileCheck().check_count("a", -1)
    with pytest.raises(RuntimeError):
        gt.testing.FileCheck().check_regex("[").run("abc")
    with pytest.raises(ValueError, match="stoll"):
        gt.testing.FileCheck().run("# CHECK-COUNT-x: a", "a")


def test_unrun_instance_reminds(capsys):
    fc = gt.testing.FileCheck().check("a").check_count("b", 2)
    del fc
    out = capsys.readouterr().out
    assert out == ("You have not run this instance of FileCheck!\nFileCheck checks:\n"
                   "\tCHECK: a\n\tCHECK-COUNT-2: b\n")
