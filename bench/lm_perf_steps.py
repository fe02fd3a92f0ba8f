"""CPU milliseconds per training step by kind of work, from two `perf record -F 499` runs of each program (bench/
RESULTS.md, "tiny_lm"): PROGRAM_5.data (5 steps) and PROGRAM_25.data (25 steps) in DIR; the samples of the longer
run minus those of the shorter one (start-up, imports and first steps cancel) over 20 steps, each symbol assigned to
a row by its name (the first rule that matches). Prints a Markdown table.
Usage: lm_perf_steps.py DIR PROGRAM [PROGRAM ...]"""
import collections, re, subprocess, sys
O = sys.argv[1]
RULES = [("matmul (MKL/oneDNN GEMM)", r"gemm|brgemm|jit_avx512|mkl_blas|dnnl|sgemm|kernel_[0-9]|_jit_|matmul|addmm"),
         ("attention (SDPA flash kernel)", r"flash|attention|sdpa"),
         ("softmax/log_softmax/cross-entropy", r"softmax|nll_loss|cross_entropy"),
         ("layer norm", r"layer_norm|LayerNorm"),
         ("GELU", r"gelu|GeluKernel"),
         ("AdamW step", r"adam"),
         ("norms/clipping", r"norm_kernel|NormKernel|_foreach_norm|linalg_vector_norm"),
         ("embedding/index", r"embedding|index_select|index_add|scatter|gather"),
         ("elementwise/copy/reduce (ATen vectorized)", r"vectorized_loop|basic_loop|copy_|VectorizedLoop|unary_kernel|binary_kernel|reduce|cpu_kernel|Loop2d|loop2d|sum_kernel|fill"),
         ("kernel: page faults, zeroing", r"^\[k\]|page|clear_page|fault"),
         ("libc malloc/free", r"malloc|free|_int_|memalign|arena"),
         ("libc memcpy/memset", r"memcpy|memset|memmove"),
         ("Python interpreter (incl. GC)", r"_PyEval|Py[A-Z_]|_Py|python"),
         ("OpenMP runtime", r"gomp|GOMP|omp"),
         ("autograd engine/dispatcher", r"autograd|Dispatcher|dispatch|c10::|Engine|at::native::|at::_ops")]
def load(f):
    out = subprocess.run(["perf", "report", "-i", f, "--no-children", "--sort", "dso,sym", "-F", "sample,dso,sym",
                          "--stdio", "-q"], capture_output=True, text=True).stdout
    c = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+(\S+)\s+(.*)$", line)
        if m: c[(m.group(2), m.group(3).strip())] += int(m.group(1))
    return c
def classify(dso, sym):
    if "kernel" in dso: return "kernel: page faults, zeroing"
    if dso.startswith("[JIT]"): return "JIT-generated code (oneDNN)"
    if "libpython" in dso: return "Python interpreter (incl. GC)"
    for name, rx in RULES:
        if re.search(rx, sym, re.I): return name
    if "python" in dso.lower(): return "Python bindings (libtorch_python)"
    if "libc" in dso: return "libc other"
    return "other: " + dso
progs = sys.argv[2:]
tables = {}
for p in progs:
    a, b = load(f"{O}/{p}_5.data"), load(f"{O}/{p}_25.data")
    t = collections.Counter()
    for k in set(a) | set(b):
        t[classify(*k)] += (b[k] - a[k]) / 20 / 499 * 1000
    tables[p] = t
rows = sorted(set().union(*tables.values()), key=lambda r: -max(tables[p][r] for p in progs))
print("| CPU ms per step | " + " | ".join(progs) + " |")
print("|---|" + "---|" * len(progs))
for r in rows:
    if max(abs(tables[p][r]) for p in progs) < 0.5: continue
    print(f"| {r} | " + " | ".join(f"{tables[p][r]:.1f}" for p in progs) + " |")
print("| **total** | " + " | ".join(f"{sum(tables[p].values()):.1f}" for p in progs) + " |")
