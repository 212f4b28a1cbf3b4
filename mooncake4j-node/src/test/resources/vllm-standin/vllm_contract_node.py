"""A stand-in for a vLLM node of a Mooncake P/D deployment, for testing routers (mooncake4j's proxy).

It is not vLLM and moves no KV: it speaks the HTTP contract a `vllm serve` node with the MooncakeConnector
speaks to a router, and checks what the router sends, so that a router that works against it sends what
vLLM nodes expect. Written for mooncake4j's tests from vLLM's documented behaviour; needs FastAPI, httpx
and uvicorn (Debian: python3-fastapi python3-httpx python3-uvicorn).

  --role prefill: the OpenAI routes plus, like vLLM's P (TP rank 0 of every DP rank), a bootstrap server
    whose GET /query lists {dp_rank: {"engine_id", "worker_addr": {tp: {pp: addr}}}} for --dp-size ranks.
    A request must carry kv_transfer_params {"do_remote_decode": true, "do_remote_prefill": false,
    "transfer_id"} and nothing else, "stream": false, "max_tokens": 1 (and "max_completion_tokens": 1 when
    present), no "stream_options", and X-data-parallel-rank naming one of its ranks. It "prefills" (keeps
    the prompt's digest under the transfer id, for that rank's engine) and, to prove the router sent P and D
    at once, answers only after the decode node's pull for that transfer id arrived. Answer: a completion of
    one token with "kv_transfer_params": null, as vLLM's Mooncake P.
  --role decode: a request must carry {"do_remote_decode": false, "do_remote_prefill": true,
    "remote_bootstrap_addr", "remote_engine_id", "transfer_id"} and nothing else. Like vLLM's D it asks
    remote_bootstrap_addr + "/query" for the engine, then pulls: here POST remote_bootstrap_addr +
    "/standin/pull" (instead of the ZMQ side channel), which waits for P's prefill of that transfer id and
    answers its engine id and prompt digest; both must match (same prompt at P and D, the engine id of the
    rank P was told to use). Then it generates max_tokens words from the digest, as JSON or as OpenAI
    server-sent events ending with "data: [DONE]".
  Without kv_transfer_params either role answers locally (the reference text of a prompt).
  --api-key K: like `vllm serve --api-key`, every /v1 request needs "Authorization: Bearer K" (401 else).
  Every request is logged; GET /standin/log returns the log. Errors are OpenAI-style JSON with 4xx/5xx.
Prints "standin ready http=<port> bootstrap=<port>" once both servers listen (ports picked by the OS).
"""

import argparse
import asyncio
import hashlib
import json
import socket
import sys
import time
import uuid

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

args = None
LOG = []
PREFILLED = {}  # transfer_id -> {"engine_id", "digest"}
EVENTS = {}  # transfer_id -> asyncio.Event set when prefilled
PULLS = {}  # transfer_id -> asyncio.Event set when D's pull arrived
ENGINE_IDS = []
WORKER_PORT = [0]

api = FastAPI()
bootstrap = FastAPI()


def error(status, message, kind="BadRequestError"):
    return JSONResponse(status_code=status, content={"error": {"message": message, "type": kind,
                                                               "param": None, "code": status}})


def event(name):
    return EVENTS.setdefault(name, asyncio.Event())


def pull_event(name):
    return PULLS.setdefault(name, asyncio.Event())


def prompt_digest(body, chat):
    if chat:
        key = json.dumps(body.get("messages"), sort_keys=True, separators=(",", ":"))
    else:
        key = json.dumps(body.get("prompt"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def word(digest, i):
    h = hashlib.sha256(f"{digest}:{i}".encode()).hexdigest()
    return " w" + h[:6]


def max_tokens(body):
    return int(body.get("max_completion_tokens", body.get("max_tokens", 16)))


@bootstrap.get("/query")
async def query():
    return {str(r): {"engine_id": e, "worker_addr": {"0": {"0": f"tcp://127.0.0.1:{WORKER_PORT[0]}"}}}
            for r, e in enumerate(ENGINE_IDS)}


@bootstrap.post("/standin/pull")
async def pull(request: Request):
    b = await request.json()
    tid = b["transfer_id"]
    pull_event(tid).set()
    try:
        await asyncio.wait_for(event(tid).wait(), timeout=30)
    except asyncio.TimeoutError:
        return error(404, f"no prefill of transfer {tid} within 30 s", "NotFoundError")
    return PREFILLED[tid]


@api.get("/health")
async def health():
    return JSONResponse(status_code=200, content=None)


@api.get("/standin/log")
async def log():
    return LOG


@api.get("/v1/models")
async def models():
    return {"object": "list", "data": [{"id": "standin", "object": "model", "owned_by": "vllm-standin"}]}


@api.post("/v1/completions")
async def completions(request: Request):
    return await complete(request, False)


@api.post("/v1/chat/completions")
async def chat_completions(request: Request):
    return await complete(request, True)


async def complete(request: Request, chat: bool):
    entry = {"path": request.url.path, "received": time.time(),
             "headers": {k.lower(): v for k, v in request.headers.items()
                         if k.lower() in ("x-request-id", "x-data-parallel-rank", "authorization", "content-type")}}
    LOG.append(entry)
    if args.api_key and request.headers.get("authorization") != f"Bearer {args.api_key}":
        entry["answer"] = 401
        return error(401, "Unauthorized", "AuthenticationError")
    try:
        body = await request.json()
    except ValueError:
        entry["answer"] = 400
        return error(400, "body is not JSON")
    entry["body"] = body
    params = body.get("kv_transfer_params")
    digest = prompt_digest(body, chat)
    n = max_tokens(body)
    request_id = request.headers.get("x-request-id") or uuid.uuid4().hex
    if params is not None and args.role == "prefill":
        problem = check_prefill(request, body, params)
        if problem:
            entry["answer"] = 400
            return error(400, problem)
        tid = params["transfer_id"]
        rank = int(request.headers["x-data-parallel-rank"])
        PREFILLED[tid] = {"engine_id": ENGINE_IDS[rank], "digest": digest}
        event(tid).set()
        try:
            await asyncio.wait_for(pull_event(tid).wait(), timeout=10)
        except asyncio.TimeoutError:
            entry["answer"] = 500
            return error(500, f"no decode node pulled transfer {tid} within 10 s of its prefill: was D's request "
                              "sent at the same time as P's?", "InternalServerError")
        entry["answer"] = 200
        return answer(chat, request_id, digest, 1, False, False, None)
    if params is not None:
        problem = check_decode(body, params)
        if problem:
            entry["answer"] = 400
            return error(400, problem)
        got = await pull_remote(params)
        if isinstance(got, str):
            entry["answer"] = 500
            return error(500, got, "InternalServerError")
        if got["digest"] != digest:
            entry["answer"] = 500
            return error(500, "the KV pulled from P is for another prompt than this request's", "InternalServerError")
    stream = body.get("stream") is True
    include_usage = stream and (body.get("stream_options") or {}).get("include_usage") is True
    entry["answer"] = 200
    return answer(chat, request_id, digest, n, stream, include_usage, None)


def check_prefill(request, body, params):
    want = {"do_remote_decode", "do_remote_prefill", "transfer_id"}
    if set(params) != want or params["do_remote_decode"] is not True or params["do_remote_prefill"] is not False:
        return f"P expects kv_transfer_params with exactly {sorted(want)} (do_remote_decode true), got {params}"
    if not isinstance(params["transfer_id"], str) or not params["transfer_id"]:
        return "transfer_id must be a non-empty string"
    if body.get("stream") is not False:
        return "a prefill request must have stream false"
    if "stream_options" in body:
        return "a prefill request must not carry stream_options"
    if body.get("max_tokens") != 1 or body.get("max_completion_tokens", 1) != 1:
        return "a prefill request must have max_tokens 1 (and max_completion_tokens 1 when present)"
    rank = request.headers.get("x-data-parallel-rank")
    if rank is None or not rank.isdigit() or int(rank) >= len(ENGINE_IDS):
        return f"X-data-parallel-rank {rank!r} is not a data-parallel rank of this node (0..{len(ENGINE_IDS) - 1})"
    return None


def check_decode(body, params):
    want = {"do_remote_decode", "do_remote_prefill", "remote_bootstrap_addr", "remote_engine_id", "transfer_id"}
    if set(params) != want or params["do_remote_decode"] is not False or params["do_remote_prefill"] is not True:
        return f"D expects kv_transfer_params with exactly {sorted(want)} (do_remote_prefill true), got {params}"
    if not str(params["remote_bootstrap_addr"]).startswith("http://"):
        return "remote_bootstrap_addr must be http://host:port"
    return None


async def pull_remote(params):
    base = params["remote_bootstrap_addr"]
    async with httpx.AsyncClient(timeout=60) as client:
        q = (await client.get(base + "/query")).json()
        engines = [e["engine_id"] for e in q.values()]
        if params["remote_engine_id"] not in engines:
            return f"remote engine {params['remote_engine_id']} is not registered at {base} (it lists {engines})"
        r = await client.post(base + "/standin/pull", json={"transfer_id": params["transfer_id"]})
        if r.status_code != 200:
            return f"pull of {params['transfer_id']} failed: {r.text}"
        got = r.json()
        if got["engine_id"] != params["remote_engine_id"]:
            return (f"transfer {params['transfer_id']} was prefilled by engine {got['engine_id']}, "
                    f"not by the remote_engine_id {params['remote_engine_id']} D was given")
        return got


def answer(chat, request_id, digest, n, stream, include_usage, kv_params):
    rid = ("chatcmpl-" if chat else "cmpl-") + request_id
    created = int(time.time())
    words = [word(digest, i) for i in range(n)]
    if not stream:
        choice = {"index": 0, "logprobs": None, "finish_reason": "length", "stop_reason": None}
        if chat:
            choice["message"] = {"role": "assistant", "content": "".join(words), "tool_calls": []}
        else:
            choice["text"] = "".join(words)
        return {"id": rid, "object": "chat.completion" if chat else "text_completion", "created": created,
                "model": "standin", "choices": [choice],
                "usage": {"prompt_tokens": 1, "total_tokens": 1 + n, "completion_tokens": n},
                "kv_transfer_params": kv_params}

    async def events():
        obj = "chat.completion.chunk" if chat else "text_completion"
        if chat:
            first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                     "finish_reason": None}
            yield sse({"id": rid, "object": obj, "created": created, "model": "standin", "choices": [first]})
        for i, w in enumerate(words):
            await asyncio.sleep(0)
            c = {"index": 0, "logprobs": None, "finish_reason": "length" if i == n - 1 else None}
            if chat:
                c["delta"] = {"content": w}
            else:
                c["text"] = w
            yield sse({"id": rid, "object": obj, "created": created, "model": "standin", "choices": [c]})
        if include_usage:
            yield sse({"id": rid, "object": obj, "created": created, "model": "standin", "choices": [],
                       "usage": {"prompt_tokens": 1, "total_tokens": 1 + n, "completion_tokens": n}})
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def sse(obj):
    return ("data: " + json.dumps(obj, separators=(",", ":")) + "\n\n").encode("utf-8")


def listen():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    return s


async def main():
    http_sock, boot_sock, worker_sock = listen(), listen(), listen()
    WORKER_PORT[0] = worker_sock.getsockname()[1]
    servers = [uvicorn.Server(uvicorn.Config(api, log_level="warning"))]
    socks = [[http_sock]]
    if args.role == "prefill":
        servers.append(uvicorn.Server(uvicorn.Config(bootstrap, log_level="warning")))
        socks.append([boot_sock])
    for s in servers:
        s.install_signal_handlers = lambda: None
    tasks = [asyncio.create_task(s.serve(sockets=k)) for s, k in zip(servers, socks)]
    while not all(s.started for s in servers):
        await asyncio.sleep(0.05)
    print(f"standin ready http={http_sock.getsockname()[1]} bootstrap={boot_sock.getsockname()[1]}", flush=True)
    # ends when stdin closes (the test ended) or on SIGTERM
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    for s in servers:
        s.should_exit = True
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--role", choices=["prefill", "decode"], required=True)
    p.add_argument("--dp-size", type=int, default=1)
    p.add_argument("--api-key", default=None)
    args = p.parse_args()
    ENGINE_IDS.extend(str(uuid.uuid4()) for _ in range(args.dp_size))
    asyncio.run(main())
