"""Publishes three Stock ticks at one price to the installed bus and prints
the composite event it receives on stocks.equal (tests/package/deb_test.sh).

Usage: /usr/bin/python3 amqp_roundtrip.py PORT
Debian's python3-qpid-proton is an independent AMQP 1.0 client.
"""
import sys
import time

from proton import Message
from proton.utils import BlockingConnection

url = "127.0.0.1:" + sys.argv[1]
conn = None
for attempt in range(200):
    try:
        conn = BlockingConnection(url, timeout=10)
        break
    except Exception:
        time.sleep(0.1)
if conn is None:
    sys.exit("cannot connect to " + url)
receiver = conn.create_receiver("stocks.equal")
sender = conn.create_sender("stocks.ticks")
for ts, symbol in ((1, "IBM"), (2, "ACME"), (3, "INIT")):
    sender.send(Message(subject="Stock", properties={"ts": ts, "symbol": symbol, "price": 10.5}))
m = receiver.receive(timeout=20)
receiver.accept()
body = m.body if isinstance(m.body, dict) else {}
attrs = dict(m.properties or {})
attrs.update(body)
print("composite", m.subject, *(str(attrs.get(k)) for k in ("a_symbol", "b_symbol", "c_symbol")))
conn.close()
