"""``FileCheck``: PyTorch's text checker (``torch.testing.FileCheck``, LLVM FileCheck's API).

Checks are matched in order against the test string: ``check`` finds a substring after the
previous match, ``check_next``/``check_same`` on the next/same line, ``check_count`` a number
of times, consecutive ``check_dag`` in any order, ``check_not`` nowhere between its neighbours,
``check_regex`` a regular expression, ``check_source_highlighted`` a token underlined with
``~`` on the following line. ``run(checks, text)`` first parses ``# CHECK...:`` directives.

Everything works on UTF-8 bytes, as PyTorch's C++ implementation does, so positions, the
``~`` highlighting of the failure messages and their quoting (octal escapes of non-printable
bytes) come out as PyTorch prints them. Two behaviours of PyTorch are kept on purpose because
they decide pass/fail: a regex match's position is taken relative to where the search started
and its range spans ``len(pattern)`` bytes. Regular expressions are Python's ``re`` where
PyTorch uses ``std::regex`` (ECMAScript); an invalid pattern raises RuntimeError with
Python's description.
"""

from __future__ import annotations

import bisect
import re
import sys
from typing import Any

__all__ = ["FileCheck"]

_CHECK, _NEXT, _SAME, _NOT, _COUNT, _DAG, _HIGHLIGHTED, _REGEX = range(8)
_NAMES = {_CHECK: "CHECK", _NEXT: "CHECK-NEXT", _SAME: "CHECK-SAME", _NOT: "CHECK-NOT",
          _DAG: "CHECK-DAG", _HIGHLIGHTED: "CHECK-SOURCE-HIGHLIGHTED", _REGEX: "CHECK-REGEX"}
# Directive suffixes after "CHECK" in a checks string, tried in this order.
_SUFFIXES = ((_CHECK, b": "), (_NEXT, b"-NEXT: "), (_SAME, b"-SAME: "), (_NOT, b"-NOT: "),
             (_DAG, b"-DAG: "), (_COUNT, b"-COUNT-"), (_HIGHLIGHTED, b"-SOURCE-HIGHLIGHTED: "),
             (_REGEX, b"-REGEX: "))
_CONTEXT = 3   # lines of context around a highlighted range


class _Check:
    __slots__ = ("kind", "text", "count")

    def __init__(self, kind: int, text: bytes, count: int | None = None) -> None:
        self.kind, self.text, self.count = kind, text, count

    def describe(self) -> bytes:
        name = f"CHECK-COUNT-{self.count}" if self.kind == _COUNT else _NAMES[self.kind]
        return name.encode() + b": " + self.text


class _Source:
    """A text with its line start offsets (PyTorch's ``Source``)."""

    def __init__(self, text: bytes) -> None:
        self.text = text
        self.line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == 10]

    def lineno_for_offset(self, offset: int) -> int:
        return bisect.bisect_right(self.line_starts, offset) - 1


def _quoted(s: bytes) -> bytes:
    """c10::printQuotedString: C escapes, octal digits for other non-printable bytes (done
    on C++'s signed char, so bytes >= 0x80 print as PyTorch prints them)."""
    escapes = {0x5C: b"\\\\", 0x27: b"\\'", 0x22: b'\\"', 0x07: b"\\a", 0x08: b"\\b",
               0x0C: b"\\f", 0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t", 0x0B: b"\\v"}
    out = bytearray(b'"')
    for byte in s:
        if byte in escapes:
            out += escapes[byte]
        elif 0x1F < byte < 0x7F:
            out.append(byte)
        else:
            c = byte - 256 if byte >= 128 else byte
            digits = []
            for _ in range(2):
                digits.append(48 + int(c - 8 * int(c / 8)))   # C's truncating %, /
                c = int(c / 8)
            digits.append(48 + c)
            out += b"\\" + bytes(d % 256 for d in reversed(digits))
    return bytes(out + b'"')


def _substr(s: bytes, pos: int, count: int) -> bytes:
    # std::string::substr with a size_t count: a "negative" count means "to the end".
    return s[pos:] if count < 0 else s[pos:pos + count]


def _highlight(text: bytes, start: int, end: int) -> bytes:
    """SourceRange::highlight: the range's lines underlined with ``~`` and up to three lines
    of context either side (PyTorch's layout, quirks included)."""
    n = len(text)
    if end - start == n:
        return text
    range_end = min(n, end)
    begin_line, end_line = start, range_end
    if begin_line > n:
        return b""
    while begin_line > 0 and text[begin_line - 1] != 10:
        begin_line -= 1
    while end_line < n and text[end_line] != 10:
        end_line += 1
    begin_context, lines = begin_line, 0
    while begin_context > 0:
        if text[begin_context - 1] == 10:
            lines += 1
        if lines >= _CONTEXT:
            break
        begin_context -= 1
    end_context, lines = end_line, 0
    while end_context < n:
        if text[end_context] == 10:
            lines += 1
        if lines >= _CONTEXT:
            break
        end_context += 1
    out = bytearray(_substr(text, begin_context, start - begin_context))
    line_start = line_end = start
    while line_start < range_end:
        while line_end < n and text[line_end] != 10:
            line_end += 1
        line = text[line_start:line_end + 1]
        out += line if line.endswith(b"\n") else line + b"\n"
        hl_begin = hl_end = line_start
        while hl_begin > 0 and text[hl_begin - 1] != 10:
            hl_begin -= 1
        while hl_end < range_end and text[hl_end] != 10:
            hl_end += 1
        empty = 0
        for i in range(hl_begin, hl_end):
            if text[i] == 32 or i < start:
                empty += 1
            else:
                break
        width = hl_end - hl_begin - empty
        if width > 0:
            # std::string's operator[] reads '\0' at size: not a blank, so more lines.
            more = any(i >= n or text[i] not in (10, 32) for i in range(line_end, range_end + 1))
            tail = b"\n" if more and line_end != range_end else b" <--- HERE\n"
            out += b" " * empty + b"~" * width + tail
        line_end += 1
        line_start = line_end
    if line_end <= n:
        rest = _substr(text, line_end, end_context - line_end)
        out += rest
        if rest and not rest.endswith(b"\n"):
            out += b"\n"
    return bytes(out)


def _fail(message: bytes) -> RuntimeError:
    # PyTorch's message passes through a C string: it ends at the first NUL byte.
    return RuntimeError(message.split(b"\0")[0].decode("utf-8", errors="replace"))


def _find(src: _Source, sub: bytes, start: int, end: int | None = None,
          check: _Check | None = None) -> int:
    """The position of ``sub`` in ``[start, end)``, else PyTorch's "Expected to find"."""
    end = len(src.text) if end is None else end
    pos = src.text.find(sub, start) if start <= len(src.text) else -1
    if pos < 0 or pos + len(sub) > end:
        msg = (b"Expected to find " + _quoted(sub) + b" but did not find it\nSearched string:\n"
               + _highlight(src.text, start, len(sub)))   # PyTorch's range end is len(sub)
        if check is not None:
            msg += b"From " + check.describe() + b"\n"
        raise _fail(msg)
    return pos


def _find_not(src: _Source, sub: bytes, start: int, end: int, check: _Check) -> None:
    pos = src.text.find(sub, start) if start <= len(src.text) else -1
    if pos >= 0 and pos + len(sub) <= end:
        raise _fail(b"Expected to not find " + _quoted(sub) + b" but found it\n"
                    + _highlight(src.text, pos, pos + len(sub))
                    + b"From " + check.describe() + b"\n")


def _find_regex(src: _Source, pattern: bytes, start: int, check: _Check) -> int:
    if not pattern:
        return 0
    try:
        match = re.search(pattern, src.text[start:])
    except re.error as e:
        raise RuntimeError(str(e)) from None
    if match is None:
        raise _fail(b"Expected to find regex " + _quoted(pattern)
                    + b" but did not find it\nSearched string:\nFrom " + check.describe()
                    + b"\n")
    return match.start()   # relative to ``start``, as PyTorch returns it


def _as_bytes(s: Any, method: str, arg: str = "arg0") -> bytes:
    if not isinstance(s, str):
        raise TypeError(f"{method}(): incompatible function arguments. The following argument "
                        f"types are supported:\n    1. (self: FileCheck, {arg}: str) -> "
                        f"FileCheck\n\nInvoked with: {s!r}")
    return s.encode("utf-8")


class FileCheck:
    """Checks that a string contains expected text in an expected order; each ``check_*``
    adds a check and returns ``self``; ``run`` raises RuntimeError at the first failure."""

    def __init__(self) -> None:
        self._checks: list[_Check] = []
        self._groups: list[list[_Check]] = []
        self._has_run = False

    def __del__(self) -> None:
        if getattr(self, "_has_run", True):
            return
        # PyTorch's destructor reminds about a FileCheck that was built but never run.
        out = sys.stdout
        if out is not None:
            lines = "".join(f"\t{c.describe().decode('utf-8', 'replace')}\n"
                            for c in self._checks)
            out.write(f"You have not run this instance of FileCheck!\nFileCheck checks:\n{lines}")

    # -- building -------------------------------------------------------------------------
    def _add(self, kind: int, text: bytes, count: int | None = None) -> FileCheck:
        check = _Check(kind, text, count)
        # Consecutive CHECK-DAGs, and consecutive CHECK-NOTs, are matched as one group.
        if self._groups and kind in (_NOT, _DAG) and self._groups[-1][0].kind == kind:
            self._groups[-1].append(check)
        else:
            self._groups.append([check])
        self._checks.append(check)
        self._has_run = False
        return self

    def check(self, str: str) -> FileCheck:  # noqa: A002 (PyTorch's parameter name)
        """``str`` occurs after the previous match."""
        return self._add(_CHECK, _as_bytes(str, "check"))

    def check_not(self, str: str) -> FileCheck:  # noqa: A002
        """``str`` does not occur between the previous and the next match."""
        return self._add(_NOT, _as_bytes(str, "check_not"))

    def check_same(self, str: str) -> FileCheck:  # noqa: A002
        """``str`` occurs on the line of the previous match, after it."""
        return self._add(_SAME, _as_bytes(str, "check_same"))

    def check_next(self, str: str) -> FileCheck:  # noqa: A002
        """``str`` occurs on the line after the previous match."""
        return self._add(_NEXT, _as_bytes(str, "check_next"))

    def check_count(self, str: str, count: int, exactly: bool = False  # noqa: A002
                    ) -> FileCheck:
        """``str`` occurs ``count`` times after the previous match (and no more if
        ``exactly``)."""
        text = _as_bytes(str, "check_count", "str")
        if not hasattr(count, "__index__") or count.__index__() < 0:
            raise TypeError(f"check_count(): incompatible function arguments. The following "
                            f"argument types are supported:\n    1. (self: FileCheck, str: str, "
                            f"count: int, exactly: bool = False) -> FileCheck\n\nInvoked with: "
                            f"{str!r}, {count!r}")
        count = count.__index__()
        if count == 0 and not exactly:
            raise RuntimeError("count != 0 || exactly INTERNAL ASSERT FAILED: Count == 0 && "
                               "!exactly doesn't do anything")
        if count:
            self._add(_COUNT, text, count)
        if exactly:
            self._add(_NOT, text)
        return self

    def check_dag(self, str: str) -> FileCheck:  # noqa: A002
        """``str`` occurs after the previous match, in any order within its CHECK-DAG group."""
        return self._add(_DAG, _as_bytes(str, "check_dag"))

    def check_source_highlighted(self, str: str) -> FileCheck:  # noqa: A002
        """``str`` occurs with exactly its bytes underlined by ``~`` on the next line."""
        return self._add(_HIGHLIGHTED, _as_bytes(str, "check_source_highlighted"))

    def check_regex(self, str: str) -> FileCheck:  # noqa: A002
        """The regular expression ``str`` matches after the previous match."""
        return self._add(_REGEX, _as_bytes(str, "check_regex"))

    # -- running --------------------------------------------------------------------------
    def run(self, checks_file: str, test_file: str | None = None) -> None:
        """``run(test_string)`` applies the added checks; ``run(checks, test_string)`` first
        adds the ``# CHECK...:`` directives found in ``checks``."""
        if test_file is None:
            text = _as_bytes(checks_file, "run")
        else:
            self._parse(_as_bytes(checks_file, "run", "checks_file"))
            text = _as_bytes(test_file, "run", "test_file")
        self._has_run = True
        if not self._groups:
            raise RuntimeError("No checks have been added to this instance ofFilecheck! Check "
                               "for bad input.")
        self._run(_Source(text))

    def _parse(self, checks: bytes) -> None:
        start = self._next_directive(checks, 0)
        while start >= 0:
            start = self._parse_one(checks, start)
            start = self._next_directive(checks, start)

    @staticmethod
    def _next_directive(checks: bytes, pos: int) -> int:
        """The offset just after the next ``#`` (up to six blanks) ``CHECK``, or -1."""
        while True:
            start = checks.find(b"#", pos)
            if start < 0:
                return -1
            start += 1
            i = 0
            while start + i < len(checks) and i < 6 and checks[start + i] in (32, 9):
                i += 1
            if checks[start + i:start + i + 5] == b"CHECK":
                return start + i + 5
            pos = start + i + 1

    def _parse_one(self, checks: bytes, start: int) -> int:
        for kind, suffix in _SUFFIXES:
            if not checks.startswith(suffix, start):
                continue
            body = start + len(suffix)
            line_end = checks.find(b"\n", body)
            line_end = len(checks) if line_end < 0 else line_end
            count, exactly = None, False
            if kind == _COUNT:
                if checks.startswith(b"EXACTLY-", body):
                    exactly, body = True, body + 8
                colon = _find(_Source(checks), b":", body, line_end)
                count = _stoll(checks[body:colon])
                body = colon + 2   # the ':' and the space after it
            text = checks[body:line_end]
            self._add(kind, text, count)
            if exactly:
                self._add(_NOT, text)
            return line_end
        self._has_run = True
        raise _fail(b"Could not parse check at:\n" + _highlight(checks, start, start + 1)
                    + b"Check for bad input.")

    def _run(self, src: _Source) -> None:
        prev = (0, 0)
        groups = self._groups
        i = 0
        while i < len(groups):
            group = groups[i]
            if group[0].kind != _NOT:
                prev = self._match(group, src, prev)
            elif i + 1 < len(groups):
                after = self._match(groups[i + 1], src, prev)
                self._check_nots(group, src, prev, after)
                prev = after
                i += 1
            else:
                end = len(src.text) + 1
                self._check_nots(group, src, prev, (end, end))
            i += 1

    @staticmethod
    def _check_nots(nots: list[_Check], src: _Source, prev: tuple[int, int],
                    after: tuple[int, int]) -> None:
        start, end = prev[1], after[0]
        if end < start:
            return
        for check in nots:
            _find_not(src, check.text, start, end, check)

    def _match(self, group: list[_Check], src: _Source, prev: tuple[int, int]
               ) -> tuple[int, int]:
        if group[0].kind == _DAG:
            begins, ends = [], []
            for check in group:
                pos = _find(src, check.text, prev[1], check=check)
                begins.append(pos)
                ends.append(pos + len(check.text))
            return min(begins), max(ends)
        check = group[0]
        kind, text, start = check.kind, check.text, prev[1]
        if kind == _CHECK:
            pos = _find(src, text, start, check=check)
            return pos, pos + len(text)
        if kind == _SAME:
            pos = _find(src, text, start, check=check)
            _find_not(src, b"\n", prev[1], pos, check)
            return pos, pos + len(text)
        if kind == _NEXT:
            line_end = _find(src, b"\n", start, check=check)
            pos = _find(src, text, line_end + 1, check=check)
            _find_not(src, b"\n", line_end + 1, pos, check)
            return pos, pos + len(text)
        if kind == _COUNT:
            first = None
            end = start
            for _ in range(check.count):
                start = _find(src, text, start, check=check)
                first = start if first is None else min(first, start)
                end = start = start + len(text)
            return first, end
        if kind == _HIGHLIGHTED:
            self._check_highlighted(check, src, start)
            return start, start
        pos = _find_regex(src, text, start, check)
        return pos, pos + len(text)

    @staticmethod
    def _check_highlighted(check: _Check, src: _Source, start: int) -> None:
        """``check.text`` occurs with its bytes (and no more) underlined by ``~`` on the next
        line; the search range does not advance."""
        text, token = src.text, check.text
        n = len(text)

        def not_highlighted(pos: int) -> RuntimeError:
            return _fail(b"Expected to find " + _quoted(token) + b"highlighted but it is not.\n"
                         + _highlight(text, pos, len(token)))

        search, found, pos = start, False, start
        while pos < n:
            pos = text.find(token, search)
            if pos < 0:
                break
            found = True
            line = src.lineno_for_offset(pos)
            col = pos - src.line_starts[line]
            if line + 1 >= len(src.line_starts):
                raise not_highlighted(pos)
            hl_start = src.line_starts[line + 1] + col
            hl_end = min(hl_start + len(token), n)
            if hl_end >= n:
                raise not_highlighted(pos)
            if all(text[i] == 126 for i in range(hl_start, hl_end)):
                _find_not(src, b"~", hl_start - 1, hl_start, check)
                _find_not(src, b"~", hl_end, hl_end + 1, check)
                return
            search = pos + 1
        if not found:
            _find(src, token, start, check=check)
        raise not_highlighted(start)


def _stoll(digits: bytes) -> int:
    # std::stoll: optional blanks and sign, then at least one digit; trailing text ignored.
    match = re.match(rb"\s*[+-]?\d+", digits)
    if match is None:
        raise ValueError("stoll")
    return int(match.group())
