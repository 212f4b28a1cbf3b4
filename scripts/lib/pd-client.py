#!/usr/bin/env python3
"""Client of the P/D step of scripts/gpu-check.sh: sends N completions of token-id prompts through the
proxy (P prefills, D decodes with P's KV), asks P itself the same prompts as the single-node reference,
and prints one line per check plus a JSON summary. Exit 0 only when every answer is 200 and each
disaggregated text equals P's own text.

usage: pd-client.py PROXY_URL P_URL REQUESTS PROMPT_TOKENS DECODE_TOKENS CONCURRENCY
"""
import json
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def post(url, body, timeout=120):
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def main():
    proxy, p, n, prompt_tokens, decode_tokens, conc = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
    # distinct prompts (no prefix-cache hits between them): token ids in the synthetic vocabulary
    prompts = [[(1000 + 7919 * i + 104729 * t) % 30000 + 10 for t in range(prompt_tokens)] for i in range(n)]
    body = lambda pr: {"prompt": pr, "max_tokens": decode_tokens, "temperature": 0}
    start = time.monotonic()
    with ThreadPoolExecutor(conc) as pool:
        disagg = list(pool.map(lambda pr: post(proxy, body(pr)), prompts))
    wall = time.monotonic() - start
    ref = [post(p, body(pr)) for pr in prompts]
    ok = sum(1 for s, _ in disagg if s == 200)
    bad = [(i, s, str(b)[:300]) for i, (s, b) in enumerate(disagg) if s != 200]
    same = 0
    for (s, b), (rs, rb) in zip(disagg, ref):
        if s == 200 and rs == 200 and b["choices"][0]["text"] == rb["choices"][0]["text"]:
            same += 1
    print(f"pd requests: {ok} of {n} answered 200 through the proxy in {wall:.2f} s "
          f"({n / wall:.1f} requests/s, concurrency {conc}, {prompt_tokens}-token prompts, {decode_tokens} tokens each)")
    print(f"pd answers equal to P's own (single-node) answers: {same} of {n}")
    for b in bad[:3]:
        print("pd failed request:", b)
    print("pd summary json:", json.dumps({"ok": ok, "n": n, "same": same, "wall_s": round(wall, 3)}))
    sys.exit(0 if ok == n and same == n else 1)


if __name__ == "__main__":
    main()
