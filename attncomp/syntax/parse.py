"""Spec text -> syntax tree (`attncomp.syntax.ast`), with every parse error located.

The grammar is in grammar.lark, loaded once (LALR, positions kept). The parser does no semantic
checks: key names and value types are the IR's business.
"""

from __future__ import annotations

import functools
from pathlib import Path

from lark import Lark, Token, Transformer, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from attncomp.errors import Span, SpecError
from attncomp.syntax import ast

MAX_NESTING = 32  # blocks and calls nested deeper than this are certainly a mistake

_FRIENDLY = {
    "NAME": "a name",
    "NUMBER": "a number",
    "STRING": 'a "string"',
    "MINUS": '"-"',
    "$END": "the end of the file",
}


@functools.cache
def _parser() -> Lark:
    grammar = Path(__file__).with_name("grammar.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", start=["start", "override"], maybe_placeholders=False)


def normalise_newlines(text: str) -> str:
    """The one definition of a line: it ends at "\n", "\r\n" or a lone "\r" (as in Python's tokenizer).

    Nothing else ends a line: form feed, \v, \x1c-\x1e, U+0085, U+2028 and U+2029 are characters of
    the line they are on (inside a comment they are part of it; elsewhere they are unexpected, and the
    error points at them). The parser counts lines and columns on the normalised text, and the error
    printer cuts its source lines from the same text, so the two always agree.
    """
    return text.replace("\r\n", "\n").replace("\r", "\n")


class _Source:
    """The text being parsed (newlines normalised), so spans can carry their source line."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.lines = text.split("\n")

    def span(self, line: int, column: int, width: int = 1) -> Span:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return Span(self.path, line, column, text, max(1, width))

    def at(self, token: Token) -> Span:
        return self.span(token.line, token.column, len(str(token)))


LANGUAGE = 1  # the spec language's version: a file may say `attncomp 1`; absent means this one
VERSION_READ = object()  # what the `version` rule leaves in the tree once checked


class _Build(Transformer):
    """Parse tree -> ast; one method per grammar rule, named after it."""

    def __init__(self, source: _Source):
        super().__init__()
        self.source = source

    def start(self, children):
        children = [c for c in children if c is not VERSION_READ]
        extends = children[0] if children and isinstance(children[0], ast.Extends) else None
        items = tuple(c for c in children if not isinstance(c, ast.Extends))
        return ast.File(self.source.path, extends, items)

    def version(self, children):
        """`attncomp N`: this attncomp reads the language's versions 1 to LANGUAGE; a file written for a
        later one is refused here, before a key of it could be misread."""
        (token,) = children
        text = str(token)
        if not text.isdigit() or not 1 <= int(text) <= LANGUAGE:
            raise SpecError(f"this file is written in attncomp language {text[:20]}, but this attncomp reads "
                            f"version{'s 1 to' if LANGUAGE > 1 else ''} {LANGUAGE}", self.source.at(token),
                            hint=f"write `attncomp {LANGUAGE}` (or nothing: the current version)")
        return VERSION_READ

    def override(self, children):
        return children[0]

    def extends(self, children):
        (string,) = children
        return ast.Extends(string[1:-1], self.source.at(string))

    def block(self, children):
        name, *rest = children
        label = rest.pop(0) if rest and isinstance(rest[0], Token) else None
        label_span = self.source.at(label) if label is not None else None
        return ast.Block(str(name), str(label) if label else None, tuple(rest), self.source.at(name), label_span)

    def label(self, children):
        return children[0]

    def assign(self, children):
        key, value = children
        return ast.Assign(tuple(str(t) for t in key), value, self.source.at(key[0]))

    def key(self, children):
        return children

    def number(self, children):
        return self._number(children[0], negative=False)

    def negative(self, children):
        return self._number(children[1], negative=True)

    def _number(self, token: Token, negative: bool) -> ast.Number:
        text = str(token)
        cut = len(text)
        while cut and (text[cut - 1].isalpha() or text[cut - 1] == "%"):
            cut -= 1
        # an exponent's 'e' belongs to the digits: 1e-9 has no unit
        digits, unit = text[:cut], text[cut:]
        return ast.Number(digits, unit, negative, self.source.at(token))

    def string(self, children):
        token = children[0]
        return ast.String(str(token)[1:-1], self.source.at(token))

    def name(self, children):
        token = children[0]
        return ast.Name(str(token), self.source.at(token))

    def call(self, children):
        name, *args = children
        positional = tuple(a for a in args if not isinstance(a, ast.Kwarg))
        keywords = tuple(a for a in args if isinstance(a, ast.Kwarg))
        return ast.Call(str(name), positional, keywords, self.source.at(name))

    def numbers(self, children):
        bracket, *items = children
        return ast.Numbers(tuple(items), self.source.at(bracket))

    def kwarg(self, children):
        name, value = children
        return ast.Kwarg(str(name), value, self.source.at(name))

    def tolerance(self, children):
        value, tolerance = children
        return ast.PlusMinus(value, tolerance, _span_of(value))

    def offset(self, children):
        base, amount = children
        return ast.Offset(str(base), amount, self.source.at(base))


def _span_of(value: ast.Value) -> Span:
    return value.span


def _check_nesting(tree: Tree, source: _Source) -> None:
    """Reject absurd nesting before the recursive transform sees it (iteratively, no recursion)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if node.data in ("block", "call", "numbers"):
            depth += 1
            if depth > MAX_NESTING:
                token = node.children[0]
                raise SpecError(
                    f"blocks and calls are nested more than {MAX_NESTING} deep",
                    source.at(token) if isinstance(token, Token) else None,
                )
        stack.extend((c, depth) for c in node.children if isinstance(c, Tree))


def _describe(terminals: set[str]) -> str:
    names = set()
    for term in terminals:
        if term in _FRIENDLY:
            names.add(_FRIENDLY[term])
        else:
            try:
                pattern = _parser().get_terminal(term).pattern
                names.add(f'"{pattern.value}"')
            except KeyError:
                names.add(term.lower())
    ordered = sorted(names)
    return ordered[0] if len(ordered) == 1 else ", ".join(ordered[:-1]) + " or " + ordered[-1]


def _located(err: UnexpectedInput, source: _Source) -> SpecError:
    if isinstance(err, UnexpectedCharacters):
        char = source.lines[err.line - 1][err.column - 1 : err.column] if err.line <= len(source.lines) else ""
        shown = repr(char) if char else "character"
        return SpecError(f"unexpected {shown}; expected {_describe(set(err.allowed))}",
                         source.span(err.line, err.column))
    if isinstance(err, UnexpectedToken) and err.token.type != "$END":
        token = err.token
        shown = str(token) if str(token).startswith('"') else f'"{token}"'  # a string token has its quotes
        before = source.lines[token.line - 1][: token.column - 1].strip() if token.line <= len(source.lines) else ""
        hint = ('extends "PATH" is the first line of a file (after `attncomp N` alone), before every block and key'
                if before == "extends" else None)
        return SpecError(f"unexpected {shown}; expected {_describe(set(err.expected))}", source.at(token), hint=hint)
    expected = set(getattr(err, "expected", ()) or ())
    last = len(source.lines)
    if last > 1 and not source.lines[-1]:  # the file ends with a newline: point after the last line
        last -= 1
    span = source.span(last, len(source.lines[last - 1]) + 1)
    return SpecError(f"unexpected end of file; expected {_describe(expected)}", span)


def _run(text: str, path: str, start: str):
    text = normalise_newlines(text)
    source = _Source(path, text)
    try:
        tree = _parser().parse(text, start=start)
    except (UnexpectedToken, UnexpectedCharacters, UnexpectedEOF) as err:
        raise _located(err, source) from None
    _check_nesting(tree, source)
    try:
        return _Build(source).transform(tree)
    except VisitError as err:  # a rule's own located error (`version`), not a bug
        if isinstance(err.orig_exc, SpecError):
            raise err.orig_exc from None
        raise


def parse(text: str, path: str = "<string>") -> ast.File:
    """Parse the text of one spec file."""
    return _run(text, path, "start")


def parse_override(text: str) -> ast.Assign:
    """Parse one command-line override, `key.path=value`."""
    return _run(text, f"--set {text}", "override")


def decode_source(data: bytes, path: str) -> str:
    """Spec bytes -> text, with a located error for bytes that are not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        before = normalise_newlines(data[: err.start].decode("utf-8")).split("\n")
        line, column = len(before), len(before[-1]) + 1
        raise SpecError(
            f"the file is not UTF-8 text (byte 0x{data[err.start]:02x} cannot start a character)",
            Span(path, line, column),
        ) from None
