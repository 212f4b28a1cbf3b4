package io.mooncake4j.proxy;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/** The proxy's counters since start ({@link DisaggProxy#stats()}, and its {@code GET /health}); thread-safe. */
public final class ProxyStats {

    final AtomicLong requests = new AtomicLong();
    final AtomicLong succeeded = new AtomicLong();
    final AtomicLong failedPrefill = new AtomicLong();
    final AtomicLong failedDecode = new AtomicLong();
    final AtomicLong rejected = new AtomicLong();
    final AtomicLong clientsGone = new AtomicLong();
    final AtomicLong retried = new AtomicLong();

    ProxyStats() {
    }

    /** Proxied requests received (after the readiness and size checks). */
    public long requests() {
        return requests.get();
    }

    /**
     * Requests whose D answer was sent to the client whole; counted before the answer's last byte
     * leaves, so a client that has read its answer sees it here.
     */
    public long succeeded() {
        return succeeded.get();
    }

    /** Requests failed because of their P. */
    public long failedPrefill() {
        return failedPrefill.get();
    }

    /** Requests failed because of their D (including broken streams). */
    public long failedDecode() {
        return failedDecode.get();
    }

    /** Requests whose client went away before the answer was complete (P's and D's requests cancelled). */
    public long clientsGone() {
        return clientsGone.get();
    }

    /**
     * Requests tried a second time on another P because the first try failed before anything reached
     * the client (at most once per request).
     */
    public long retried() {
        return retried.get();
    }

    /** Requests refused before routing (not ready, overloaded, bad body). */
    public long rejected() {
        return rejected.get();
    }

    Map<String, Object> asMap() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("requests", requests());
        m.put("succeeded", succeeded());
        m.put("failed_prefill", failedPrefill());
        m.put("failed_decode", failedDecode());
        m.put("rejected", rejected());
        m.put("clients_gone", clientsGone());
        m.put("retried", retried());
        return m;
    }
}
