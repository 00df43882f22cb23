#!/usr/bin/env python3
"""Runs the examples of README.md and docs/*.md that claim a result.

A fenced block is checked when the line before its fence (blank lines
aside) is an HTML comment naming how:

  <!-- check: output -->    a ```sh block: each run of lines not starting
                            with '#' is a script, run with bash with the
                            built cepbus first on PATH; the '# ' lines after
                            it are what it prints, in order (other lines may
                            come between them):
                            '# stderr: TEXT' on stderr, '# TEXT' on stdout,
                            '...' inside TEXT standing for anything. The
                            script must exit 0 unless a '# exit status N'
                            line says otherwise. A plain ``` block right
                            after it (blank lines between only) is what the
                            last script prints on stdout, line by line.
  <!-- check: validate -->  a descriptor: `cepbus validate` must accept it
                            (written to a file where the commands run).
  <!-- check: queries -->   queries, separated by blank lines ('--' lines
                            are comments): each must run on the engine
                            `--engine auto` picks, over no events.

Each page's examples run, in order, in a scratch folder of their own that
links every top-level entry of the repository (so `examples/...` reads as
in a checkout, and what an example writes goes to the scratch folder).
`NAME=TARGET` words after the kind link NAME in that folder to TARGET
first, a path in the checkout or `@build/...` in the build folder:
  <!-- check: validate stocks.jsonl=examples/quickstart/stocks.jsonl plugins=@build/plugins -->

Usage: check_docs.py SOURCE_DIR BUILD_DIR (the cepbus binary is
BUILD_DIR/bus/app/cepbus). Prints each failure as
PAGE:LINE: what (the line of the block's fence) and exits 1 on any.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = re.compile(r"^<!--\s*check:\s*(\w+)((?:\s+[^\s=]+=[^\s=]+)*)\s*-->\s*$")
TIMEOUT_SECONDS = 120


def blocks(path):
    """Yields (kind, fence line number, block lines) of the marked blocks."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        i += 1
        if not m:
            continue
        while i < len(lines) and not lines[i].strip():
            i += 1
        if i == len(lines) or not lines[i].startswith("```"):
            yield m.group(1), m.group(2).split(), i + 1, (None, None)
            continue
        fence = i + 1
        body = []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        shown = None
        j = i
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j < len(lines) and lines[j].strip() == "```":
            shown = []
            j += 1
            while j < len(lines) and not lines[j].startswith("```"):
                shown.append(lines[j])
                j += 1
        yield m.group(1), m.group(2).split(), fence, (body, shown)


def expectation(text):
    """A shown output line as a regular expression ('...': anything)."""
    return re.compile(".*".join(re.escape(p) for p in text.strip().split("...")) + r"\Z")


def run(command, root, env):
    return subprocess.run(["bash", "-c", command], cwd=root, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_SECONDS)


def check_output(body, shown_after, root, env):
    """The failures of a ```sh block whose comments show what it prints."""
    steps = []  # [script, [(stream, regex, text)], exit status]
    script = []
    for line in body + ["#"]:
        if not line.startswith("#"):
            script.append(line)
            continue
        if any(part.strip() for part in script):
            steps.append(["\n".join(script), [], 0])
        script = []
        text = line[1:].strip()
        if not steps or not text:
            continue  # a comment before the first command, or the end
        status = re.match(r"exit status (\d+)\Z", text)
        if status:
            steps[-1][2] = int(status.group(1))
        elif text.startswith("stderr:"):
            steps[-1][1].append(("stderr", expectation(text[7:]), text))
        else:
            steps[-1][1].append(("stdout", expectation(text), text))
    if shown_after is not None and steps:
        steps[-1][1] += [("stdout", expectation(t), t) for t in shown_after if t.strip()]
    failures = []
    for command, shown, status in steps:
        try:
            done = run(command, root, env)
        except subprocess.TimeoutExpired:
            failures.append(f"`{command[:200]}` did not end within {TIMEOUT_SECONDS} s")
            continue
        if done.returncode != status:
            failures.append(f"`{command[:200]}` exited {done.returncode}, not {status}: "
                            f"{done.stderr.strip()[-500:]}")
            continue
        printed = {"stdout": done.stdout.split("\n"), "stderr": done.stderr.split("\n")}
        at = {"stdout": 0, "stderr": 0}
        for stream, regex, text in shown:
            out = printed[stream]
            while at[stream] < len(out) and not regex.match(out[at[stream]].strip()):
                at[stream] += 1
            if at[stream] == len(out):
                failures.append(f"`{command[:200]}` does not print, on {stream}, {text!r}; it "
                                f"printed: {getattr(done, stream).strip()[-800:]!r}")
                break
            at[stream] += 1
    return failures


def check_validate(body, shown_after, root, env):
    with tempfile.NamedTemporaryFile("w", suffix=".xml", dir=root, delete=False) as f:
        f.write("\n".join(body) + "\n")
        name = f.name
    try:
        done = run(f"cepbus validate {name}", root, env)
    finally:
        os.unlink(name)
    if done.returncode != 0:
        return [f"`cepbus validate` refuses it: {done.stdout.strip()} {done.stderr.strip()}"]
    return []


def check_queries(body, shown_after, root, env):
    queries, current = [], []
    for line in body + [""]:
        if line.strip().startswith("--"):
            continue
        if line.strip():
            current.append(line.strip())
        elif current:
            queries.append(" ".join(current))
            current = []
    failures = []
    for q in queries:
        done = subprocess.run(["cepbus", "match", "--engine", "auto", "--query", q, "--events",
                               "/dev/null"], cwd=root, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_SECONDS)
        if done.returncode != 0:
            failures.append(f"no engine runs {q!r}: {done.stderr.strip()}")
    return failures


CHECKS = {"output": check_output, "validate": check_validate, "queries": check_queries}


def main():
    root, build = sys.argv[1], os.path.abspath(sys.argv[2])
    binary = os.path.join(build, "bus", "app", "cepbus")
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(binary) + os.pathsep + env.get("PATH", "")
    pages = ["README.md"] + sorted(
        os.path.join("docs", p) for p in os.listdir(os.path.join(root, "docs"))
        if p.endswith(".md"))
    checked, failures = 0, []
    for page in pages:
        scratch = tempfile.mkdtemp(prefix="cepbus-docs-")
        for entry in os.listdir(root):
            if entry != ".git" and not entry.startswith("build"):
                os.symlink(os.path.join(root, entry), os.path.join(scratch, entry))
        try:
            for kind, links, line, (body, shown) in blocks(os.path.join(root, page)):
                where = f"{page}:{line}"
                for link in links:
                    name, target = link.split("=")
                    target = (os.path.join(build, target[len("@build/"):])
                              if target.startswith("@build/") else os.path.join(root, target))
                    if os.path.lexists(os.path.join(scratch, name)):
                        os.unlink(os.path.join(scratch, name))  # the checkout's, replaced
                    os.symlink(target, os.path.join(scratch, name))
                if body is None:
                    failures.append(f"{where}: 'check: {kind}' is not followed by a fenced block")
                elif kind not in CHECKS:
                    failures.append(f"{where}: unknown check '{kind}' (output, validate, queries)")
                else:
                    checked += 1
                    failures += [f"{where}: {kind}: {f}"
                                 for f in CHECKS[kind](body, shown, scratch, env)]
        finally:
            shutil.rmtree(scratch)
    for f in failures:
        print(f)
    print(f"{checked} examples checked, {len(failures)} failures")
    if checked == 0:
        print("no example is marked: the markers are gone")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
