#!/usr/bin/env python3
"""web_ui_driver.py — drives headless Chromium over the DevTools protocol
for tests/test_web_ui.c (Python's standard library only: a minimal
WebSocket client is below).

    web_ui_driver.py CHROMIUM STEPS_JSON | @FILE_WITH_STEPS_JSON

STEPS_JSON is a list of steps, run in order in one page:
    {"op": "goto", "url": U}                 navigate (waits for the load event)
    {"op": "wait", "js": E, "timeout": S}    until Boolean(E) is true in the page (polls every 100 ms);
                                             a timeout is reported, not fatal: {"name": ..., "ok": false}
    {"op": "eval", "js": E, "name": N}       E's value (JSON; a Promise is awaited)
    {"op": "sleep", "s": S}
    {"op": "screenshot", "path": P}          a PNG of the viewport (1280x800 unless "height")
Every "wait" and "eval" with a "name" prints one JSON line
{"name": N, "ok": bool, "value": V, "t": ms since the epoch} on stdout.
Exit status 0 when the browser ran the steps, 2 when it could not start.
"""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: text frames, masked
    from the client, fragmented or not from the server."""

    def __init__(self, url):
        assert url.startswith("ws://")
        hostport, path = url[5:].split("/", 1)
        host, port = hostport.split(":")
        self.s = socket.create_connection((host, int(port)), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        req = ("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key))
        self.s.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.s.recv(1)
            if not chunk:
                raise IOError("websocket handshake: connection closed")
            head += chunk
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise IOError("websocket handshake refused: %r" % head[:200])

    def _read(self, n):
        b = b""
        while len(b) < n:
            chunk = self.s.recv(n - len(b))
            if not chunk:
                raise IOError("websocket closed")
            b += chunk
        return b

    def send(self, text):
        data = text.encode()
        n = len(data)
        if n < 126:
            hdr = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            hdr = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        mask = os.urandom(4)
        self.s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        msg = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            payload = self._read(n)
            op = b0 & 0x0F
            if op == 8:
                raise IOError("websocket closed by the browser")
            if op in (9, 10):  # ping/pong: not sent by Chromium to us in practice
                continue
            msg += payload
            if b0 & 0x80:
                return msg.decode()


class Page:
    def __init__(self, ws):
        self.ws, self.next_id, self.events = ws, 0, []

    def call(self, method, **params):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == mid:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, name, timeout):
        end = time.time() + timeout
        while time.time() < end:
            for i, e in enumerate(self.events):
                if e.get("method") == name:
                    del self.events[i]
                    return True
            self.ws.s.settimeout(max(0.1, end - time.time()))
            try:
                self.events.append(json.loads(self.ws.recv()))
            except socket.timeout:
                break
            finally:
                self.ws.s.settimeout(60)
        return False

    def eval(self, js):
        # A page that navigates (a reload after the login, a new route) drops
        # its execution context under an evaluation: that is "not yet", so
        # try again for a while rather than fail the run.
        for _ in range(50):
            try:
                r = self.call("Runtime.evaluate", expression=js, returnByValue=True, awaitPromise=True)
                break
            except RuntimeError as e:
                if "navigated or closed" not in str(e) and "context" not in str(e):
                    raise
                time.sleep(0.1)
        else:
            return False, "the page kept navigating"
        if "exceptionDetails" in r:
            return False, str(r["exceptionDetails"].get("exception", {}).get("description", r["exceptionDetails"]))
        return True, r.get("result", {}).get("value")


def out(name, ok, value):
    sys.stdout.write(json.dumps({"name": name, "ok": ok, "value": value, "t": int(time.time() * 1000)}) + "\n")
    sys.stdout.flush()


def main():
    chromium, arg = sys.argv[1], sys.argv[2]
    steps = json.loads(open(arg[1:]).read() if arg.startswith("@") else arg)
    prof = tempfile.mkdtemp(prefix="sluice-chromium-")
    proc = subprocess.Popen([chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             "--no-default-browser-check", "--disable-extensions", "--remote-debugging-port=0",
                             "--user-data-dir=" + prof, "--window-size=1280,800", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = os.path.join(prof, "DevToolsActivePort")
        end = time.time() + 60
        while not os.path.exists(port_file) or os.path.getsize(port_file) == 0:
            if time.time() > end or proc.poll() is not None:
                sys.stderr.write("web_ui_driver: chromium did not start (%s)\n" % chromium)
                return 2
            time.sleep(0.05)
        time.sleep(0.1)
        port = int(open(port_file).read().split()[0])
        targets = json.loads(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=30).read())
        page_t = [t for t in targets if t.get("type") == "page"][0]
        page = Page(WebSocket(page_t["webSocketDebuggerUrl"]))
        page.call("Page.enable")
        page.call("Runtime.enable")
        page.call("Emulation.setDeviceMetricsOverride", width=1280, height=800, deviceScaleFactor=1, mobile=False)
        for st in steps:
            op = st["op"]
            if op == "goto":
                page.events.clear()
                r = page.call("Page.navigate", url=st["url"])
                if "loaderId" in r:  # a new document (not a change of the #fragment alone)
                    page.wait_event("Page.loadEventFired", st.get("timeout", 30))
            elif op == "wait":
                end = time.time() + st.get("timeout", 10)
                ok, v = False, None
                while time.time() < end:
                    ok, v = page.eval("Boolean(%s)" % st["js"])
                    if ok and v:
                        break
                    ok = False
                    time.sleep(0.1)
                if st.get("name"):
                    out(st["name"], bool(ok), v)
            elif op == "eval":
                ok, v = page.eval(st["js"])
                if st.get("name"):
                    out(st["name"], ok, v)
            elif op == "sleep":
                time.sleep(st["s"])
            elif op == "screenshot":
                h = st.get("height", 800)
                page.call("Emulation.setDeviceMetricsOverride", width=1280, height=h, deviceScaleFactor=1,
                          mobile=False)
                time.sleep(0.3)
                r = page.call("Page.captureScreenshot", format="png")
                with open(st["path"], "wb") as f:
                    f.write(base64.b64decode(r["data"]))
                page.call("Emulation.setDeviceMetricsOverride", width=1280, height=800, deviceScaleFactor=1,
                          mobile=False)
            else:
                sys.stderr.write("web_ui_driver: unknown step %r\n" % op)
                return 1
        try:
            page.call("Browser.close")
        except Exception:
            pass
        return 0
    finally:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(prof, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
