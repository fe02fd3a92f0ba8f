#!/usr/bin/env python3
"""docs/options.md and docs/errors.md, generated from the headers under include/policytrain, so that they cannot drift.

  * docs/options.md: every options struct (`struct Options` inside a policy, callback or loader, and every
    `struct ...Options`): each field's name, type, default and meaning (its `///` or `///<` comment).
  * docs/errors.md: every error message a user can meet, by category: each call of detail::error_message (the one
    way the library words a runtime error, which errors.format enforces at every throw; tests/error_format.py's
    scanner is reused here), each throw of a message builder (error_format.py's MESSAGE_BUILDERS, its argument put
    in its place), and each static_assert whose message starts with `policytrain::`. A value known only at run time
    reads ‹name›.

Usage: docs_reference.py [--root DIR] [--write | --self-test]
  (no flag)    exits 1 when a page differs from what the headers give, naming the page and its first differing line
  --write      rewrites the two pages
  --self-test  checks the checker: an options field and an error message added to a copy of the headers must show
               in the pages, and the unchanged pages must then be reported as stale
"""
import argparse
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from error_format import MESSAGE_BUILDERS, blank, statement  # noqa: E402  (the scanner errors.format runs)

PAGES = {"options": "docs/options.md", "errors": "docs/errors.md"}
# Sections, in the order of the pages: the first folder of a header (or the header's name) -> its title.
SECTIONS = {
    "trainer": "The Trainer", "core": "The Trainer", "trainer.hpp": "The Trainer",
    "precision": "Precision", "accumulation": "Accumulation", "schedule": "Schedules",
    "checkpoint": "Checkpoints", "parallel": "Parallel training", "step": "The step as a CUDA graph",
    "memory": "Activation recompute", "optim": "Fused optimizers", "callbacks": "Callbacks", "data": "Data",
    "metric": "Metrics", "io": "Files and digests", "observe": "Observing", "detail": "LibTorch and formatting",
}


# What the errors of each section mean, and where their facility is explained (docs/errors.md).
MEANING = {
    "Compile-time errors (static_assert)":
        "A Trainer that does not compile: a composition rule (one policy per category, each callback once) or the "
        "hook contract is broken. The message names the rule and the fix; the contract is "
        "[writing-a-policy.md](writing-a-policy.md), the compositions [compositions.md](compositions.md).",
    "The Trainer": "`fit` or `evaluate` refuses a task, its metrics or a loader that cannot give a correct run, or a "
                   "resume whose batches would not line up: [trainer.md](trainer.md).",
    "Precision": "A dtype autocast cannot run on the device, a non-finite loss, or the loss scaler called out of "
                 "order: [precision.md](precision.md).",
    "Accumulation": "Accumulation or auto batch size set up so that the step would be wrong or cannot fit: "
                    "[accumulation.md](accumulation.md).",
    "Schedules": "Schedule options out of range, or a state that belongs to another optimizer: "
                 "[schedules.md](schedules.md).",
    "Checkpoints": "A file that is not a complete checkpoint of this run, a directory another job holds, a write the "
                   "disk refused: [checkpoint.md](checkpoint.md).",
    "Parallel training": "A launcher's environment that is partial or contradictory, a collective that failed or "
                         "timed out (a dead or hung rank), ranks that would train from different states: "
                         "[parallel.md](parallel.md), [cluster-job.md](cluster-job.md).",
    "The step as a CUDA graph": "A step that cannot be captured as composed: [cuda-graph.md](cuda-graph.md).",
    "Activation recompute": "A recomputed block whose arguments or results cannot be replayed: "
                            "[memory.md](memory.md).",
    "Fused optimizers": "Gradients or a scaler state the fused kernels do not take: [optimizers.md](optimizers.md).",
    "Callbacks": "A callback's options out of range, or a run it has to stop: [checkpoint.md](checkpoint.md) (EMA, "
                 "early stopping, rollback, preemption), [performance.md](performance.md) (clipping, logs, "
                 "profiler, TensorBoard).",
    "Data": "A file that is missing, truncated or not what its reader reads, or a loader set up inconsistently: "
            "[your-data.md](your-data.md).",
    "Metrics": "Predictions and targets a metric cannot score: [metrics.md](metrics.md).",
    "Files and digests": "A file the library could not read or hash: [checkpoint.md](checkpoint.md).",
    "LibTorch and formatting": "A LibTorch too old for what was asked: [packaging.md](packaging.md).",
}


def section_of(rel):
    return SECTIONS.get(rel.split("/")[0], "Other")


def section_order(title):
    titles = list(dict.fromkeys(SECTIONS.values())) + ["Other"]
    return titles.index(title)


def anchor(title):
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def matching(code, i, opener="(", closer=")"):
    """The index of the closer matching code[i] (an opener), in blanked code."""
    depth = 0
    for k in range(i, len(code)):
        if code[k] == opener:
            depth += 1
        elif code[k] == closer:
            depth -= 1
            if depth == 0:
                return k
    return len(code)


def split_top(code, text, sep):
    """Splits text at the top-level occurrences of sep, deciding depth and literals on code (the blanked text)."""
    parts, depth, start, k = [], 0, 0, 0
    while k < len(code):
        c = code[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and code.startswith(sep, k) and not (sep == "+" and code.startswith("++", k)):
            parts.append((code[start:k], text[start:k]))
            start = k + len(sep)
            k += len(sep)
            continue
        k += 1
    parts.append((code[start:], text[start:]))
    return parts


LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
ESCAPES = {"n": " ", "t": " ", '"': '"', "\\": "\\", "'": "'"}


def unescape(s):
    return re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1), m.group(1)), s)


CONVERSIONS = r"(?:[\w:]*::)?(?:toString|to_string|string|quoted|abs|size_t|int64_t|double|int)"
ACCESSORS = r"(?:string|c_str|size|count|what|generic_string|native|value|get|load|numel|str|dim|item<\w+>)"


def placeholder(text):
    """‹name› for a value known at run time: the last member of a plain path (o_.decay -> ‹decay›), the function
    a value comes from (group.who() -> ‹who›), else ‹…›."""
    t = " ".join(text.split()).lstrip("*&").strip()
    if m := re.fullmatch(CONVERSIONS + r"\s*\((.*)\)", t):
        return placeholder(m.group(1))
    if m := re.fullmatch(r"static_cast<[^>]*>\((.*)\)", t):
        return placeholder(m.group(1))
    if m := re.fullmatch(r"(.*?)(?:\.|->)" + ACCESSORS + r"\(\)", t):
        return placeholder(m.group(1))
    if m := re.fullmatch(r"(\w+)(?:\.|->)(\w+)\(([\w ,]{1,12})\)", t):
        return f"‹{short(m.group(1))}.{m.group(2)}({m.group(3)})›"  # preds.size(0): whose size, which dimension
    if m := re.fullmatch(r"(?:[\w:]+(?:\.|->))*(\w+)\s*\(.*\)", t):
        return "‹" + m.group(1) + "›"
    path = r"[\w:]+(?:(?:\.|->)\w+|\[[^\]]*\])*"
    if re.fullmatch(path, t):
        return "‹" + short(t) + "›"
    if re.fullmatch(rf"{path}(?:\s*[-+*/]\s*{path})+", t):
        return "‹" + re.sub(path, lambda m: short(m.group(0)), t) + "›"
    return "‹…›"


def short(path):
    """The last member of a path, its index kept: o_.milestones[0] -> milestones[0]."""
    return re.split(r"\.|->|::", path)[-1].rstrip("_") if "[" not in path else \
        re.split(r"\.|->|::", path[:path.index("[")])[-1].rstrip("_") + path[path.index("["):]


def is_text(code):
    """Whether an argument builds text of its own (literals, a format or str call, a concatenation or a choice with
    text in it)."""
    code = code.strip()
    if code.startswith("(") and matching(code, 0) == len(code) - 1:
        return is_text(code[1:-1])
    if code.startswith('"') or re.match(r"[\w:]*(?:format|str)\s*\(", code):
        return True
    parts = split_top(code, code, "+")
    if len(parts) == 1:
        choice = split_top(code, code, "?")
        parts = split_top(choice[1][0], choice[1][0], ":") if len(choice) == 2 else []
    return len(parts) > 1 and any(is_text(c) for c, _ in parts)


def render(code, text, env):
    """The message an expression builds: string literals as they read, formatted values as ‹name›."""
    # A macro's line continuations, as two blanks each so that code and text keep the same offsets.
    code, text = code.replace("\\\n", "  ").strip(), text.replace("\\\n", "  ").strip()
    lead = len(text) - len(text.lstrip())
    while code.startswith("(") and matching(code, 0) == len(code) - 1:
        code, text = code[1:-1].strip(), text[1:-1].strip()
    if not code:
        return ""
    if code in env:
        return env[code]
    ternary = split_top(code, text, "?")
    if len(ternary) == 2:
        branches = split_top(ternary[1][0], ternary[1][1], ":")
        if len(branches) == 2 and any(is_text(c) for c, _ in branches):
            return " / ".join(dict.fromkeys(render(c, t, env) for c, t in branches))
        return placeholder(text)
    summands = split_top(code, text, "+")
    if len(summands) > 1:
        if any(is_text(c) for c, _ in summands):
            return "".join(render(c, t, env) for c, t in summands)
        return placeholder(text)
    if m := re.match(r"([\w:]*(?:format|str))\s*\(", code):
        close = matching(code, m.end() - 1)
        args = split_top(code[m.end():close], text[m.end():close], ",")
        if m.group(1).endswith("format"):
            pattern = render(*args[0], {})
            values = iter(render(c, t, env) if is_text(c) else env.get(c.strip(), placeholder(t)) for c, t in args[1:])
            return re.sub(r"\{[^{}]*\}", lambda _: next(values, "‹…›"), pattern)
        return "".join(render(c, t, env) if is_text(c) else env.get(c.strip(), placeholder(t)) for c, t in args)
    if m := re.match(r"(?:std::)?string(?:_view)?\s*\(", code):
        close = matching(code, m.end() - 1)
        return render(code[m.end():close], text[m.end():close], env)
    if code.startswith("{") and code.endswith("}") and not code[1:-1].strip():
        return ""
    if code.startswith(('"', "#")):
        # Adjacent literals, with a macro's parameters between them: #hook, PREFIX_##hook, or a bare one.
        out, k = [], 0
        for lit in LITERAL.finditer(text):
            for tok in re.findall(r"\w*##\w+|#\s*\w+|\w+", text[k:lit.start()]):
                tok = tok.replace(" ", "")
                out.append("‹the signature of " + tok.split("##")[1] + "›" if "##" in tok
                           else "‹" + tok.lstrip("#") + "›")
            out.append(unescape(lit.group(1)))
            k = lit.end()
        return "".join(out)
    return placeholder(text)


def call_args(code, text, open_paren):
    close = matching(code, open_paren)
    return split_top(code[open_paren + 1:close], text[open_paren + 1:close], ",")


def message(code, text, open_paren, env):
    """(entity, what, expected, fix) of an error_message call whose '(' is at open_paren. An entity held in a
    variable is read from the variable's initialization above the call (`static constexpr std::string_view name =
    "schedule::Lr"`), where the header has one."""
    spans = call_args(code, text, open_paren)
    if spans:
        env = dict(env)
        for var in set(re.findall(r"(?<![\w.:>])([A-Za-z_]\w*)\b(?!\s*[(:])", spans[0][0])) - set(env):
            if (init := initializer(code, text, var, open_paren)) is not None:
                env[var] = init
    args = [render(c, t, env) for c, t in spans]
    return tuple((args + ["", "", "", ""])[:4])


def initializer(code, text, var, before):
    """The text a variable holding part of a message was initialized with above `before`, when it is text
    (`static constexpr std::string_view name = "schedule::Lr"`); None otherwise."""
    inits = list(re.finditer(r"\b" + var + r"\s*(?:=(?!=)|\{)", code[:before]))
    if not inits:
        return None
    m = inits[-1]
    if code[m.end() - 1] == "{":
        end = matching(code, m.end() - 1, "{", "}")
    else:
        end = code.find(";", m.end())
    if end < 0:
        return None
    init = (code[m.end():end], text[m.end():end])
    return render(*init, {}) if is_text(init[0]) else None


def builder_bodies(codes):
    """name -> (header, parameter names, offset of its error_message '(', offset of its definition) for the
    MESSAGE_BUILDERS that take the message's parts as parameters (the others' messages are listed where they are
    worded)."""
    out = {}
    for (header, name) in MESSAGE_BUILDERS:
        code = codes.get(header)
        if code is None:
            continue
        m = re.search(r"\b" + re.escape(name) + r"\b\s*(?:=\s*\[[^\]]*\]\s*)?\(([^;{]*?)\)[^;{]*\{", code)
        if not m:
            continue
        params = [re.findall(r"\w+", p)[-1] for p in m.group(1).split(",") if re.findall(r"\w+", p)]
        call = code.find("error_message(", m.end(), matching(code, m.end() - 1, "{", "}"))
        if params and call >= 0:
            out[name] = (header, params, call + len("error_message"), m.start(), "[" in m.group(0))
    return out


def error_sites(texts):
    """[(header, entity, what, expected, fix, compile_time)] in the headers' order."""
    codes = {rel: blank(t) for rel, t in texts.items()}
    builders = builder_bodies(codes)
    sites = []
    for rel in sorted(texts):
        code, text = codes[rel], texts[rel]
        if rel == "detail/format.hpp":
            continue  # error_message's own definition
        found = []
        for m in re.finditer(r"\berror_message\s*\(", code):
            if any(b[0] == rel and b[2] == m.end() - 1 for b in builders.values()):
                continue  # a builder's: listed at each call, with its arguments
            found.append((m.start(), message(code, text, m.end() - 1, {})))
        for name, (header, params, paren, definition, local) in builders.items():
            if local and rel != header:
                continue  # a lambda: called in its own header only
            for m in re.finditer(r"\b" + re.escape(name) + r"\s*\(", code):
                if rel == header and m.start() == definition:
                    continue
                args = call_args(code, text, m.end() - 1)
                env = {p: render(c, t, {}) for p, (c, t) in zip(params, args)}
                found.append((m.start(), message(codes[header], texts[header], paren, env)))
        for m in re.finditer(r"\bstatic_assert\s*\(", code):
            args = call_args(code, text, m.end() - 1)
            if len(args) < 2:
                continue
            said = render(*args[-1], {})
            if not said.startswith("policytrain"):
                continue
            entity, _, rest = said.partition(": ")
            found.append((m.start(), (entity, rest, "", "", True)))
        for _, parts in sorted(found, key=lambda f: f[0]):
            entity, what, expected, fix = parts[:4]
            sites.append((rel, entity, what, expected, fix, len(parts) > 4))
    return sites


FIX_VERBS = ("use ", "pass ", "call ", "set ", "give ", "add ", "remove ", "run ", "keep ", "declare ", "return ",
             "change ", "write ", "launch ", "make ", "check ", "delete ", "move ", "take ", "start ", "name ",
             "build ", "install ", "sort ", "put ", "drop ", "rename ", "choose ", "list ", "resume ", "raise ",
             "lower ", "clear", "mark ", "wrap ", "split ", "map ", "read ", "include ", "train ", "compile ",
             "load ", "define ", "derive ", "apply ", "turn ", "stop ", "let ", "see ", "do ", "leave ", "or ",
             "rebuild ", "increase ", "decrease ", "reduce ", "fix ", "convert ", "copy ", "export ", "open ")


def split_fix(what, fix):
    """(what is wrong, the fix): the fix argument, else the last '; '-part of the message when it says what to do."""
    if fix:
        return what, fix
    head, sep, tail = what.rpartition("; ")
    if sep and tail.lower().startswith(FIX_VERBS):
        return head, tail
    return what, ""


def code_span(s):
    s = " ".join(s.split())
    return f"`` {s} ``" if "`" in s else f"`{s}`"


def page_head(title, test, what, intro, count, sections):
    """A generated page's title, the note that it is generated, its introduction, its count and its contents."""
    return [f"# {title}", "",
            f"<!-- Generated by tests/docs_reference.py --write from the headers; CTest {test} fails when it is",
            f"     out of date. Edit {what} in include/policytrain, not here. -->", "",
            *intro, "", count, "", *[f"- [{s}](#{anchor(s)})" for s in sections], ""]


def errors_page(texts):
    sites = error_sites(texts)
    by_section = {}
    for rel, entity, what, expected, fix, compile_time in sites:
        title = "Compile-time errors (static_assert)" if compile_time else section_of(rel)
        entries = by_section.setdefault(title, {}).setdefault(entity, [])
        wrong, todo = split_fix(what + (f"; expected {expected}" if expected else ""), fix)
        item = (wrong, todo, rel)
        if item not in entries:
            entries.append(item)
    order = sorted(by_section, key=lambda t: (not t.startswith("Compile"), section_order(t) if not
                                              t.startswith("Compile") else 0))
    count = sum(len(v) for s in by_section.values() for v in s.values())
    out = page_head("Error messages", "docs.errors", "the messages", [
        "Every message policytrain throws or asserts, by category: who refuses, what is wrong and the fix. Every",
        "runtime message has one form, `<who>: <what is wrong>[; expected <what was expected>][; <the fix>]`",
        "(`policytrain::detail::error_message`, detail/format.hpp), and every compile-time one",
        "`<who>: <what is wrong>; <the fix>`, so a message found in a log can be looked up here by its start. A value",
        "known only at run time (a file, a number, a rank) reads ‹name›. Where no fix is listed, the message says what",
        "was expected. How errors reach you (exceptions, every rank's agreement before a stop):",
        "[trainer.md](trainer.md); the compile-time contract: [writing-a-policy.md](writing-a-policy.md)."],
        f"{count} messages from {len({s[0] for s in sites})} headers.", order)
    for title in order:
        out += [f"## {title}", ""] + ([MEANING[title], ""] if title in MEANING else [])
        for entity in sorted(by_section[title]):
            out += [f"**{code_span(entity)}**", ""]
            for wrong, todo, rel in by_section[title][entity]:
                line = f"- {code_span(wrong)}"
                if todo:
                    line += f": fix: {code_span(todo)}"
                out.append(line + f" ({rel})")
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def doc_comment(lines, i):
    """The `///` lines right above line i, joined."""
    said = []
    k = i - 1
    while k >= 0 and lines[k].strip().startswith("///"):
        said.insert(0, lines[k].strip()[3:].strip())
        k -= 1
    return " ".join(said)


def enclosing_names(code, pos):
    """The namespace and the classes around pos: 'policytrain::callbacks' + 'Ema'."""
    names = []
    for m in re.finditer(r"\b(namespace\s+([\w:]+)\s*|(?:class|struct)\s+(?:\[\[[^\]]*\]\]\s*)?(\w+)[^;{()]*)\{", code):
        if m.start() >= pos:
            break
        close = matching(code, m.end() - 1, "{", "}")
        if close > pos:
            names.append(m.group(2) or m.group(3))
    return "::".join(names)


def option_structs(texts):
    """[(header, qualified name, doc, [(name, type, default, meaning)])]."""
    out = []
    for rel in sorted(texts):
        text = texts[rel]
        code = blank(text)
        lines = text.splitlines()
        for m in re.finditer(r"\bstruct\s+(\w*Options)\s*\{", code):
            close = matching(code, m.end() - 1, "{", "}")
            name = enclosing_names(code, m.start())
            name = (name + "::" if name else "") + m.group(1)
            line0 = code.count("\n", 0, m.start())
            fields = []
            k, depth = m.end(), 0
            start = k
            while k < close:
                c = code[k]
                if c in "({[":
                    depth += 1
                elif c in ")}]":
                    depth -= 1
                elif c == ";" and depth == 0:
                    decl_code, decl_text = code[start:k], text[start:k]
                    field = parse_field(decl_code, decl_text, lines, code.count("\n", 0, k))
                    if field:
                        fields.append(field)
                    start = k + 1
                k += 1
            if fields:
                out.append((rel, name, doc_comment(lines, line0), fields))
    return out


def parse_field(code, text, lines, line_of_end):
    """(name, type, default, meaning) of a data member declaration, or None (functions, types, statics)."""
    stripped = code.strip()
    if not stripped or re.match(r"(static|using|friend|template|enum|struct|class|typedef)\b", stripped) or \
            stripped.startswith(("public:", "private:", "protected:")):
        return None
    offset = len(code) - len(code.lstrip())
    code, text = code.strip(), text[offset:].strip()
    eq = split_top(code, text, "=")
    head_code = eq[0][0]
    if "(" in head_code and not re.search(r"\w\s*\{", head_code):
        return None  # a member function
    default = eq[1][1].strip() if len(eq) > 1 else ""
    head = eq[0][1].strip()
    if len(eq) == 1 and (b := re.search(r"(\w)\s*\{", head_code)):
        default = head[b.start(1) + 1:].strip()
        head = head[:b.start(1) + 1].strip()
    m = re.match(r"(.*?)([A-Za-z_]\w*)\s*$", head, re.S)
    if not m:
        return None
    ftype, name = " ".join(m.group(1).split()), m.group(2)
    if default in ("{}", ""):
        default = "{}" if default == "{}" else "—"
    elif default.startswith("{") and default.endswith("}"):
        default = default[1:-1].strip()
    line = lines[line_of_end]
    trailing = line.split("///<", 1)[1].strip() if "///<" in line else ""
    first = line_of_end - (text.count("\n"))
    above = doc_comment(lines, first)
    return name, ftype, " ".join(default.split()), " ".join(filter(None, [above, trailing]))


def cell(s):
    return s.replace("|", "\\|")


def options_page(texts):
    structs = option_structs(texts)
    by_section = {}
    for rel, name, doc, fields in structs:
        by_section.setdefault(section_of(rel), []).append((rel, name, doc, fields))
    order = sorted(by_section, key=section_order)
    out = page_head("Options of every policy, callback and loader", "docs.options", "the `///` comments", [
        "Every runtime setting, as the headers declare it: each options struct's fields with their type, default",
        "and meaning. Which policies exist and when to use them: the [index](README.md); how options are passed",
        "(designated initializers, one struct per policy in the Trainer's constructor):",
        "[trainer.md](trainer.md)."],
        f"{sum(len(s[3]) for s in structs)} options in {len(structs)} structs.", order)
    for title in order:
        out += [f"## {title}", ""]
        for rel, name, doc, fields in by_section[title]:
            out += [f"### {name}", "", f"`#include <policytrain/{rel}>`" + (f": {doc}" if doc else ""), "",
                    "| option | type | default | meaning |", "|---|---|---|---|"]
            for fname, ftype, default, meaning in fields:
                out.append(f"| `{fname}` | {code_span(cell(ftype))} | "
                           f"{code_span(cell(default)) if default != '—' else '—'} | {cell(meaning)} |")
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def headers(root):
    inc = root / "include" / "policytrain"
    return {str(h.relative_to(inc)): h.read_text() for h in sorted(inc.rglob("*.hpp"))}


def generate(texts):
    return {"options": options_page(texts), "errors": errors_page(texts)}


def stale(root, pages):
    """[problem] for each page that differs from the generated text."""
    problems = []
    for key, want in pages.items():
        path = root / PAGES[key]
        have = path.read_text() if path.is_file() else ""
        if have != want:
            h, w = have.splitlines(), want.splitlines()
            n = next((i for i, (a, b) in enumerate(zip(h, w)) if a != b), min(len(h), len(w)))
            problems.append(f"{PAGES[key]}:{n + 1}: out of date with the headers (the headers give "
                            f"{w[n] if n < len(w) else '<end of page>'!r}, the page has "
                            f"{h[n] if n < len(h) else '<end of page>'!r}); run tests/docs_reference.py --write")
    return problems


def self_test(root):
    texts = headers(root)
    pages = generate(texts)
    ema = texts["callbacks/ema.hpp"]
    changed = dict(texts)
    changed["callbacks/ema.hpp"] = ema.replace(
        "    bool average_buffers = true;\n",
        "    bool average_buffers = true;\n    int self_test_field = 42;  ///< a field the checker must see\n", 1).replace(
        "  if (o_.tau < 0)\n",
        "  if (o_.tau > 1e9)\n    throw std::invalid_argument(policytrain::detail::error_message(\n"
        "        \"policytrain::callbacks::Ema\", policytrain::detail::format(\"tau is {}\", o_.tau), \"tau <= 1e9\",\n"
        "        \"use a shorter ramp\"));\n  if (o_.tau < 0)\n", 1)
    if changed["callbacks/ema.hpp"].count("self_test_field") != 1 or "shorter ramp" not in changed["callbacks/ema.hpp"]:
        print("docs_reference --self-test: callbacks/ema.hpp no longer has the lines the self-test edits; update it")
        return 1
    new = generate(changed)
    checks = {
        "the added field is listed": "| `self_test_field` | `int` | `42` | a field the checker must see |"
                                     in new["options"],
        "the added message is listed": "- `tau is ‹tau›; expected tau <= 1e9`: fix: `use a shorter ramp` "
                                       "(callbacks/ema.hpp)" in new["errors"],
        "the pages differ": new != pages,
    }
    for what, ok in checks.items():
        print(f"docs_reference --self-test: {what}: {'yes' if ok else 'NO'}")
    tmp_root = root  # stale() reads the pages of the real tree, which lack the additions
    problems = stale(tmp_root, new)
    print(f"docs_reference --self-test: the unchanged pages reported stale: {len(problems)} of 2")
    for p in problems:
        print("  " + p)
    return 0 if all(checks.values()) and len(problems) == 2 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=pathlib.Path(__file__).resolve().parent.parent, type=pathlib.Path)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--page", choices=sorted(PAGES), help="check or write this page only")
    args = ap.parse_args()
    root = args.root.resolve()
    if args.self_test:
        return self_test(root)
    pages = generate(headers(root))
    if args.page:
        pages = {args.page: pages[args.page]}
    if args.write:
        for key, text in pages.items():
            (root / PAGES[key]).write_text(text)
            print(f"docs_reference: wrote {PAGES[key]}")
        return 0
    problems = stale(root, pages)
    for p in problems:
        print(p)
    print(f"docs_reference: {len(pages)} page(s) checked, {len(problems)} out of date")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
