#!/usr/bin/env python3
"""A loopback HTTPS API server that serves one pods list, for the bench's API rows (issue 34).

    bench/api_pods.py PODS_JSON DIR        # prints "ready PORT" once it listens

A FAKE, on purpose: the real kube-apiserver (tests/control-plane) would have to be given 20 000
pods with their statuses (a create and a status update each, minutes of etcd writes), and its
own cost of serialising them would then be in every row; the bench times the check's reading of
the API answer, not the API server. So this serves `GET /api/v1/pods?limit=N&continue=K` from
pages made once from PODS_JSON (`kubectl get pods -A -o json` as bench/gen_pods.py writes it):
a `PodList` per page of N items (the check asks for 500), `metadata.continue` naming the next
page, as the real server pages. HTTP/1.1 keep-alive, TLS with its own CA (openssl), a bearer
token. Writes DIR/ca.crt, DIR/kubeconfig (the check's --kubeconfig) and DIR/token.

Events (the check looks up a stuck pod's) are an empty `EventList`; anything else is a 404 `Status`, and is logged to stderr (a request the bench did not expect).
"""
import http.server
import json
import os
import ssl
import subprocess
import sys
import urllib.parse

TOKEN = "bench-token"


def certificates(d):
    """A CA and a server certificate for 127.0.0.1 (openssl, once)."""
    if os.path.exists(os.path.join(d, "server.crt")):
        return
    run = lambda *a: subprocess.run(["openssl", *a], cwd=d, check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "3650", "-subj", "/CN=bench-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=127.0.0.1")
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.crt", "-days", "3650", "-extfile", "san.ext")


def pages_of(path, limit):
    with open(path, "rb") as f:
        items = json.load(f)["items"]
    chunks = [items[i:i + limit] for i in range(0, len(items), limit)] or [[]]
    pages = []
    for i, chunk in enumerate(chunks):
        meta = {"resourceVersion": "100000"}
        if i + 1 < len(chunks):
            meta["continue"] = str(i + 1)
            meta["remainingItemCount"] = len(items) - (i + 1) * limit
        pages.append(json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": meta,
                                 "items": chunk}, separators=(",", ":")).encode())
    return pages


def main():
    pods, d = sys.argv[1], sys.argv[2]
    os.makedirs(d, exist_ok=True)
    certificates(d)
    by_limit = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def send(self, code, body):
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            u = urllib.parse.urlsplit(self.path)
            q = dict(urllib.parse.parse_qsl(u.query))
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self.send(401, b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":401,"reason":"Unauthorized"}')
            if u.path.endswith("/events"):
                # The check looks up a stuck pod's events: none here.
                return self.send(200, b'{"kind":"EventList","apiVersion":"v1","metadata":{"resourceVersion":"100000"},"items":[]}')
            if u.path != "/api/v1/pods":
                print(f"api_pods: unexpected request {self.path}", file=sys.stderr)
                return self.send(404, b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":404,"reason":"NotFound"}')
            limit = int(q.get("limit", "0")) or 1 << 30
            if limit not in by_limit:
                by_limit[limit] = pages_of(pods, limit)
            pages = by_limit[limit]
            i = int(q.get("continue", "0"))
            self.send(200, pages[i] if i < len(pages) else b"{}")

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(d, "server.crt"), os.path.join(d, "server.key"))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    port = srv.server_address[1]
    by_limit[500] = pages_of(pods, 500)
    with open(os.path.join(d, "token"), "w") as f:
        f.write(TOKEN)
    with open(os.path.join(d, "kubeconfig"), "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster:
    server: https://127.0.0.1:{port}
    certificate-authority: {os.path.join(os.path.abspath(d), "ca.crt")}
users:
- name: bench
  user:
    token: {TOKEN}
contexts:
- name: bench
  context:
    cluster: bench
    user: bench
current-context: bench
""")
    print(f"ready {port} {len(by_limit[500])}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
