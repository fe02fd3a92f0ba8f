#!/usr/bin/env python3
"""data::read_csv against pandas.read_csv on files made from a seed.

Each seed makes FILES_PER_SEED files, each read with its own options (a header or none, non_finite on or off,
float32 or float64, ',' ';' or tab):
  - tables written by pandas' DataFrame.to_csv: random names (quotes, commas, line breaks, spaces, non-ASCII), float
    columns over the whole double range (subnormals, many digits through float_format), integer columns up to
    2^64, NaN (every na_rep pandas reads back, and some it does not) and infinities, QUOTE_MINIMAL/ALL/NONNUMERIC,
    "\\n", "\\r\\n" or "\\r" line ends, a byte order mark or none;
  - odd files written here: cells from a pool of spellings (numbers in every form pandas reads, up to 40 digits and
    exponents past the double range, pandas' NaN and infinity spellings and their near misses, text, integers past
    64 bits), quoted or not (line breaks in quotes, text after a closing quote), blank and whitespace lines, ragged
    rows, duplicate and empty names, an unclosed quote, mixed line ends.
csv_probe (tests/differential/csv_probe.cpp) reads every file with read_csv; pandas.read_csv reads it with the same
header, delimiter and its defaults otherwise. A file is one input compared. The rule:
  - where read_csv reads a table, pandas reads the same one: the same names (without the spaces and tabs around
    them: a departure), the same number of rows, every value bit for bit (pandas 3.1's float parser rounds
    correctly; for older pandas the driver asks for float_precision="round_trip"), or in float32 the float32 of
    pandas' double; documented departures (docs/your-data.md) are checked as documented;
  - where read_csv refuses, its message names the file and a line, and pandas either refuses too or reads something
    read_csv does not read on purpose, which the message names: a cell pandas reads as text, NaN or an infinity
    (without non_finite; or one float32 rounds to an infinity), a row Python's csv module finds with another count
    of fields than the first, a column pandas names itself ("Unnamed: 3", "a.1"), a header without rows; the line
    a message names is where Python's csv module finds that cell or row.
Usage: csv_tables.py --probe PATH (--seeds A-B | --random SECONDS --start N) [--keep DIR]
On a difference: prints it, the seed and the command that reproduces it, and exits 1.
"""
import os
import sys

# This file is named after what it tests; Python puts its folder first on sys.path, where it would stand in for the
# standard library's csv module (which pandas imports).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402
import csv as pycsv  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

FILES_PER_SEED = 10
PANDAS_VERSION = tuple(int(x) for x in re.findall(r"\d+", pd.__version__)[:2])
# pandas 3.1 deprecated float_precision: every mode uses one converter, correctly rounded (measured: 20000 random
# decimals of 1 to 40 digits, exponents -330 to 310, all equal to Python's float()). Before 3.1 the default ("high",
# precise_xstrtod) is not correctly rounded past 17 digits, so the exact comparison uses "round_trip" there.
READ_KW = {} if PANDAS_VERSION >= (3, 1) else {"float_precision": "round_trip"}
NA_SPELLINGS = ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
                "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]
NA_NEAR_MISSES = ["NAN", " nan", "nan ", "+nan", "Nan", "none", "na", "NULL ", "N/a", "?"]
INF_SPELLINGS = ["inf", "Inf", "INF", "+inf", "-inf", "Infinity", "-Infinity", "+INFINITY", "infinity", "-iNf"]
INF_NEAR_MISSES = [" inf", "inf ", "infinit", "infinityy", "--inf", "+-inf", "in f"]
TEXT = ["abc", "True", "False", "true", "0x10", "1_000", "1,5", "--1", "+-1", "1e", "e5", ".", "-", "+", "1 2", "1.2.3",
        "\u0661", "1e5.5", "1d5", "x\"y", "\"q\"", "1\"2"]
BIG_INTS = ["9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616",
            "-9223372036854775808", "-9223372036854775809", "123456789012345678901234567890"]
NAME_CHARS = "abcxyzXYZ_019 ,;\"'\n\r\t-+#/()\u00e9\u00df\u4e2d\U0001f600"
INT_RE = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+[ \t\n\v\f\r]*")  # ASCII: Python's \d and int() take "\u0661"


# ----------------------------------------------------------------------------------------------------------- inputs
def random_name(rng):
    while True:
        n = "".join(rng.choice(NAME_CHARS) for _ in range(rng.randint(1, 8)))
        # Not a name pandas would make itself (its renaming of a duplicate "a" to "a.1", of an empty one to
        # "Unnamed: 2"): those are what the ragged/duplicate checks look for.
        if n.strip(" \t") and not n.startswith("Unnamed") and "\r" not in n.strip(" \t")[:1]:
            return n


def unique_names(rng, k):
    names, seen = [], set()
    while len(names) < k:
        n = random_name(rng)
        if n.strip(" \t") not in seen:
            seen.add(n.strip(" \t"))
            names.append(n)
    return names


def random_double(rng):
    kind = rng.random()
    if kind < 0.3:
        return rng.uniform(-1000, 1000)
    if kind < 0.55:
        return math.ldexp(rng.random() * rng.choice([-1, 1]), rng.randint(-1074, 1024))
    if kind < 0.65:
        return float(rng.randint(-10**6, 10**6))
    if kind < 0.75:
        return rng.choice([0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.1, 1 / 3])
    if kind < 0.85:
        return math.ldexp(rng.random(), rng.randint(-1074, -1022))  # subnormal
    return rng.gauss(0, 1) * 10 ** rng.randint(-30, 30)


def random_int(rng):
    kind = rng.random()
    if kind < 0.6:
        return rng.randint(-1000, 1000)
    if kind < 0.85:
        return rng.randint(-2**63, 2**63 - 1)
    return rng.randint(2**53 - 5, 2**53 + 5) * rng.choice([-1, 1])


def pandas_written(rng, header):
    """A table written by DataFrame.to_csv: its text, delimiter and what in it allows a refusal."""
    ncols, nrows = rng.randint(1, 7), rng.choice([1, 2, 3, rng.randint(1, 40), rng.randint(1, 200)])
    names = unique_names(rng, ncols)
    cols = {}
    for name in names:
        kind = rng.random()
        if kind < 0.35:
            cols[name] = [random_int(rng) for _ in range(nrows)]
        elif kind < 0.4:  # past int64: pandas writes the digits, and reads them back as uint64 or text
            cols[name] = np.array([rng.randint(0, 2**64 - 1) for _ in range(nrows)], dtype=np.uint64)
        else:
            special = rng.random() < 0.4
            values = []
            for _ in range(nrows):
                r = rng.random()
                values.append(float("nan") if special and r < 0.15 else
                              rng.choice([float("inf"), float("-inf")]) if special and r < 0.25 else random_double(rng))
            cols[name] = values
    df = pd.DataFrame(cols)
    df.columns = names
    kw = dict(index=False, header=header, sep=rng.choice([",", ",", ",", ";", "\t"]),
              lineterminator=rng.choice(["\n", "\r\n", "\r"]),
              quoting=rng.choice([pycsv.QUOTE_MINIMAL, pycsv.QUOTE_MINIMAL, pycsv.QUOTE_ALL, pycsv.QUOTE_NONNUMERIC]),
              na_rep=rng.choice(NA_SPELLINGS + NA_NEAR_MISSES[:2]),
              float_format=rng.choice([None, None, "%.17g", "%.25g", "%.40e", "%.3f", "%g", "%.0f"]))
    text = df.to_csv(None, **kw)
    refusable = set()
    # Python's csv writer quotes a line break only where it is in the line terminator: a name holding the other one
    # breaks the header line in two, which pandas reads as a short header and a short row (filled).
    if header and kw["quoting"] == pycsv.QUOTE_MINIMAL and \
            any(ch in n and ch not in kw["lineterminator"] for n in names for ch in "\r\n"):
        refusable.add("header broken")
    return text, kw["sep"], refusable


def number_spelling(rng):
    kind = rng.random()
    if kind < 0.3:
        return repr(random_double(rng))
    if kind < 0.5:  # many digits, a point anywhere, an exponent over and past the double range
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 40)))
        p = rng.randint(0, len(digits))
        s = digits[:p] + ("." if rng.random() < 0.8 else "") + digits[p:]
        if s == ".":
            s = "0."
        if rng.random() < 0.7:
            s += rng.choice("eE") + rng.choice(["", "+", "-"]) + str(rng.randint(0, 340))
        return rng.choice(["", "", "-", "+"]) + s
    if kind < 0.65:
        return str(random_int(rng))
    if kind < 0.8:
        return rng.choice(["+1.5", "-0", "007", ".5", "5.", "1.e5", "1E+05", "1e-05", "-.5e-3", "0e999999", "1e400",
                           "-1e400", "1e-400", "4.9e-324", "2.4703282292062328e-324", "2.4703282292062327e-324",
                           "1.7976931348623158e308", "1.7976931348623159e308", "00000.000001e6", "0.0"])
    # White space around a number: pandas reads one with a '+' sign through another parser (a departure).
    spaced = rng.choice(["1.5", "2", "-3e2", number_spelling(rng), "+" + number_spelling(rng).lstrip("+-")])
    return rng.choice([" ", "\t", "", "  "]) + spaced + rng.choice([" ", "\t", "", "\x0b", "\x0c"])


def cell_spelling(rng, text_rate, nonfinite_rate):
    r = rng.random()
    if r < text_rate:
        return rng.choice(TEXT + NA_NEAR_MISSES + INF_NEAR_MISSES + BIG_INTS)
    if r < text_rate + nonfinite_rate:
        return rng.choice(NA_SPELLINGS + INF_SPELLINGS)
    return number_spelling(rng)


def quote(cell, rng, sep, must, refusable):
    """The cell as written: quoted when it must be (or by chance), with text after the quote now and then."""
    needs = any(ch in cell for ch in (sep, '"', "\n", "\r")) or cell[:1] == '"'
    if needs or must or rng.random() < 0.15:
        q = '"' + cell.replace('"', '""') + '"'
        if rng.random() < 0.05:
            q += rng.choice([" ", "7", "x", '"'])  # text after the closing quote: pandas appends it
            if q.endswith('""'):  # the quote goes on: the fields of the line run together (pandas fills the row)
                refusable.update(("ragged row", "header broken"))
        return q
    return cell


def odd_file(rng, header):
    """A file written here, cell by cell, with the oddities pandas meets; and the oddities that allow a refusal."""
    sep = rng.choice([",", ",", ";", "\t"])
    ncols, nrows = rng.randint(1, 6), rng.randint(0, 25)
    text_rate = rng.choice([0, 0, 0.02, 0.1])
    nonfinite_rate = rng.choice([0, 0.05, 0.2])
    quote_all = rng.random() < 0.2
    ends = rng.choice([["\n"], ["\r\n"], ["\r"], ["\n", "\r\n", "\r"]])
    refusable = set()
    lines = []
    if header:
        names = unique_names(rng, ncols)
        if ncols > 1 and rng.random() < 0.08:
            names[rng.randrange(ncols)] = names[0].strip(" \t") + rng.choice(["", " "])
            refusable.add("duplicate name")
        if rng.random() < 0.05:
            names[rng.randrange(ncols)] = rng.choice(["", "  "])
            refusable.add("empty name")
        lines.append(sep.join(quote(n, rng, sep, quote_all, refusable) for n in names))
    ragged = rng.randrange(nrows) if nrows and rng.random() < 0.15 else -1
    for row in range(nrows):
        k = ncols
        if row == ragged:
            k = max(1, ncols + rng.choice([-1, 1]))
            if k != ncols:
                refusable.update(("ragged row", "header broken"))
        cells = [cell_spelling(rng, text_rate, nonfinite_rate) for _ in range(k)]
        if rng.random() < 0.03:
            cells[rng.randrange(k)] = rng.choice(["\n1\n", "2\r\n", " 3 ", "a\nb", "4,5"])  # quoted below
        lines.append(sep.join(quote(c, rng, sep, quote_all, refusable) for c in cells))
    out = ""
    for line in lines:
        while rng.random() < 0.05:
            blank = rng.choice(["", " ", "\t", "  \t"])
            out += blank + rng.choice(ends)
            if sep in blank:  # not blank with a tab delimiter: a row (or the header) of empty fields
                refusable.update(("ragged row", "header broken"))
        out += line + rng.choice(ends)
    if rng.random() < 0.3 and out:
        out = out.rstrip("\r\n")  # no line end on the last line
    if rng.random() < 0.03:
        out += '"' + rng.choice(["1", "abc,", "2\n3"])  # a quote never closed
        refusable.add("unclosed quote")
    return out, sep, refusable


def make_input(rng):
    header = rng.random() < 0.8
    if rng.random() < 0.55:
        text, sep, refusable = pandas_written(rng, header)
        kind = "pandas"
    else:
        text, sep, refusable = odd_file(rng, header)
        kind = "odd"
    if rng.random() < 0.2:
        header = not header  # a header read as a row, or a first row read as names
        refusable.add("header option flipped")
    if rng.random() < 0.25:
        text = "\ufeff" + text
    data = text.encode("utf-8")
    if data and rng.random() < 0.03:  # bytes that are not UTF-8 (pandas refuses the file: UnicodeDecodeError)
        at = rng.randrange(len(data))
        bad = rng.choice([b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80"])  # a surrogate, overlong, ...
        data = data[:at] + bad + data[at:]
    return dict(data=data, header=header, non_finite=rng.random() < 0.5,
                dtype=rng.choice(["f64", "f64", "f32"]), sep=sep, refusable=refusable, kind=kind)


# -------------------------------------------------------------------------------------------------------- comparison
def int_to_float(i):
    try:
        return float(i)  # rounds to nearest, ties to even
    except OverflowError:
        return math.copysign(math.inf, i)


def one_cell(text):
    """pandas' reading of one cell alone: a float, or None for text."""
    col = pd.read_csv(io.StringIO('x\n"' + text.replace('"', '""') + '"\n'), **READ_KW)["x"]
    if col.dtype.kind in "fiu":
        return float(col[0])
    if isinstance(col[0], int) and not isinstance(col[0], bool):  # past 64 bits: a Python int (a departure)
        return int_to_float(col[0])
    return None


def big_int_column(cells):
    """A column pandas reads as text because of an integer past 64 bits (as Python ints; or, beside a negative
    number or a non-integer, all of it as strings): read_csv reads each cell as the number it spells (a departure,
    docs/your-data.md). The values read_csv is to read, or None where the column is text for another reason."""
    def big(v):
        if isinstance(v, str) and INT_RE.fullmatch(v):
            v = int(v)
        return isinstance(v, int) and not isinstance(v, bool) and not -2**63 <= v < 2**63
    if not any(big(v) for v in cells):
        return None
    out = []
    for v in cells:
        if isinstance(v, float) and math.isnan(v):
            out.append(v)
        elif isinstance(v, int) and not isinstance(v, bool):
            out.append(int_to_float(v))
        elif isinstance(v, str) and INT_RE.fullmatch(v):
            out.append(float(v))  # the digits, correctly rounded ("-0" is -0.0; past the range, an infinity)
        elif isinstance(v, str) and one_cell(v) is not None:
            out.append(one_cell(v))
        else:
            return None
    return out


def pandas_view(path, inp):
    """pandas' reading: (None, error) or (table, None); table = dict(names, columns, index_ok), each column a list
    of floats, or None where pandas reads text (a str, object or bool column), and whether that text is integers past
    64 bits."""
    try:
        with open(path, "rb") as f:
            df = pd.read_csv(f, header=0 if inp["header"] else None, sep=inp["sep"], **READ_KW)
    except Exception as e:  # noqa: BLE001: every refusal of pandas counts as one
        return None, f"{type(e).__name__}: {e}"
    columns, big = [], []
    for j in range(df.shape[1]):
        s = df.iloc[:, j]
        kind = s.dtype.kind
        if kind == "f":
            columns.append([float(v) for v in s.to_numpy()])
            big.append(False)
        elif kind in "iu":
            columns.append([int_to_float(int(v)) for v in s.to_numpy()])
            big.append(False)
        else:
            col = big_int_column(list(s))
            columns.append(col)
            big.append(col is not None)
    index_ok = isinstance(df.index, pd.RangeIndex) and df.index.start == 0 and df.index.step == 1
    return dict(names=[str(c) for c in df.columns], columns=columns, big=big, rows=df.shape[0],
                index_ok=index_ok, df=df), None


def shown(s):
    """csv_format.hpp's detail::shown: a field as a message quotes it."""
    b = s.encode("utf-8")
    out = "".join(chr(c) if 0x20 <= c < 0x7f else "?" for c in b[:40])
    return out + "..." if len(b) > 40 else out


def raw_cells(path, inp):
    """The cells as pandas tokenizes them, before it reads numbers: a DataFrame of strings."""
    key = (path, inp["header"], inp["sep"])
    if key not in RAW_CACHE:
        RAW_CACHE.clear()
        with open(path, "rb") as f:
            RAW_CACHE[key] = pd.read_csv(f, header=0 if inp["header"] else None, sep=inp["sep"], dtype=str,
                                         keep_default_na=False)
    return RAW_CACHE[key]


RAW_CACHE = {}


def integer_column(path, inp, j):
    """Whether pandas reads column j as integers (with missing values, as floats): every cell is a missing-value
    spelling or an integer."""
    return all(v in NA_SPELLINGS or INT_RE.fullmatch(v) for v in raw_cells(path, inp).iloc[:, j])


def ulps(a, b, dtype):
    """How many doubles (float32s with dtype "f32") apart a and b are; same sign (an infinity is one past the
    largest finite)."""
    if dtype == "f32":
        return abs(int(np.array([a], np.float32).view(np.int32)[0]) - int(np.array([b], np.float32).view(np.int32)[0]))
    return abs(int(np.array([a]).view(np.int64)[0]) - int(np.array([b]).view(np.int64)[0]))


def signed_spaced(cell):
    """A number spelled with a '+' sign and white space around it, which pandas 3.1 rounds with another parser."""
    return cell.strip().startswith("+") and cell != cell.strip()


# pandas 3.1 reads a number with a '+' sign and white space around it with another parser, not correctly rounded:
# measured on 40000 random decimals (1 to 40 digits, exponents to 330) as " +x " and "+x\t": 25% one ulp off, 0.2%
# two, none more. read_csv rounds those correctly too (as Python's float()); against pandas, this tolerance.
PANDAS_SIGNED_SPACED_ULPS = 2


def bits(x):
    return "nan" if math.isnan(x) else float(x).hex()


def f32(x):
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def cr_blank_lines_before_sep(data, sep):
    """Where pandas' tokenizer drops a delimiter: the spans of the blank lines ended by a lone "\r" (outside quotes)
    that a line starting with the delimiter follows. Scans as pandas' tokenizer does: a quote opens a quoted field
    only as a field's first character, "" in one is a quote, and a line of spaces and tabs is blank."""
    sep, quote, spans = sep.encode(), b'"', []
    i, n, blank = 0, len(data), {ord(" "), ord("\t")} - {sep[0]}
    while i < n:  # at the start of a line, outside quotes
        j = i
        while j < n and data[j] in blank:
            j += 1
        if j < n and data[j:j + 1] == b"\r" and data[j + 1:j + 2] != b"\n" and data[j + 1:j + 2] == sep:
            spans.append((i, j + 1))
        # to the end of this record
        field_start, in_quotes = True, False
        while i < n:
            c = data[i:i + 1]
            if in_quotes:
                if c == quote and data[i + 1:i + 2] == quote:
                    i += 2
                    continue
                in_quotes = c != quote
                i += 1
                continue
            if field_start and c == quote:
                in_quotes, field_start = True, False
                i += 1
                continue
            if c in (b"\n", b"\r"):
                i += 2 if data[i:i + 2] == b"\r\n" else 1
                break
            field_start = c == sep
            i += 1
    return spans


def repaired(path, inp):
    """The file pandas is to read: itself, or where pandas' tokenizer would drop a delimiter (one that starts a line
    after a blank line ended by a lone "\r": its EAT_CRNL_NOP state skips it, shifting that row left), the file
    without those blank lines, which read_csv skips (a departure, docs/your-data.md)."""
    data, bom = inp["data"], 3 if inp["data"].startswith(b"\xef\xbb\xbf") else 0
    spans = cr_blank_lines_before_sep(data[bom:], inp["sep"])
    if not spans:
        return path
    STATS["departures: pandas drops a delimiter after a blank '\\r' line"] += 1
    while spans:  # a blank line taken out may leave another one before the delimiter
        for a, b in reversed(spans):
            data = data[:bom + a] + data[bom + b:]
        spans = cr_blank_lines_before_sep(data[bom:], inp["sep"])
    with open(path + ".pandas", "wb") as f:
        f.write(data)
    return path + ".pandas"


def record_lines(inp):
    """Python's csv module's reading of the file (an independent tokenizer): per record that pandas does not skip as
    blank, its first line and its fields. None where the two may disagree on what is blank (a record of one field
    of spaces and tabs, which pandas skips unquoted and keeps quoted)."""
    text = inp["data"].decode("utf-8-sig")
    reader = pycsv.reader(io.StringIO(text, newline=""), delimiter=inp["sep"], quotechar='"', doublequote=True,
                          strict=False)
    out, prev = [], 0
    for rec in reader:
        start, prev = prev + 1, reader.line_num
        if not rec:
            continue
        if len(rec) == 1 and rec[0] and not rec[0].strip(" \t"):
            return None
        out.append((start, rec))
    return out


def check_line(msg, inp, row, col=None):
    """None where the line the refusal names is the line (Python's csv module says) where that row, or its cell,
    starts; else the difference."""
    named = int(re.search(r"\(line (\d+)\)", msg).group(1))
    try:
        records = record_lines(inp)
    except (pycsv.Error, UnicodeDecodeError):
        return None
    index = row + (1 if inp["header"] else 0)
    if records is None or index >= len(records):
        return None
    start, rec = records[index]
    line = start + (len(re.findall(r"\r\n|\r|\n", "".join(rec[:col]))) if col is not None else 0)
    STATS["refusals whose line was checked"] += 1
    return None if line == named else f"the refusal names line {named}; Python's csv module starts it on {line}: {msg!r}"


def compare(path, inp, ours):
    """None where read_csv agrees with pandas, else the difference in words. Counts what it checked in STATS."""
    pandas_path = repaired(path, inp)
    table, perr = pandas_view(pandas_path, inp)
    nonfinite_ok = inp["non_finite"]
    if "error" in ours:
        msg = ours["error"]
        if not msg.startswith(f"policytrain::data::read_csv: {path}: "):
            return f"the refusal does not start with read_csv and the file: {msg!r}"
        if "is empty" not in msg and "no rows below it" not in msg and not re.search(r"\bline \d+", msg):
            return f"the refusal names no line: {msg!r}"
        if perr is not None:
            STATS["refused, as pandas"] += 1
            return None
        if not table["index_ok"]:
            STATS["refused, pandas shifts the rows"] += 1
            return None
        cell = re.search(r"row (\d+) \(line \d+\), column (\d+) \(", msg)
        why = re.match(r".*: ('.*' (is not a number|is a missing value|is not finite|is out of the range of a double"
                       r"|is out of the range of float32)|the value is missing)", msg, re.S)
        if cell and why:  # the cell named is one pandas reads as text, NaN or an infinity
            r, c, why = int(cell.group(1)) - 1, int(cell.group(2)) - 1, why.group(1)
            if r >= table["rows"] or c >= len(table["columns"]):
                return f"the refusal names row {r + 1}, column {c + 1}, outside pandas' table: {msg!r}"
            col = table["columns"][c]
            raw = table["df"].iloc[r, c]
            # pandas' value of the cell: from its column, or where the column is text, the cell read alone.
            if col is not None:
                value = col[r]
            elif isinstance(raw, float):
                value = raw
            else:
                value = one_cell(raw) if isinstance(raw, str) else None
            if "is not a number" in why:
                if value is not None:
                    return f"the refusal calls row {r + 1}, column {c + 1} text, pandas reads {value!r}: {msg!r}"
                if isinstance(raw, str) and f"'{shown(raw)}' is not a number" != why:
                    return f"the refusal quotes another cell than pandas' {raw!r}: {msg!r}"
                STATS["refused, text (pandas: a text column)"] += 1
                return check_line(msg, inp, r, c)
            if nonfinite_ok:
                return f"non_finite is on, yet a non-finite value is refused: {msg!r}"
            if "missing" in why and not (value is not None and math.isnan(value)):
                return f"the refusal calls row {r + 1}, column {c + 1} missing, pandas reads {value!r}: {msg!r}"
            if "out of the range" in why and col is not None and signed_spaced(raw_cells(pandas_path, inp).iloc[r, c]):
                value = float(raw_cells(pandas_path, inp).iloc[r, c])  # pandas may round it to the largest double
            if "of float32" in why:  # a double that float32 rounds to an infinity
                if inp["dtype"] != "f32" or value is None or not math.isinf(f32(value)):
                    return f"the refusal calls row {r + 1}, column {c + 1} past float32, pandas reads {value!r}: {msg!r}"
            elif ("not finite" in why or "out of the range" in why) and not (value is not None and math.isinf(value)):
                return f"the refusal calls row {r + 1}, column {c + 1} infinite, pandas reads {value!r}: {msg!r}"
            STATS["refused, NaN or infinity without non_finite"] += 1
            return check_line(msg, inp, r, c)
        # A refusal of the file as a whole, or of a row or header: allowed where the input has what it names.
        ragged = re.search(r"row (\d+) \(line \d+\): (\d+) fields, but the (?:header|first row) has (\d+) columns",
                           msg)
        if ragged:  # Python's csv module finds the row of that many fields, after a first record of the other count
            try:
                records = record_lines(inp)
            except (pycsv.Error, UnicodeDecodeError):
                records = None
            row, k, n = (int(x) for x in ragged.groups())
            index = row - 1 + (1 if inp["header"] else 0)
            if records is not None and index < len(records):
                if len(records[index][1]) != k or len(records[0][1]) != n:
                    return f"Python's csv module reads {len(records[index][1])} fields in that row and " \
                           f"{len(records[0][1])} in the first: {msg!r}"
                STATS["refused, ragged row"] += 1
                return check_line(msg, inp, row - 1)
        if "fields, but the" in msg and ("ragged row" in inp["refusable"] or "header option flipped" in inp["refusable"]
                                         or "header broken" in inp["refusable"]
                                         or "unclosed quote" in inp["refusable"]):
            STATS["refused, ragged row"] += 1
            return None
        if "header (line" in msg and inp["header"]:  # pandas names the column itself: "Unnamed: 3", "a.1"
            names = table["names"]
            empty = re.search(r"column (\d+): the column has no name", msg)
            twice = re.search(r"columns (\d+) and (\d+) are both named", msg)
            if empty and int(empty.group(1)) <= len(names) and \
                    names[int(empty.group(1)) - 1] == f"Unnamed: {int(empty.group(1)) - 1}":
                STATS["refused, duplicate or empty name"] += 1
                return None
            if twice and int(twice.group(2)) <= len(names):
                a, b = names[int(twice.group(1)) - 1], names[int(twice.group(2)) - 1]
                if a.strip(" \t") == b.strip(" \t") or re.fullmatch(re.escape(a) + r"\.\d+", b):
                    STATS["refused, duplicate or empty name"] += 1
                    return None
        if "header (line" in msg and ("duplicate name" in inp["refusable"] or "empty name" in inp["refusable"]
                                      or "header option flipped" in inp["refusable"]
                                      or "header broken" in inp["refusable"]):
            STATS["refused, duplicate or empty name"] += 1
            return None
        if "no rows below it" in msg and table["rows"] == 0:
            STATS["refused, no rows"] += 1
            return None
        if "not closed" in msg and "unclosed quote" in inp["refusable"]:
            STATS["refused, as pandas"] += 1
            return None
        return f"read_csv refuses a file pandas reads ({table['rows']} rows, names {table['names']}): {msg!r}"
    # read_csv read a table: pandas reads the same.
    if perr is not None:
        return f"read_csv reads a table where pandas refuses ({perr})"
    if not table["index_ok"]:
        return "read_csv reads a table where pandas takes the first column as the index (a ragged file)"
    names = [bytes.fromhex(h).decode("utf-8", errors="surrogateescape") for h in ours["names"]]
    want = [n.strip(" \t") for n in table["names"]] if inp["header"] else [str(j) for j in range(len(names))]
    if names != want:
        return f"names: read_csv {names!r}, pandas {table['names']!r} (expected {want!r})"
    if len(table["columns"]) != len(names) or ours["rows"] != table["rows"]:
        return f"shape: read_csv {ours['rows']}x{len(names)}, pandas {table['rows']}x{len(table['columns'])}"
    values = [float.fromhex(v) if "nan" not in v else float("nan") for v in ours["values"]]
    ncols = len(names)
    for j, col in enumerate(table["columns"]):
        if col is None:
            return f"column {j + 1} ({names[j]!r}): pandas reads text, read_csv numbers: {values[j::ncols][:5]}"
        for i, want_v in enumerate(col):
            got = values[i * ncols + j]
            if inp["dtype"] == "f32":
                want_v = f32(want_v)
            same = bits(got) == bits(want_v)
            if not same and got == want_v == 0 and integer_column(pandas_path, inp, j):
                # "-0" among integers (and missing values): pandas reads the integer 0, read_csv -0.0 (a departure)
                STATS["departures: -0 among integers"] += 1
                same = True
            departed = False
            if not same and not math.isnan(got) and not math.isnan(want_v):
                cell = raw_cells(pandas_path, inp).iloc[i, j]
                if signed_spaced(cell):
                    exact = float(cell) if inp["dtype"] == "f64" else f32(float(cell))
                    if bits(got) != bits(exact):
                        return (f"row {i + 1}, column {j + 1}: read_csv {bits(got)} for {cell!r}, correctly rounded "
                                f"{bits(exact)}")
                    if ulps(got, want_v, inp["dtype"]) > PANDAS_SIGNED_SPACED_ULPS:
                        return f"row {i + 1}, column {j + 1}: {cell!r} is {ulps(got, want_v, inp['dtype'])} ulps " \
                               f"off pandas"
                    STATS["departures: pandas not correctly rounded ('+' and white space)"] += 1
                    same = departed = True
            if not same:
                raw = table["df"].iloc[i, j]
                return (f"row {i + 1}, column {j + 1} ({names[j]!r}): read_csv {bits(got)}, pandas {bits(want_v)} "
                        f"(pandas' cell {raw!r})")
            if not nonfinite_ok and (not math.isfinite(got) or (not math.isfinite(col[i]) and not departed)):
                return f"row {i + 1}, column {j + 1}: read_csv reads {got!r} without non_finite (pandas {col[i]!r})"
            STATS["values compared"] += 1
        if table["big"][j]:
            STATS["departures: integers past 64 bits"] += 1
    STATS["read, equal to pandas"] += 1
    return None


STATS = {}


def run_seeds(probe, seeds, keep):
    """Makes, reads and compares the inputs of `seeds`; returns (inputs, first difference or None)."""
    workdir = keep or tempfile.mkdtemp(prefix="policytrain-differential-csv-")
    os.makedirs(workdir, exist_ok=True)
    inputs = []
    for seed in seeds:
        rng = random.Random(seed)
        for k in range(FILES_PER_SEED):
            inp = make_input(rng)
            path = os.path.join(workdir, f"s{seed}_{k}.csv")
            with open(path, "wb") as f:
                f.write(inp["data"])
            inputs.append((seed, k, path, inp))
    manifest = os.path.join(workdir, "manifest.txt")
    with open(manifest, "w") as f:
        for _, _, path, inp in inputs:
            f.write(f"{int(inp['header'])} {int(inp['non_finite'])} {inp['dtype']} {ord(inp['sep'])} {path}\n")
    out = subprocess.run([probe, manifest], check=True, capture_output=True, text=True).stdout.splitlines()
    if len(out) != len(inputs):
        sys.exit(f"differential.csv: csv_probe printed {len(out)} results for {len(inputs)} files")
    for (seed, k, path, inp), line in zip(inputs, out):
        diff = compare(path, inp, json.loads(line))
        STATS["inputs"] = STATS.get("inputs", 0) + 1
        if diff is not None:
            return (seed, k, path, inp, diff)
    if not keep:
        for _, _, path, _ in inputs:
            os.remove(path)
            if os.path.exists(path + ".pandas"):
                os.remove(path + ".pandas")
        os.remove(manifest)
        os.rmdir(workdir)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", required=True, help="the csv_probe executable")
    ap.add_argument("--seeds", help="A-B: the seeds A to B, both included")
    ap.add_argument("--random", type=float, metavar="SECONDS", help="fresh seeds from --start for this long")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--keep", metavar="DIR", help="write the files here and keep them")
    a = ap.parse_args()
    for key in ("inputs", "read, equal to pandas", "values compared"):
        STATS.setdefault(key, 0)
    STATS.update({k: 0 for k in ["refused, as pandas", "refused, pandas shifts the rows",
                                 "refused, text (pandas: a text column)", "refused, NaN or infinity without non_finite",
                                 "refused, ragged row", "refused, duplicate or empty name", "refused, no rows",
                                 "departures: -0 among integers", "departures: integers past 64 bits",
                                 "departures: pandas drops a delimiter after a blank '\\r' line",
                                 "departures: pandas not correctly rounded ('+' and white space)",
                                 "refusals whose line was checked"]})
    t0 = time.time()
    if a.seeds:
        lo, hi = (int(x) for x in a.seeds.split("-"))
        batches = [range(s, min(s + 50, hi + 1)) for s in range(lo, hi + 1, 50)]
    elif a.random is not None:
        batches = None
    else:
        ap.error("give --seeds A-B or --random SECONDS")
    seed, first, last = a.start, None, None
    while True:
        if batches is not None:
            if not batches:
                break
            seeds = batches.pop(0)
        else:
            if time.time() - t0 >= a.random:
                break
            seeds = range(seed, seed + 20)
            seed += 20
        first = seeds[0] if first is None else first
        last = seeds[-1]
        found = run_seeds(a.probe, seeds, a.keep)
        if found:
            s, k, path, inp, diff = found
            print(f"differential.csv: a difference, seed {s}, file {k} ({inp['kind']}; header={inp['header']}, "
                  f"non_finite={inp['non_finite']}, {inp['dtype']}, sep={inp['sep']!r}): {diff}")
            print(f"  file: {path}\n  content: {inp['data'][:600]!r}")
            cmd = [sys.executable, os.path.abspath(__file__), "--probe", a.probe, "--seeds", f"{s}-{s}",
                   "--keep", "/tmp/policytrain-csv-repro"]
            print("  reproduce: " + " ".join(shlex.quote(c) for c in cmd))
            return 1
    elapsed = time.time() - t0
    detail = ", ".join(f"{k}: {v}" for k, v in STATS.items() if k != "inputs")
    print(f"differential.csv: {STATS['inputs']} inputs compared, 0 differences ({detail}; seeds {first}-{last}, "
          f"pandas {pd.__version__}, {elapsed:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
