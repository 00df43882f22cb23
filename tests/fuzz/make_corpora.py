#!/usr/bin/python3
"""Builds the seed corpora of tests/fuzz/corpus/<target>/ from the examples
and the unit tests' inputs, so a fuzzer starts from inputs that reach deep
instead of discovering the syntax byte by byte. Run it from anywhere with
Debian's interpreter (the AMQP seeds need python3-qpid-proton):

    /usr/bin/python3 tests/fuzz/make_corpora.py

It rewrites the seed files it makes (seed-NNN) and leaves other files, e.g.
crash reproducers kept as regressions, alone. Each seed is small; each
target gets a few dozen at most.
"""
import ast
import hashlib
import os
import random
import re
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")
MAX_SEEDS = 40
MAX_BYTES = 4096


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def c_strings(text):
    """The C++ string literals of a source: plain ones (adjacent pieces joined)
    and raw R"(...)" ones, decoded."""
    out = []
    for m in re.finditer(r'R"([^(]*)\((.*?)\)\1"', text, re.S):
        out.append(m.group(2))
    plain = re.sub(r'R"([^(]*)\((.*?)\)\1"', '""', text, flags=re.S)
    for m in re.finditer(r'((?:"(?:[^"\\\n]|\\.)*"\s*)+)', plain):
        pieces = re.findall(r'"((?:[^"\\\n]|\\.)*)"', m.group(1))
        try:
            out.append("".join(ast.literal_eval('"' + p + '"') for p in pieces))
        except (ValueError, SyntaxError):
            pass
    return out


def write(target, seeds):
    folder = os.path.join(OUT, target)
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        if name.startswith("seed-"):
            os.remove(os.path.join(folder, name))
    unique = []
    for s in seeds:
        b = s if isinstance(s, bytes) else s.encode()
        if 0 < len(b) <= MAX_BYTES and b not in unique:
            unique.append(b)
    for i, b in enumerate(unique[:MAX_SEEDS]):
        with open(os.path.join(folder, "seed-%03d" % i), "wb") as f:
            f.write(b)
    print("%-14s %d seeds" % (target, min(len(unique), MAX_SEEDS)))


def test_strings(*files):
    out = []
    for f in files:
        out += c_strings(read(*f.split("/")))
    return out


def queries():
    found = []
    for f in ["tests/bus/core/pattern/parser_test.cc", "tests/bus/core/pattern/printer_test.cc",
              "tests/plugins/nfa/nfa_test.cc", "tests/plugins/algebra/algebra_operator_test.cc",
              "tests/plugins/petri/petri_detector_test.cc", "tests/integration/match_patterns_test.cc"]:
        if os.path.exists(os.path.join(ROOT, f)):
            found += [s.strip() for s in test_strings(f) if s.strip().startswith("PATTERN")]
    found.append("PATTERN SEQ(Stock a, Stock b, Stock c) WHERE a.price = b.price AND "
                 "b.price = c.price AND a.symbol != b.symbol WITHIN 1000 "
                 "STRATEGY skip_till_any_match RETURN EqualPrices(a.symbol, b.symbol, c.symbol, a.price)")
    found.append("PATTERN SEQ(A a, NOT(C c), B+ b[]) WHERE b[i].price > b[i-1].price AND b[i].qty < 10 "
                 "AND c.x = a.x WITHIN 50 PARTITION BY symbol STRATEGY skip-till-next-match")
    # Spread over the operators rather than the first few dozen of one file.
    random.Random(7).shuffle(found)
    return sorted(set(found), key=found.index)


def main():
    qs = queries()
    write("pattern", qs)

    files = []
    for i in range(0, min(len(qs), 60), 3):
        chunk = qs[i:i + 3]
        files.append("# patterns\n" + "".join("q%d: %s\n" % (k, q) for k, q in enumerate(chunk)))
        files.append("\n".join(chunk) + "\n")
    files.append("dup: PATTERN A a\ndup: PATTERN B b\n")
    files.append("# nothing but a comment\n\n")
    write("patterns_file", files)

    descriptors = [read("examples", d, d + ".xml") for d in ("quickstart", "cloned-plates", "secure")]
    descriptors += [s for s in test_strings("tests/bus/host/descriptor/parser_test.cc")
                    if s.lstrip().startswith("<")]
    write("descriptor", descriptors)

    lines = read("examples", "quickstart", "stocks.jsonl").splitlines()[:15]
    lines += [s for s in test_strings("tests/bus/core/event_json_test.cc") if s.lstrip().startswith("{")]
    write("event_json", lines)

    write("time_matrix", [s for s in test_strings("tests/plugins/join/time_matrix_test.cc")
                          if "," in s and len(s) > 3])

    write("admin_api", admin_requests(descriptors))
    write("amqp_message", amqp_messages())
    write("journal", journal_inputs(lines))
    rng = random.Random(1)
    write("engines", [bytes(rng.randrange(256) for _ in range(rng.randrange(16, 300)))
                      for _ in range(30)])


def admin_requests(descriptors):
    token = "Bearer s3cret"
    fragment = ('<service-assembly name="fz">\n  <service-unit name="u" type="replay-sink">\n'
                '    <param name="file" value="out.jsonl"/>\n'
                '    <subscribe address="stocks.#" filter="price &gt; 10"/>\n'
                '  </service-unit>\n</service-assembly>\n')
    query = ('<query name="q" engine="nfa" input="stocks.#" output="alerts">'
             'PATTERN SEQ(Stock a, Stock b) WHERE a.price &lt; b.price WITHIN 10</query>')
    reqs = []
    for path in ["/metrics", "/api/components", "/api/components/sink", "/api/components/a%3Ab",
                 "/api/components/bad%zz", "/api/routes", "/api/flows", "/api/services",
                 "/api/endpoints", "/api/stages", "/api/queries", "/api/plugins",
                 "/api/assemblies", "/", "/dashboard.js", "/dashboard.css", "/nothing",
                 "/api/queries/svc/q/model?format=dot", "/api/components?x=1"]:
        reqs.append("GET\n%s\n\n" % path)
    reqs += [
        "POST\n/api/events/stocks.ibm\n%s\n%s" % (token, '{"type":"Stock","ts":1,"attrs":{"price":2.5}}'),
        "POST\n/api/events/stocks.ibm\n\n{\"type\":\"Stock\",\"ts\":1}",
        "POST\n/api/events/slow.x\nBearer wrong\n{\"type\":\"A\",\"ts\":1}",
        "POST\n/api/assemblies\n%s\n%s" % (token, fragment),
        "POST\n/api/assemblies\n%s\n<service-assembly" % token,
        "DELETE\n/api/assemblies/fz\n%s\n" % token,
        "POST\n/api/queries/fz.u\n%s\n%s" % (token, query),
        "DELETE\n/api/queries/fz.u/q\n%s\n" % token,
        "POST\n/api/routes/slow.%%23/pause\n%s\n" % token,
        "POST\n/api/routes/(default)/resume\n%s\n" % token,
        "PUT\n/api/components\n\n",
        "DELETE\n/api/components/sink\n%s\n" % token,
    ]
    return reqs


def amqp_messages():
    try:
        import proton
    except ImportError:
        print("amqp_message: python3-qpid-proton missing, no seeds")
        return []
    from proton import Message, symbol, timestamp, ulong
    msgs = [
        Message(subject="Stock", properties={"ts": 5, "price": 1.5}, body={"symbol": "IBM"}),
        Message(subject="Stock", creation_time=1700000000.5, body={"price": 10, "qty": 3}),
        Message(properties={"type": "A", "ts": 1}),
        Message(subject="A", id=ulong(42), properties={"ts": 2, "prob": 0.5, "key": "k"}),
        Message(subject="A", properties={"ts": 3}, body={symbol("sym"): symbol("v"), "t": timestamp(5)}),
        Message(subject="A", properties={"ts": 3}, body="not a map"),
        Message(subject="A", properties={"ts": 3}, body=[1, 2, 3]),
        Message(subject="A", properties={"ts": "x"}),
        Message(subject="A"),
        Message(subject="A", properties={"ts": 4, "nested": None, "b": True, "big": ulong(2**63)}),
        Message(subject="cepbus.fault", properties={"fault": "timeout", "fault-description": "late"}),
        Message(subject="", properties={"type": "", "ts": 1}),
        Message(subject="A", properties={"ts": 9}, body={1: "int key"}),
        Message(subject="A", properties={"ts": 9}, body={"m": {"inner": 1}}),
    ]
    return [m.encode() for m in msgs]


def journal_inputs(lines):
    # journal_fuzz reads (FuzzedDataProvider): the last byte picks the field to
    # corrupt, the 8 before it the number written, the rest the bytes written.
    out = []
    for which in range(13):
        payloads = [b"", lines[0].encode(), b'{"type":"A"', b"\xff\xfe",
                    struct.pack("<H", 1) + b"a" + struct.pack("<I", 2) + struct.pack("<QQ", 5, 6),
                    struct.pack("<H", 1) + b"a" + struct.pack("<I", 0xFFFFFFFF)]
        for k, p in enumerate(payloads[: 2 if which > 3 else len(payloads)]):
            number = [0, 1, -1, 2**62, 3, -(2**63)][k % 6]
            out.append(p + struct.pack("<q", number)[::-1] + bytes([which]))
    return out


if __name__ == "__main__":
    main()
