#!/usr/bin/env python3
"""Every error the library throws is worded by policytrain::detail::error_message (detail/format.hpp): one form,
`<entity>: <what>[; expected <expected>][; <fix>]`, for every message a user reads.

Scans the headers under include/policytrain (comments and string literals blanked) for each `throw <expression>`
and each `TORCH_CHECK(condition, message...)`, and accepts a site when
- its expression calls detail::error_message (`throw std::invalid_argument(detail::error_message(...))`),
- it throws what a MESSAGE_BUILDERS function returns, and that function's body calls detail::error_message (a
  lambda or helper that words the errors of one facility, e.g. parallel::Environment's env_error),
- it rethrows (`throw;`, std::rethrow_exception: the message is someone else's), or
- it is in ALLOWED, with its reason.
Files in NOT_YET_CONVERTED are scanned too and their ad hoc sites listed as "not yet converted" without failing;
a file whose sites are all converted is reported so that it leaves the list. Exits 1 naming each other site.
Usage: error_format.py <project root>
"""
import pathlib
import re
import sys

# Headers (relative to include/policytrain) whose throw sites are not converted yet: they were being rewritten
# elsewhere while the rest was converted. Empty this list as each is converted.
NOT_YET_CONVERTED = []


def not_yet_converted(rel):
    return any(rel == e or (e.endswith("/") and rel.startswith(e)) for e in NOT_YET_CONVERTED)

# Functions that build a facility's exceptions: (header, name) -> why. The checker requires that the body of each
# calls detail::error_message; a throw of what one returns is then accepted.
MESSAGE_BUILDERS = {
    ("parallel/environment.hpp", "env_error"): "every launcher-variable error of parallel::Environment",
    ("parallel/environment.hpp", "fail"): "the host-list errors of expand_slurm_nodelist (a lambda)",
    ("schedule/lr.hpp", "bad"): "Lr::validate's option errors (a lambda)",
    ("parallel/process_group.hpp", "collective_error"): "a failed or timed-out collective, with the diagnosis",
    ("data/from_torch.hpp", "evaluation_refusal"): "a loader that cannot evaluate every sample once (Trainer::evaluate)",
    ("data/from_torch.hpp", "training_refusal"): "a loader of uneven training shards (Trainer::fit)",
}
# (The Trainer throws the two from_torch refusals above as std::invalid_argument: ALLOWED below.)

# Sites accepted as they are: (header, a substring of the blanked throw expression) -> why.
ALLOWED = {
    ("trainer/trainer.hpp", "std::invalid_argument(data.evaluation_refusal())"):
        "a loader's evaluation_refusal (from_torch's, a MESSAGE_BUILDERS function worded by error_message)",
    ("trainer/loops.hpp", "std::invalid_argument(train.training_refusal())"):
        "a loader's training_refusal (from_torch's, a MESSAGE_BUILDERS function worded by error_message)",
    ("checkpoint/disk_impl.hpp", "CheckpointError(why)"):
        "Disk::load_one throws what other_run returns, worded by error_message",
    ("checkpoint/disk_impl.hpp", ", what))"):
        "Disk::write_failed appends every rank's decision (stop) to a message already worded by error_message",
    ("parallel/process_group.hpp", "std::invalid_argument("):
        "a backend the build lacks: caught in ProcessGroup::connect and reworded by error_message with the job's address",
    ("data/image_decode.hpp", "std::bad_alloc()"):
        "libpng could not allocate its read structures: out of memory, as std::bad_alloc says everywhere else",
    ("parallel/process_group.hpp", 'std::runtime_error("xxxxxxxxxxxxxxxxxxxxxxxxxx")'):
        "an aborted wait: caught in ProcessGroup::wait and reworded by collective_error",
}


def blank(text):
    """The text with comments replaced by spaces and string/char literal contents by 'x' (offsets kept)."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif text.startswith("/*", i):
            j = text.index("*/", i) + 2
            out[i:j] = [c if c == "\n" else " " for c in text[i:j]]
            i = j
        elif text.startswith('R"(', i):
            j = text.index(')"', i)
            out[i + 3:j] = "x" * (j - i - 3)
            i = j + 2
        elif text[i] == '"' or (text[i] == "'" and not (text[i - 1].isalnum() and text[i + 1].isalnum())):
            q, j = text[i], i + 1
            while text[j] != q:
                j += 2 if text[j] == "\\" else 1
            out[i + 1:j] = "x" * (j - i - 1)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def statement(code, i):
    """From code[i] to the end of its expression: the `;` or the closer at depth 0."""
    depth = 0
    for k in range(i, len(code)):
        c = code[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                return code[i:k]
        elif c == ";" and depth == 0:
            return code[i:k]
    return code[i:]


def sites_listed(groups):
    return [s for _, v in sorted(groups.items()) for s in v]


def body_of(code, name):
    """The body of function or lambda `name` in code (None when not found)."""
    for m in re.finditer(r"\b" + re.escape(name) + r"\b\s*(=\s*\[[^\]]*\]\s*)?\([^;{]*?\)[^;{]*\{", code):
        start = m.end() - 1
        depth = 0
        for k in range(start, len(code)):
            depth += code[k] == "{"
            depth -= code[k] == "}"
            if depth == 0:
                return code[start:k + 1]
    return None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    inc = root / "include" / "policytrain"
    texts = {str(h.relative_to(inc)): h.read_text() for h in sorted(inc.rglob("*.hpp"))}
    codes = {rel: blank(text) for rel, text in texts.items()}
    problems, not_yet, stale_builders = [], {}, []
    builders_ok = {}
    for (header, name), why in MESSAGE_BUILDERS.items():
        if header not in codes and "policytrain.hpp" not in codes:
            continue  # not the project's tree (the checker's own cases)
        body = body_of(codes.get(header, ""), name)
        if body is None:
            stale_builders.append(f"{header}: MESSAGE_BUILDERS names '{name}', which the header no longer defines")
            continue
        builders_ok[(header, name)] = "error_message(" in body
        if not builders_ok[(header, name)] and not not_yet_converted(header):
            problems.append(f"{header}: '{name}' ({why}) builds its message without detail::error_message")
    # A builder another header defines (ProcessGroup::collective_error) is accepted where it is called, anywhere; a
    # call of one not converted yet is listed with its header's.
    builder_names = {name: (header, ok) for (header, name), ok in builders_ok.items()}
    sites = 0
    for rel, code in codes.items():
        for m in re.finditer(r"\bthrow\b|\bTORCH_CHECK\b", code):
            expr = " ".join(statement(code, m.start()).split())
            shown = " ".join(texts[rel][m.start():m.start() + len(statement(code, m.start()))].split())
            line = code.count("\n", 0, m.start()) + 1
            if m.group() == "throw" and not expr[len("throw"):].strip():
                continue  # a rethrow
            if m.group() == "throw" and re.match(r"throw\s+(std::)?current_exception", expr):
                continue
            sites += 1
            if "error_message(" in expr:
                continue
            called = re.match(r"throw\s+(?:[\w:]*(?:->|\.))*(\w+)\s*\(", expr)
            builder = called and ((rel, builders_ok[(rel, called.group(1))]) if (rel, called.group(1)) in builders_ok
                                  else builder_names.get(called.group(1)))
            if builder:
                if builder[1]:
                    continue
                if not_yet_converted(builder[0]):
                    not_yet.setdefault(builder[0], []).append(f"{rel}:{line}: calls {called.group(1)}")
                    continue
            if any(h == rel and s in expr for (h, s) in ALLOWED):
                continue
            site = f"{rel}:{line}: {shown[:110]}"
            if not_yet_converted(rel):
                not_yet.setdefault(rel, []).append(site)
            else:
                problems.append(site)

    print(f"error_format.py: {sites} throw/TORCH_CHECK sites in {len(codes)} headers")
    if not_yet:
        print(f"NOT YET CONVERTED ({sum(map(len, not_yet.values()))} sites in {len(not_yet)} headers of "
              "NOT_YET_CONVERTED, accepted for now):")
        for rel, s in sorted(not_yet.items()):
            print(f"  {rel}: {len(s)} site(s)")
        for s in sites_listed(not_yet):
            print(f"    {s}")
    clean = [e for e in NOT_YET_CONVERTED if not any(r == e or (e.endswith("/") and r.startswith(e)) for r in not_yet)]
    if clean:
        print("no ad hoc site left in (may leave NOT_YET_CONVERTED once their rewrites are merged): " + ", ".join(clean))
    if problems or stale_builders:
        print("errors not worded by policytrain::detail::error_message(entity, what, expected, fix) "
              "(detail/format.hpp); build the message with it:", file=sys.stderr)
        print("\n".join(problems + stale_builders), file=sys.stderr)
        print(f"error_format.py: refused {len(problems)} site(s): " + ", ".join(p.split(": ")[0] for p in problems))
        sys.exit(1)


# tests/docs_reference.py imports the scanner (blank, statement) to list every message in docs/errors.md.
if __name__ == "__main__":
    main()
