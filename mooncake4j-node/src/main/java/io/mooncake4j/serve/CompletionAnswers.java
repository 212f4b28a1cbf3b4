package io.mooncake4j.serve;

import io.mooncake4j.http.Exchange;
import io.mooncake4j.internal.json.Json;
import io.mooncake4j.sim.SimResult;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;

/**
 * The answers of one {@link ServeNode} to {@code /v1/completions} and {@code /v1/chat/completions}: the
 * whole JSON response, and the server-sent-event stream, token by token for the synthetic model and as
 * decoded text held back before a possible stop string for a real one. It only formats and writes; the
 * node owns the request's admission, its engine request and its slots.
 *
 * <p>Threads: called on the HTTP exchange's virtual thread; stateless besides its final fields.
 */
final class CompletionAnswers {

    /** The token queue's end marker: the engine is done with the request. */
    static final int DONE = -1;

    /** Why a real model's request was ended early: a stop string or end-of-sequence token (not an error). */
    static final String STOPPED = "stopped: a stop string or end-of-sequence token";

    private final TextModel text;
    private final String servedModelName;
    private final long created;

    CompletionAnswers(TextModel text, String servedModelName, long created) {
        this.text = text;
        this.servedModelName = servedModelName;
        this.created = created;
    }

    /** The result, or the error to answer with when the engine failed the request. */
    SimResult await(CompletableFuture<SimResult> f) {
        SimResult r;
        try {
            r = f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new OpenAiError(503, "ServiceUnavailableError", null, "interrupted");
        } catch (ExecutionException e) {
            throw new OpenAiError(503, "ServiceUnavailableError", null, "the engine stopped before the request "
                    + "finished: " + e.getCause().getMessage());
        }
        if (r.error() != null && !STOPPED.equals(r.error())) {
            throw new OpenAiError(500, "InternalServerError", null, "request " + r.requestId() + " failed: " + r.error());
        }
        return r;
    }

    Map<String, Object> response(CompletionRequest req, String id, SimResult r,
            Map<String, Object> returnedParams) {
        TextAnswer answer = text.real()
                ? TextAnswer.of(text, req.stop(), r.outputTokens(), r.outputTokens().length)
                : new TextAnswer(SyntheticTokenizer.decode(r.outputTokens()), r.outputTokens().length, false, null);
        String text = answer.text();
        Map<String, Object> choice = new LinkedHashMap<>();
        choice.put("index", 0);
        if (req.chat()) {
            Map<String, Object> msg = new LinkedHashMap<>();
            msg.put("role", "assistant");
            msg.put("content", text);
            msg.put("tool_calls", List.of());
            choice.put("message", msg);
        } else {
            choice.put("text", text);
        }
        choice.put("logprobs", null);
        choice.put("finish_reason", answer.finishReason());
        choice.put("stop_reason", answer.stopReason());
        Map<String, Object> m = header(req, id, false);
        m.put("choices", List.of(choice));
        m.put("usage", usage(r.promptTokens(), answer.tokens()));
        m.put("prompt_logprobs", null);
        m.put("kv_transfer_params", returnedParams);
        return m;
    }

    private Map<String, Object> header(CompletionRequest req, String id, boolean chunk) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", id);
        m.put("object", req.chat() ? (chunk ? "chat.completion.chunk" : "chat.completion")
                : "text_completion");
        m.put("created", created);
        m.put("model", servedModelName);
        return m;
    }

    private static Map<String, Object> usage(int prompt, int completion) {
        Map<String, Object> u = new LinkedHashMap<>();
        u.put("prompt_tokens", prompt);
        u.put("total_tokens", prompt + completion);
        u.put("completion_tokens", completion);
        u.put("prompt_tokens_details", null);
        return u;
    }

    void stream(Exchange ex, CompletionRequest req, String id, CompletableFuture<SimResult> f,
            BlockingQueue<Integer> tokens) throws IOException {
        int first = take(tokens);
        if (first == DONE) {
            await(f); // the request failed before its first token: a plain error response
            throw new OpenAiError(500, "InternalServerError", null, "request finished without a token");
        }
        ex.setHeader("Content-Type", "text/event-stream; charset=utf-8");
        ex.setHeader("Cache-Control", "no-cache");
        ex.sendResponseHeaders(200, 0);
        OutputStream out = ex.responseBody();
        if (req.chat()) {
            Map<String, Object> delta = new LinkedHashMap<>();
            delta.put("role", "assistant");
            delta.put("content", "");
            event(out, chunk(req, id, delta, null), true);
        }
        if (text.real()) {
            streamText(out, req, id, f, tokens, first);
            return;
        }
        int sent = 0;
        for (int t = first; t != DONE; t = take(tokens)) {
            sent++;
            String piece = SyntheticTokenizer.decode(t);
            Object payload = req.chat() ? Map.of("content", piece) : piece;
            boolean last = sent == req.maxTokens();
            // each token goes out as it is made; the last one waits for the end of the request (the same
            // engine step), so that it, the usage and [DONE] leave in one write instead of three
            event(out, chunk(req, id, payload, last ? "length" : null), !last);
        }
        String error = null;
        try {
            SimResult r = f.get();
            error = r.error();
        } catch (ExecutionException e) {
            error = "the engine stopped before the request finished: " + e.getCause().getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            error = "interrupted";
        }
        if (error != null || sent < req.maxTokens()) {
            event(out, OpenAiError.body(500, "InternalServerError", null, error != null ? error
                    : "the request ended after " + sent + " of " + req.maxTokens() + " tokens"), false);
        } else if (req.includeUsage()) {
            Map<String, Object> u = header(req, id, true);
            u.put("choices", List.of());
            u.put("usage", usage(req.prompt().length, sent));
            event(out, u, false);
        }
        out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    /**
     * A real model's stream: the text decoded so far, less what might begin a stop string, goes out with
     * each token; the rest, the finish reason and the usage when the request ends.
     */
    private void streamText(OutputStream out, CompletionRequest req, String id, CompletableFuture<SimResult> f,
            BlockingQueue<Integer> tokens, int first) throws IOException {
        int[] got = new int[req.maxTokens()];
        int n = 0;
        int emitted = 0;
        int hold = TextAnswer.holdBack(req.stop());
        boolean ended = false;
        for (int t = first; t != DONE; t = take(tokens)) {
            if (ended || n >= got.length) {
                continue; // tokens after the stop: not part of the answer
            }
            got[n++] = t;
            TextAnswer a = TextAnswer.of(text, req.stop(), got, n);
            ended = a.stopped();
            int upTo = ended ? a.text().length() : Math.max(emitted, a.text().length() - hold);
            if (upTo > emitted) {
                String piece = a.text().substring(emitted, upTo);
                emitted = upTo;
                event(out, chunk(req, id, req.chat() ? Map.of("content", piece) : piece, null), true);
            }
        }
        String error = null;
        try {
            SimResult r = f.get();
            error = STOPPED.equals(r.error()) ? null : r.error();
        } catch (ExecutionException e) {
            error = "the engine stopped before the request finished: " + e.getCause().getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            error = "interrupted";
        }
        TextAnswer a = TextAnswer.of(text, req.stop(), got, n);
        if (error != null || (!a.stopped() && n < req.maxTokens())) {
            event(out, OpenAiError.body(500, "InternalServerError", null, error != null ? error
                    : "the request ended after " + n + " of " + req.maxTokens() + " tokens"), false);
        } else {
            String rest = a.text().length() > emitted ? a.text().substring(emitted) : "";
            Map<String, Object> last = chunk(req, id, req.chat() ? Map.of("content", rest) : rest, a.finishReason());
            @SuppressWarnings("unchecked")
            Map<String, Object> choice = (Map<String, Object>) ((List<?>) last.get("choices")).getFirst();
            choice.put("stop_reason", a.stopReason());
            event(out, last, false);
            if (req.includeUsage()) {
                Map<String, Object> u = header(req, id, true);
                u.put("choices", List.of());
                u.put("usage", usage(req.prompt().length, a.tokens()));
                event(out, u, false);
            }
        }
        out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    private Map<String, Object> chunk(CompletionRequest req, String id, Object payload, String finishReason) {
        Map<String, Object> choice = new LinkedHashMap<>();
        choice.put("index", 0);
        choice.put(req.chat() ? "delta" : "text", payload);
        choice.put("logprobs", null);
        choice.put("finish_reason", finishReason);
        choice.put("stop_reason", null);
        Map<String, Object> m = header(req, id, true);
        m.put("choices", List.of(choice));
        return m;
    }

    /** One server-sent event; {@code flush}: sent now, else with what is written next. */
    private static void event(OutputStream out, Object json, boolean flush) throws IOException {
        out.write(("data: " + Json.write(json) + "\n\n").getBytes(StandardCharsets.UTF_8));
        if (flush) {
            out.flush();
        }
    }

    private static int take(BlockingQueue<Integer> q) {
        try {
            return q.take();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new OpenAiError(503, "ServiceUnavailableError", null, "interrupted");
        }
    }
}
