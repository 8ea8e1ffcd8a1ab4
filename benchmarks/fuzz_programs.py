"""Programs for the fuzz campaign (benchmarks/fuzz_campaign.py): mutated real PyTorch
files, and hypothesmith programs spliced with PyTorch code.

Why mutate real files: the rules only parse files that use PyTorch, so random programs
alone never reach a fix. Seeds are the project's own examples, the rules' VALID/INVALID
snippets, the verification corpus and any folders of fetched repositories; mutations
are the damage real trees carry (a deleted token, a pasted line twice, tabs mixed with
spaces, a declared encoding or a BOM, CRLF/CR/LF mixed, a file cut short, unusual
whitespace that `str.splitlines` treats as a line break but Python does not).

Everything is bytes: the tool reads bytes and must write back the same encoding.
Every choice comes from the `random.Random` passed in, so a seed reproduces a program.
"""

from __future__ import annotations

import codecs
import io
import random
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Program:
    """One generated input: its bytes and how it was made (for the failure report)."""

    data: bytes
    origin: str
    steps: tuple[str, ...] = ()

    def describe(self) -> str:
        return " -> ".join((self.origin, *self.steps))


def project_seeds(root: Path = ROOT) -> list[tuple[str, bytes]]:
    """(name, bytes) of every seed the repository itself holds."""
    seeds: list[tuple[str, bytes]] = []
    for path in sorted((root / "examples").glob("*.py")):
        seeds.append((f"examples/{path.name}", path.read_bytes()))
    for path in sorted((root / "benchmarks" / "verification_corpus").rglob("*.py")):
        seeds.append((str(path.relative_to(root)), path.read_bytes()))
    seeds.extend(rule_example_seeds())
    return seeds


def rule_example_seeds() -> list[tuple[str, bytes]]:
    """The rules' VALID and INVALID snippets (and the expected fixes) as seeds."""
    from autograd_fix.codemods.registry import all_rules

    seeds = []
    for rule in all_rules():
        examples = rule.examples()
        for kind, group in (("valid", examples.valid), ("invalid", examples.invalid)):
            for number, example in enumerate(group, start=1):
                seeds.append((f"{rule.code}/{kind}{number}", example.source.lstrip("\n").encode("utf-8")))
                if example.expected:
                    seeds.append((f"{rule.code}/{kind}{number}-fixed", example.expected.lstrip("\n").encode("utf-8")))
    return seeds


def folder_seeds(folders: list[Path], limit_bytes: int = 60_000) -> list[tuple[str, bytes]]:
    """`.py` files under `folders` (fetched repositories); very large files are skipped
    so one program does not cost as much as a hundred."""
    seeds = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if 0 < len(data) <= limit_bytes:
                seeds.append((str(path), data))
    return seeds


# --- mutations: bytes -> bytes, each picks its spot with `rng` ---------------------

ENCODINGS = ("latin-1", "cp1252", "iso-8859-15", "utf-8", "euc-jp", "koi8-r")
ODD_BREAKS = ("\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _text(data: bytes) -> tuple[str, str, bool]:
    """Decode as the interpreter would (falling back to latin-1 for broken input)."""
    bom = data.startswith(codecs.BOM_UTF8)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        encoding = "latin-1"
    encoding = "utf-8" if encoding == "utf-8-sig" else encoding
    body = data[3:] if bom else data
    try:
        return body.decode(encoding), encoding, bom
    except (UnicodeDecodeError, LookupError):
        return body.decode("latin-1"), "latin-1", bom


def _encode(text: str, encoding: str, bom: bool) -> bytes:
    data = text.encode(encoding, "replace")
    return codecs.BOM_UTF8 + data if bom else data


def _split_universal(text: str) -> list[str]:
    """Lines split the way Python's tokenizer does (\\r\\n, \\r, \\n), ends kept."""
    lines, start, i = [], 0, 0
    while i < len(text):
        if text[i] == "\n" or text[i] == "\r":
            end = i + 2 if text.startswith("\r\n", i) else i + 1
            lines.append(text[start:end])
            start = i = end
            continue
        i += 1
    if start < len(text):
        lines.append(text[start:])
    return lines


def delete_token(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    text, encoding, bom = _text(data)
    tokens = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type not in (tokenize.ENDMARKER, tokenize.DEDENT) and token.string:
                tokens.append(token)
    except (tokenize.TokenError, SyntaxError):
        pass
    if not tokens:
        return data, "delete-token(none)"
    token = rng.choice(tokens)
    lines = _split_universal(text)
    (row, col), (end_row, end_col) = token.start, token.end
    if row != end_row or row > len(lines):
        return data, "delete-token(skipped multi-line)"
    line = lines[row - 1]
    lines[row - 1] = line[:col] + line[end_col:]
    return _encode("".join(lines), encoding, bom), f"delete-token({token.string[:20]!r}@{row}:{col})"


def duplicate_line(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    text, encoding, bom = _text(data)
    lines = _split_universal(text)
    if not lines:
        return data, "duplicate-line(empty)"
    index = rng.randrange(len(lines))
    line = lines[index] if lines[index].endswith(("\n", "\r")) else lines[index] + "\n"
    lines.insert(index, line)
    return _encode("".join(lines), encoding, bom), f"duplicate-line({index + 1})"


def mix_indentation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Some indented lines get a tab for their first 8 (or 4) spaces, or a tab then spaces."""
    text, encoding, bom = _text(data)
    lines = _split_universal(text)
    indented = [i for i, line in enumerate(lines) if line.startswith("    ")]
    if not indented:
        return data, "mix-indent(none)"
    style = rng.choice(("tab-for-8", "tab-for-4", "tab-then-spaces", "one-block"))
    chosen = rng.sample(indented, k=max(1, len(indented) // rng.choice((1, 2, 5))))
    if style == "one-block":
        start = rng.choice(indented)
        chosen = [i for i in indented if i >= start][: rng.randint(1, 8)]
    for i in chosen:
        line = lines[i]
        if style == "tab-for-8" and line.startswith(" " * 8):
            lines[i] = "\t" + line[8:]
        elif style in ("tab-for-4", "one-block"):
            lines[i] = "\t" + line[4:]
        else:
            lines[i] = "\t  " + line[4:]
    return _encode("".join(lines), encoding, bom), f"mix-indent({style},{len(chosen)})"


def declare_encoding(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A PEP 263 cookie (and a non-ASCII comment/string to make it matter), a UTF-8 BOM,
    or a cookie that does not match the bytes."""
    text, _, _ = _text(data)
    choice = rng.choice(("cookie", "cookie", "bom", "bom+cookie", "wrong-cookie", "unknown-cookie"))
    accent = rng.choice(("é", "ü", "ñ", "ß", "Ω", "ж", "€"))
    lines = _split_universal(text)
    insert_at = rng.randrange(len(lines) + 1)
    newline = "\r\n" if "\r\n" in text else "\n"
    lines.insert(insert_at, f"# température {accent}{newline}" if rng.random() < 0.5 else f"label = 'réseau {accent}'{newline}")
    body = "".join(lines)
    if choice == "bom":
        return _encode(body, "utf-8", True), "encoding(bom)"
    encoding = rng.choice(ENCODINGS)
    cookie_name = "utf-8" if choice == "bom+cookie" else encoding
    if choice == "unknown-cookie":
        cookie_name = "klingon-7"
    cookie = f"# -*- coding: {cookie_name} -*-{newline}"
    shebang = body.startswith("#!")
    if shebang:
        first, _, rest = body.partition(newline)
        body = first + newline + cookie + rest
    else:
        body = cookie + body
    if choice == "bom+cookie":
        return _encode(body, "utf-8", True), "encoding(bom+cookie)"
    if choice == "wrong-cookie":
        actual = rng.choice([e for e in ENCODINGS if e != encoding])
        return _encode(body, actual, False), f"encoding(cookie {encoding}, bytes {actual})"
    return _encode(body, encoding if choice != "unknown-cookie" else "utf-8", False), f"encoding({cookie_name})"


def line_endings(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    text, encoding, bom = _text(data)
    lines = _split_universal(text)
    style = rng.choice(("crlf", "cr", "lf", "mixed", "mixed-crlf-lf"))
    endings = {"crlf": ("\r\n",), "cr": ("\r",), "lf": ("\n",), "mixed": ("\r\n", "\r", "\n"), "mixed-crlf-lf": ("\r\n", "\n")}[style]
    out = []
    for line in lines:
        body = line.rstrip("\r\n")
        out.append(body + (rng.choice(endings) if body != line else ""))
    return _encode("".join(out), encoding, bom), f"line-endings({style})"


def truncate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    if len(data) < 2:
        return data, "truncate(short)"
    cut = rng.randrange(1, len(data))
    return data[:cut], f"truncate({cut}/{len(data)})"


def odd_whitespace(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A form feed at a line start (legal indentation), or a character `str.splitlines`
    breaks at inside a comment or string (one line to Python, two to naive code)."""
    text, encoding, bom = _text(data)
    lines = _split_universal(text)
    if not lines:
        return data, "odd-whitespace(empty)"
    index = rng.randrange(len(lines))
    char = rng.choice(ODD_BREAKS)
    if encoding != "utf-8" and ord(char) > 0x7F:
        char = "\x0c"
    line = lines[index]
    body = line.rstrip("\r\n")
    place = rng.choice(("line-start", "comment", "string"))
    if place == "line-start":
        lines[index] = "\x0c" + line
    elif place == "comment":
        lines[index] = body + f"  # note{char}more" + line[len(body):]
    else:
        indent = body[: len(body) - len(body.lstrip())]
        lines.insert(index, f"{indent}_tag = 'a{char}b'\n")
    return _encode("".join(lines), encoding, bom), f"odd-whitespace({place},{char!r})"


def strip_final_newline(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    return data.rstrip(b"\r\n"), "no-final-newline"


def nest_in_block(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The whole file indented under `if True:` / `class Wrapper:` / `try:` (so top-level
    code becomes nested and module-level assumptions are tested)."""
    text, encoding, bom = _text(data)
    lines = _split_universal(text)
    head = rng.choice(("if True:", "class Wrapper:", "def wrapper():", "try:"))
    indent = rng.choice(("    ", "\t", "  "))
    newline = "\r\n" if "\r\n" in text else "\n"
    body = [indent + line if line.strip() else line for line in lines]
    if body and not body[-1].endswith(("\n", "\r")):
        body[-1] += newline
    parts = [head + newline, indent + "pass" + newline, *body]
    if head == "try:":
        parts.append(f"except Exception:{newline}{indent}pass{newline}")
    return _encode("".join(parts), encoding, bom), f"nest({head!r},{indent!r})"


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _simple(line: str) -> bool:
    """A one-line simple statement that can share its line (a rough textual test)."""
    body = line.strip()
    return bool(body) and not body.endswith((":", "\\", ",", "(", "[", "{")) and not body.startswith(
        ("#", "@", "if ", "for ", "while ", "with ", "def ", "class ", "try", "else", "elif ", "except", "finally", "return", "import ", "from ", '"', "'", ")", "]", "}")
    ) and body.count("(") == body.count(")") and body.count("[") == body.count("]") and "#" not in body and '"""' not in body


def restyle(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Valid code written another way, which a fix must keep valid: two statements on one
    line (`a; b`), a one-line block (`for x in xs: f(x)`), a backslash continuation,
    `torch` under another alias, or a comment between statements."""
    text, encoding, bom = _text(data)
    lines = _split_universal(text)
    style = rng.choice(("semicolon", "one-line-block", "backslash", "alias", "comment"))
    if style == "alias" and "import torch\n" in text:
        alias = rng.choice(("th", "T", "pt"))
        joined = text.replace("import torch\n", f"import torch as {alias}\n", 1).replace("torch.", f"{alias}.")
        return _encode(joined, encoding, bom), f"restyle(alias {alias})"
    spots = list(range(len(lines) - 1))
    rng.shuffle(spots)
    for i in spots:
        line, following = lines[i], lines[i + 1]
        ending = line[len(line.rstrip("\r\n")):]
        if style == "semicolon" and _simple(line) and _simple(following) and _indent_of(line) == _indent_of(following):
            lines[i : i + 2] = [line.rstrip("\r\n") + "; " + following.strip(" \t")]
            break
        if style == "one-line-block" and line.rstrip().endswith(":") and line.lstrip().startswith(("for ", "if ", "while ", "with ")):
            after = lines[i + 2] if i + 2 < len(lines) else ""
            deeper = len(_indent_of(following)) > len(_indent_of(line))
            if deeper and _simple(following) and len(_indent_of(after)) <= len(_indent_of(line)) and "#" not in line:
                lines[i : i + 2] = [line.rstrip("\r\n") + " " + following.strip(" \t")]
                break
        if style == "backslash" and _simple(line) and " = " in line:
            head, _, tail = line.rstrip("\r\n").partition(" = ")
            lines[i] = f"{head} = \\{ending or chr(10)}{_indent_of(line)}    {tail}{ending}"
            break
        if style == "comment" and line.strip() and not line.rstrip().endswith(("\\", ",", "(")) and _simple(line):
            lines.insert(i + 1, f"{_indent_of(following) if following.strip() else _indent_of(line)}# {rng.choice(('TODO', 'noqa', 'note: keep'))}{ending or chr(10)}")
            break
    else:
        return data, f"restyle({style}: no spot)"
    return _encode("".join(lines), encoding, bom), f"restyle({style}@{i + 1})"


Mutation = Callable[[bytes, random.Random], tuple[bytes, str]]

#: (mutation, weight): line endings and encodings are cheap and the most common in the wild
MUTATIONS: tuple[tuple[Mutation, int], ...] = (
    (delete_token, 3),
    (duplicate_line, 3),
    (mix_indentation, 3),
    (declare_encoding, 2),
    (line_endings, 3),
    (truncate, 1),
    (odd_whitespace, 2),
    (strip_final_newline, 1),
    (nest_in_block, 1),
    (restyle, 4),
)


def mutate(seed: tuple[str, bytes], rng: random.Random) -> Program:
    """A seed with 0 to 3 random mutations (0 keeps a share of clean real files)."""
    name, data = seed
    steps = []
    functions = [m for m, _ in MUTATIONS]
    weights = [w for _, w in MUTATIONS]
    for mutation in rng.choices(functions, weights, k=rng.choice((0, 1, 1, 2, 2, 3))):
        data, step = mutation(data, rng)
        steps.append(step)
    return Program(data=data, origin=f"seed {name}", steps=tuple(steps))


# --- hypothesmith: random programs, joined to PyTorch code so the rules run ---------


def hypothesmith_sources(count: int, seed: int) -> list[str]:
    """`count` programs from hypothesmith (grammar- and libcst-node-based), reproducible
    from `seed`. Generated through a Hypothesis test so no `.example()` warning applies."""
    import warnings

    import hypothesmith
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    found: list[str] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.one_of(hypothesmith.from_grammar(), hypothesmith.from_node()))
    def collect(source: str) -> None:
        found.append(source)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collect()
    return found


def splice(source: str, seed: tuple[str, bytes], rng: random.Random) -> Program:
    """A hypothesmith program before, after, or inside a PyTorch seed (at a top-level
    line boundary of the seed)."""
    name, data = seed
    text, encoding, bom = _text(data)
    lines = _split_universal(text)
    where = rng.choice(("before", "after", "middle"))
    piece = source if source.endswith("\n") else source + "\n"
    if where == "before":
        joined = "import torch\n" + piece + text
    elif where == "after":
        joined = text + ("" if text.endswith(("\n", "\r")) else "\n") + piece
    else:
        tops = [i for i, line in enumerate(lines) if line[:1] not in (" ", "\t", "", "\n", "\r", ")", "]", "}")]
        at = rng.choice(tops) if tops else 0
        joined = "".join(lines[:at]) + piece + "".join(lines[at:])
    return Program(data=_encode(joined, encoding, bom), origin=f"hypothesmith + seed {name}", steps=(f"splice({where})",))


def concatenate(first: tuple[str, bytes], second: tuple[str, bytes]) -> tuple[str, bytes]:
    """Two seeds as one file (the second re-encoded in the first's encoding)."""
    text, encoding, bom = _text(first[1])
    other, _, _ = _text(second[1])
    joined = text + ("" if text.endswith(("\n", "\r")) else "\n") + other
    return f"{first[0]} + {second[0]}", _encode(joined, encoding, bom)


def programs(
    seeds: list[tuple[str, bytes]],
    rng: random.Random,
    hypothesmith_pool: list[str],
    hypothesmith_share: float = 0.25,
    concat_share: float = 0.15,
) -> Iterator[Program]:
    """An endless stream of programs: mutated seeds (some made of two seeds, so fixes of
    several rules meet in one file), and hypothesmith ones spliced into seeds (then
    sometimes mutated too)."""
    while True:
        seed = rng.choice(seeds)
        if rng.random() < concat_share:
            seed = concatenate(seed, rng.choice(seeds))
        if hypothesmith_pool and rng.random() < hypothesmith_share:
            program = splice(rng.choice(hypothesmith_pool), seed, rng)
            if rng.random() < 0.3:
                mutated = mutate((program.origin, program.data), rng)
                program = Program(mutated.data, program.origin, program.steps + mutated.steps)
            yield program
        else:
            yield mutate(seed, rng)
