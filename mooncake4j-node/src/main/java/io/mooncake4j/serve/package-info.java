/**
 * A serving node ({@code bin/mooncake4j serve}): the reference serving engine of
 * {@code io.mooncake4j.sim} behind an HTTP server that speaks the OpenAI-compatible contract of a
 * vLLM node in a Mooncake P/D deployment, so that mooncake4j nodes, vLLM nodes and vLLM's proxy
 * ({@code examples/disaggregated/mooncake_connector/mooncake_connector_proxy.py}) can be mixed.
 *
 * <h2>HTTP contract</h2>
 * <ul>
 *   <li>{@code GET /health}: 200 with an empty body while serving; 503 (JSON error) while draining
 *       or after the engine failed.</li>
 *   <li>{@code GET /v1/models}: {@code {"object":"list","data":[{"id":<served name>,"object":"model",
 *       "created","owned_by":"mooncake4j","root","parent":null,"max_model_len","permission":[]}]}}.</li>
 *   <li>{@code POST /v1/completions}: {@code prompt} (a string, a list of token ids, or a list of one
 *       of those), {@code max_tokens} (default 16), {@code stream}, {@code stream_options.include_usage},
 *       {@code model} (optional; another name than the served one is 404), {@code n} (only 1),
 *       {@code kv_transfer_params}; other fields (temperature, stop, ...) are accepted and ignored.
 *       Answer: {@code {"id":"cmpl-<X-Request-Id or uuid>","object":"text_completion","created","model",
 *       "choices":[{"index":0,"text","logprobs":null,"finish_reason":"length","stop_reason":null}],
 *       "usage":{"prompt_tokens","total_tokens","completion_tokens","prompt_tokens_details":null},
 *       "prompt_logprobs":null,"kv_transfer_params":<see below>}}.</li>
 *   <li>{@code POST /v1/chat/completions}: {@code messages} instead of {@code prompt} (rendered by the
 *       {@link io.mooncake4j.serve.SyntheticTokenizer} template), {@code max_completion_tokens} or
 *       {@code max_tokens}; answer {@code "object":"chat.completion"}, id {@code chatcmpl-...}, each
 *       choice with {@code "message":{"role":"assistant","content","tool_calls":[]}}.</li>
 *   <li>{@code stream: true}: {@code Content-Type: text/event-stream}; one {@code data: <json>} event
 *       per generated token ({@code "object":"text_completion"} with {@code choices[0].text}, or
 *       {@code "chat.completion.chunk"} with {@code choices[0].delta.content}, preceded by a
 *       {@code delta} of {@code {"role":"assistant","content":""}}), the last with
 *       {@code "finish_reason":"length"}; with {@code include_usage} a chunk with {@code "choices":[]}
 *       and the usage; then {@code data: [DONE]}. A failure before the first token is a plain JSON
 *       error response; after it, an event {@code data: {"error":{...}}} then {@code data: [DONE]}.</li>
 *   <li>Headers: {@code X-Request-Id} names the response id (as vLLM); {@code X-data-parallel-rank}
 *       must be 0 (one DP rank per node).</li>
 *   <li>{@code GET /mooncake/status} (not in vLLM): the engine's counters as JSON (engine id, role,
 *       blocks free, requests waiting/running/loading, KV held for decode nodes, in flight, requests
 *       ok/failed, KV bytes received, mismatched KV words, the connector's {@code reduce()} stats).</li>
 *   <li>Errors: {@code {"error":{"message","type","param","code"}}} with the HTTP status as
 *       {@code code}: 400 {@code BadRequestError} (bad JSON, missing or mistyped fields, prompt plus
 *       completion above {@code max_model_len}, {@code kv_transfer_params} a node of this role cannot
 *       honour, a prefill node whose KV layout differs from this model node's: {@code PeerLayouts}), 404 {@code NotFoundError} (unknown model or route), 405, 413 (body above 16 MiB), 500
 *       {@code InternalServerError} (the request's KV load failed), 503 {@code ServiceUnavailableError}
 *       (draining, engine stopped, too many requests in flight).</li>
 * </ul>
 *
 * <h2>{@code kv_transfer_params}</h2>
 * Honoured as vLLM's MooncakeConnector does (they go to the connector's scheduler unchanged):
 * <ul>
 *   <li>P ({@code kv_producer} or {@code kv_both}): {@code do_remote_decode} with {@code transfer_id}
 *       (a proxy also sets {@code max_tokens=1}): the prefill runs, the request finishes, and its
 *       KV blocks are held until every decode rank pulled them or
 *       {@code VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT} expired. The response's
 *       {@code kv_transfer_params} are then what a decode node needs:
 *       {@code {"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id","remote_bootstrap_addr",
 *       "transfer_id"}} (vLLM's Mooncake connector returns null there and its proxy builds these from
 *       {@code /query}; returning them lets a proxy also forward P's answer, as with NIXL). Null for
 *       every other request.</li>
 *   <li>D ({@code kv_consumer} or {@code kv_both}): {@code do_remote_prefill} with
 *       {@code remote_engine_id}, {@code remote_bootstrap_addr} ({@code http://host:port} of P's bootstrap
 *       server) and {@code transfer_id}: the prompt's KV (beyond D's own prefix-cache hits) is pulled
 *       from P, then D decodes. It may be sent before, with or after P's request.</li>
 *   <li>A P or {@code kv_both} node's TP rank 0 runs the bootstrap server on
 *       {@code VLLM_MOONCAKE_BOOTSTRAP_PORT} (default 8998) unless
 *       {@code kv_connector_extra_config.bootstrap_server_address} names an external one;
 *       {@code GET /query} there answers proxies and decode nodes as vLLM's does.</li>
 * </ul>
 *
 * <h2>The synthetic model's output</h2>
 * The engine runs in {@link io.mooncake4j.sim.SimEngine.Sampling#KV} mode: generated token {@code k}
 * is a function of the prefix hash of everything before it and of a digest of the prompt's KV bytes
 * as read from this node's cache once the prompt's KV is complete (every byte of every layer and KV
 * head, independent of the TP size). A {@code kv_both} node and a P→D pair therefore answer the same
 * text for the same prompt and {@code max_tokens}, and one changed byte of transferred KV changes it.
 * Text is rendered by {@link io.mooncake4j.serve.SyntheticTokenizer}.
 *
 * <p>Bounds: bodies declared above 16 MiB get 413 at once (then read away up to 64 MiB, so that a
 * client sending first sees it; a larger one, or an oversized chunk, closes the connection), at most
 * 64 are read at once of which 16 for one client network, the slowest evicted for a newcomer
 * ({@link io.mooncake4j.http.HttpLimits}; a body below the minimum rate in a recent window or past its
 * overall deadline, or a header not complete within the header deadline, is cut by the node's
 * {@link io.mooncake4j.http.HttpFront}), and at most
 * {@link io.mooncake4j.serve.ServeOptions#maxPendingRequests()} requests are accepted at once (503 beyond).
 *
 * <p>A request whose client disconnects is aborted, as vLLM does ({@link io.mooncake4j.sim.SimEngine#abort}):
 * one not yet admitted, prefilling or decoding finishes at once as {@code FINISHED_ABORTED} through the
 * connector's {@code request_finished} (P: its transfer goes to {@code reqs_not_processed}; D not yet
 * allocated: P is told to release its blocks) and its blocks are freed; a D request whose KV is being pulled is
 * abandoned and freed when the pull ends (no write of P can land in reused blocks); KV that P already holds
 * for a decode node stays held until D pulls it or the abort timeout. A blocked handler is not told when
 * its connection closes, so a watcher ({@link io.mooncake4j.internal.sys.ClientWatch}) reads the kernel's TCP
 * table every second for the connections of requests in flight for more than 3 s (Linux; elsewhere only a
 * failed write to a streaming client is noticed).
 *
 * <p>Not supported: more than one prompt or choice per request, logprobs, stop strings.
 *
 * <p><b>Threads and ownership:</b> a {@link io.mooncake4j.serve.ServeNode} owns its engine (KV memory,
 * workers, step loop) and its HTTP server (an {@link io.mooncake4j.http.HttpFront}), whose exchanges run on
 * virtual threads ({@code mooncake-serve-http-N}) that block on the engine's futures; closing the node drains it,
 * then frees everything. The node admits a request and owns its engine request and slots; the JSON answer and
 * the event stream written on that exchange's thread are {@code CompletionAnswers}'.
 */
package io.mooncake4j.serve;
