#!/usr/bin/env python3
"""Every command quoted in README.md and docs/*.md that needs no GPU runs (issue 58); the committed DeepSpeed
summaries regenerate byte for byte.

    python3 scripts/check_doc_commands.py [--zsim build/bin/zsim] [--list]

A quoted command is a line of an indented code block, or of a fenced bash / sh block, that starts with zsim, zrun,
build/bin/zsim, build/bin/zrun, scripts/, `python3 validate/...` or `bash validate/...` (a trailing `\\` joins the
next line; `# ...` comments are dropped; a line whose second word is no argument, such as program output, is not a
command). Each one is
  run        as written, in a scratch folder that mirrors the repository (its inputs read through links, whatever it
             writes kept apart), and what it writes over a committed file compared with that file byte for byte;
  help-run   where it names placeholders (my.yaml, SCENARIO.yaml, RUN.json, ...): `PROGRAM [SUBCOMMAND] --help` runs
             and names every option the command uses;
  skipped    where it needs a GPU, the device machine or the whole build (SKIPS below: printed with the reason).
Then every committed summary of `zsim validate --deepspeed-summary` (validate/results/*/summary.md beginning
"# zsim against DeepSpeed") is written again, with its bands, in the scratch folder and compared byte for byte.
Standard library only; CTest runs it (validate/CMakeLists.txt, doc_commands_test).
"""
import argparse
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = re.compile(r"^(build/bin/)?(zsim|zrun)\b|^scripts/|"
                      r"^python3? (validate|scripts|runtime)/|^bash (validate|scripts|runtime)/")
SUBCOMMANDS = ("sweep", "advise", "validate", "plan", "merge", "calibrate")
PLACEHOLDER = re.compile(r"my\.yaml|my-|SCENARIO|RUN\.json|\brun\.json|A\.csv|\.\.\.|\[|\$|\*|deepspeed_results/|"
                         r"scenario\.yaml|RESULT|TRACE|RECORD_DIR")
# (pattern on the command, why it is not run here)
SKIPS = (
    (r"^(build/bin/)?zrun\b", "zrun: runs on GPUs (and is built only with CUDA)"),
    (r"^scripts/build\.sh", "the whole build (CI runs it; this check runs inside it)"),
    (r"^scripts/test\.sh", "the whole suite (this check is one of its tests)"),
    (r"device_run\.sh", "the GPU machine's driver"),
    (r"device_calibrate\.sh", "the GPU machine's driver of calibrate_node.py"),
)
# (pattern, why) of commands run through --help only: they need a GPU or write into the repository's folders.
HELP_ONLY = (
    (r"validate/deepspeed/harness\.py --case-dir", "runs DeepSpeed on a GPU (the harness's tests run it on fakes)"),
    (r"validate/deepspeed/advise_cases\.py", "writes validate/deepspeed/cases/adv-*: make_cases.py --check and "
                                             "test_advise_cases check them"),
)
# Options naming a committed file a command writes: the scratch folder gets a copy (compared after the run).
WRITES = ("--profile", "--report")


def quoted_commands():
    """[(file, line, command)] of README.md and docs/*.md."""
    out = []
    for path in ["README.md"] + sorted(glob.glob(os.path.join(REPO, "docs", "*.md"))):
        rel = os.path.relpath(os.path.join(REPO, path), REPO)
        fence = None
        pending = None
        with open(os.path.join(REPO, rel)) as f:
            for i, line in enumerate(f, 1):
                line = line.rstrip("\n")
                if line.startswith("```"):
                    fence = None if fence is not None else (line[3:].strip() or "plain")
                    continue
                in_block = (fence in ("bash", "sh")) or (fence is None and line.startswith("    "))
                if pending is not None:
                    pending[2] += " " + line.strip().rstrip("\\").strip()
                    if not line.rstrip().endswith("\\"):
                        out.append(tuple(pending))
                        pending = None
                    continue
                if not in_block:
                    continue
                c = line.strip()
                if c.startswith("$ "):
                    c = c[2:]
                c = re.sub(r"\s+#\s.*$", "", c)
                if not PROGRAMS.match(c) or not is_command(c):
                    continue
                if c.endswith("\\"):
                    pending = [rel, i, c.rstrip("\\").strip()]
                else:
                    out += [(rel, i, part.strip()) for part in c.split(" && ")]  # a chain: each command alone
    return out


def is_command(c):
    words = c.split()
    if len(words) < 2:
        return True
    w = words[1]
    return (w.startswith("-") or "/" in w or w.endswith((".yaml", ".json", ".sh", ".py", ".csv")) or w in SUBCOMMANDS
            or w == "&&" or w.isupper() or w.endswith(".yaml]"))


def mirror(root):
    """A scratch copy of the repository's layout: top-level entries linked, validate/ and validate/results/ real
    folders whose entries are links (a record folder is copied where a command writes into it)."""
    for e in os.listdir(REPO):
        if e in (".git", "validate") or e.startswith("build"):
            continue
        os.symlink(os.path.join(REPO, e), os.path.join(root, e))
    os.makedirs(os.path.join(root, "validate", "results"))
    for e in os.listdir(os.path.join(REPO, "validate")):
        if e != "results":
            os.symlink(os.path.join(REPO, "validate", e), os.path.join(root, "validate", e))
    for e in os.listdir(os.path.join(REPO, "validate", "results")):
        os.symlink(os.path.join(REPO, "validate", "results", e), os.path.join(root, "validate", "results", e))


def own_copy(root, rel):
    """Make root/rel a copy of the repository's (a file, or a record folder), never writing through a link: every
    linked folder on the way becomes a real folder of links first."""
    cur = root
    for part in rel.split("/")[:-1]:
        cur = os.path.join(cur, part)
        if os.path.islink(cur):
            target = os.readlink(cur)
            os.unlink(cur)
            os.makedirs(cur)
            for e in os.listdir(target):
                os.symlink(os.path.join(target, e), os.path.join(cur, e))
    dst, src = os.path.join(root, rel), os.path.join(REPO, rel)
    if os.path.islink(dst):
        os.unlink(dst)
    if os.path.isdir(src):
        shutil.copytree(src, dst, symlinks=True)
    else:
        shutil.copyfile(src, dst)
    return dst


def same(a, b):
    with open(a, "rb") as f, open(b, "rb") as g:
        return f.read() == g.read()


def run(cmd, cwd, timeout=120):
    p = subprocess.run(cmd, cwd=cwd, shell=isinstance(cmd, str), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout, text=True)
    return p.returncode, p.stdout


def program_words(c, zsim):
    """The command with zsim replaced by the binary and python by this interpreter."""
    words = shlex.split(c)
    if words[0] in ("zsim", "build/bin/zsim"):
        words[0] = zsim
    elif words[0] in ("python3", "python"):
        words[0] = sys.executable
    return words


def help_check(c, zsim, root):
    """PROGRAM [SUBCOMMAND] --help runs and names every option the command uses."""
    words = program_words(c, zsim)
    prog = words[:2] if words[0] == sys.executable else words[:1]
    if words[0] == zsim and len(words) > 1 and words[1] in SUBCOMMANDS:
        prog = words[:2]
        if len(words) > 2 and words[2] in SUBCOMMANDS:
            prog = words[:3]
    code, text = run(prog + ["--help"], root)
    if code != 0:
        return f"--help exited {code}: {text[-300:]}"
    missing = [w.split("=")[0] for w in words if w.startswith("--") and w.split("=")[0] not in text]
    return f"--help names no {', '.join(missing)}" if missing else None


def full_run(c, zsim, root):
    """The command as written in the scratch folder; the committed files it writes compared byte for byte."""
    words = program_words(c, zsim)
    written = []
    for k, w in enumerate(words[:-1]):
        if w in WRITES and not os.path.isabs(words[k + 1]):
            written.append(words[k + 1])
            own_copy(root, words[k + 1])
    if words[0] == zsim and "--deepspeed-summary" in words:
        d = words[words.index("--deepspeed-summary") + 1]
        own_copy(root, d)
        written += [os.path.join(d, "summary.md")] + ([os.path.join(d, "deepspeed_bands.json")]
                                                      if "--write-bands" in words else [])
    code, text = run(words, root)
    if code != 0:
        return f"exited {code}: {text[-400:]}"
    differ = [w for w in written if not same(os.path.join(root, w), os.path.join(REPO, w))]
    return f"rewrote {', '.join(differ)} differently" if differ else None


def deepspeed_summaries():
    """The record folders whose summary.md `zsim validate --deepspeed-summary` writes and CI validates again (they
    hold deepspeed_bands.json), and those it wrote once, at the commit their README names (no bands: printed)."""
    kept, snapshots = [], []
    for s in sorted(glob.glob(os.path.join(REPO, "validate", "results", "*", "summary.md"))):
        with open(s) as f:
            if f.readline().startswith("# zsim against DeepSpeed"):
                d = os.path.relpath(os.path.dirname(s), REPO)
                (kept if os.path.isfile(os.path.join(REPO, d, "deepspeed_bands.json")) else snapshots).append(d)
    return kept, snapshots


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zsim", default=os.path.join(REPO, "build", "bin", "zsim"), help="the zsim binary")
    ap.add_argument("--list", action="store_true", help="list the commands and what is done with each; run none")
    args = ap.parse_args(argv)
    zsim = os.path.abspath(args.zsim)
    failures, counts = [], {"run": 0, "help-run": 0, "skipped": 0}
    cmds = quoted_commands()
    for rel, line, c in cmds:
        skip = next((why for pat, why in SKIPS if re.search(pat, c)), None)
        help_only = next((why for pat, why in HELP_ONLY if re.search(pat, c)), None)
        kind = "skipped" if skip else ("help-run" if PLACEHOLDER.search(c) or help_only else "run")
        counts[kind] += 1
        where = f"{rel}:{line}"
        if args.list or kind == "skipped":
            print(f"{kind:8} {where}: {c}" + (f"   ({skip})" if skip else ""))
            continue
        with tempfile.TemporaryDirectory() as root:
            mirror(root)
            try:
                err = help_check(c, zsim, root) if kind == "help-run" else full_run(c, zsim, root)
            except (OSError, subprocess.TimeoutExpired, ValueError) as e:
                err = f"{type(e).__name__}: {e}"
        print(f"{'FAILED' if err else 'ok':8} {kind:8} {where}: {c}" + (f"\n         {err}" if err else ""))
        if err:
            failures.append(where)
    summaries, snapshots = deepspeed_summaries()
    for d in snapshots:
        print(f"skipped  summary  {d}/summary.md   (a snapshot: no deepspeed_bands.json, its README names the commit "
              "that wrote it)")
    for d in summaries if not args.list else ():
        with tempfile.TemporaryDirectory() as root:
            mirror(root)
            err = full_run(f"zsim validate --deepspeed-summary {d} --write-bands", zsim, root)
        print(f"{'FAILED' if err else 'ok':8} summary  {d}/summary.md, deepspeed_bands.json" +
              (f"\n         {err}" if err else ""))
        if err:
            failures.append(d)
    print(f"{len(cmds)} quoted commands: {counts['run']} run, {counts['help-run']} through --help, "
          f"{counts['skipped']} skipped; {len(summaries)} DeepSpeed summaries regenerated; "
          f"{len(failures)} failed" + (f": {', '.join(failures)}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
