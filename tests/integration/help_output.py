"""The main job's --help (issue 30): options in groups, every default shown, --resume not reading as on by default,
and every range the help shows accepted up to its bounds (--ema-decay refused 1 while its help read [0 - 1]).

CLI11 validates the options given before it answers --help, so `EXE --opt VALUE --help` exits 0 exactly when VALUE
is accepted: the oracle of the ranges, without training anything."""
import re, subprocess, sys

exe = sys.argv[1]
help_text = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120, check=True).stdout
print(help_text)
problems = []

# Groups: a heading ("Name:" at column 0) over each option; only -h,--help is in CLI11's own "Options" group.
groups, current, options = {}, None, {}
lines = help_text.splitlines()
for i, line in enumerate(lines):
    if re.match(r"^\S.*:$", line):
        current = line[:-1]
        groups[current] = 0
    # "  --name OPTS  description": OPTS (type, range, "=default") may hold single spaces; two or more, or the end
    # of the line (the description then follows on the next), end it.
    m = re.match(r"^  (-h,)?(--[\w-]+)(?: (.*?))?(?:\s{2,}(.*))?$", line)
    if m and current:
        groups[current] += 1
        name, opts = m.group(2), (m.group(3) or "").strip()
        desc = m.group(4) or (lines[i + 1].strip() if i + 1 < len(lines) else "")
        options[name] = (current, opts, desc, line)
named = {g: n for g, n in groups.items() if g != "Options" and n > 0}
if len(named) < 6:
    problems.append(f"expected the options in at least 6 groups, found {named}")
for name, (group, _, _, _) in options.items():
    if group == "Options" and name != "--help":
        problems.append(f"{name} is in no group")

# Defaults: an option taking a value shows "=DEFAULT", or its description says what its default is.
for name, (group, opts, desc, line) in options.items():
    takes_value = bool(opts) and not opts.startswith("Excludes")
    if takes_value and "=" not in opts and name != "--resume" and "default" not in desc:
        problems.append(f"{name} takes a value but its help shows no default: {line.strip()!r}")
for name, want in {"--epochs": "=5", "--lr": "=0.003", "--run-dir": "=runs/fashion_mnist", "--data": "=/"}.items():
    if name not in options or want not in options[name][1]:
        problems.append(f"{name}: expected {want!r} in {options.get(name, ('', '', '', 'nothing'))[3].strip()!r}")

# --resume is off unless given: its help must not show a value as if it were the default.
resume = options.get("--resume")
if not resume or "=" in resume[1] or "auto" in resume[3] or "default: off" not in resume[2]:
    problems.append(f"--resume reads as on by default: {resume}")

def accepted(*args):
    return subprocess.run([exe, *args, "--help"], capture_output=True, text=True, timeout=120).returncode == 0

# Every range shown is accepted at its bounds (CLI11's Range prints "[lo - hi]", ours "[lo, hi)").
for name, (_, opts, _, _) in options.items():
    m = re.search(r"\[(-?[\d.]+) - (-?[\d.]+)\]", opts)
    if m:
        for bound in m.groups():
            if not accepted(name, bound):
                problems.append(f"{name}: the help shows the range {m.group(0)}, but {bound} is refused")
ema = options.get("--ema-decay")
if not ema or "[0, 1)" not in ema[1]:
    problems.append(f"--ema-decay: expected the range [0, 1) in its help, found {ema}")
if not accepted("--ema-decay", "0") or not accepted("--ema-decay", "0.999999"):
    problems.append("--ema-decay refuses a value in [0, 1)")
if accepted("--ema-decay", "1"):
    problems.append("--ema-decay accepts 1, outside the [0, 1) its help shows")

for p in problems:
    print("help_output:", p, file=sys.stderr)
print(f"help_output: {len(options)} options in {len(named)} groups, {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
